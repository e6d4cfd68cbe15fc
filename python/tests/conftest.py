import pytest
import torch

import fp8scale
from fp8scale import _ops

needs_ops = pytest.mark.skipif(not _ops.AVAILABLE, reason=f"fp8scale ops not loaded: {_ops.LOAD_ERROR}")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU tests run on a GPU")
