"""Host time per call of enqueueing GPU work, shared by the benchmarks here."""

from __future__ import annotations

import statistics
import time

import torch


def host_us(f, calls=500, batches=20) -> float:
    """Median host time per call to enqueue `calls` calls (the device drains
    between batches, so the launch queue never pushes back)."""
    for _ in range(50):
        f()
    out = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        out.append((time.perf_counter() - t0) * 1e6 / calls)
    torch.cuda.synchronize()
    return statistics.median(out)
