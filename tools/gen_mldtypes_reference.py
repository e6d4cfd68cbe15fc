#!/usr/bin/env python3
"""Writes the ml_dtypes cross-check data for the host fp8 encode.

ml_dtypes (jax-ml/ml_dtypes) is an fp8 implementation independent of ours and
of NVIDIA's. It rounds to nearest even like we do, but it does not saturate:
values past the format's range become NaN. So this keeps only the inputs that
are finite and below the overflow midpoint (max + half an ulp), where the
conversions must agree exactly, and records ml_dtypes' byte for each.

Inputs: the fp32 bits of the H200 golden files (tests/data/*_h200_*.golden).
Outputs: tests/data/e4m3fn_mldtypes.golden, tests/data/e4m3fnuz_mldtypes.golden
in the same record format (see tests/common/golden.hpp).

    python3 tools/gen_mldtypes_reference.py tests/data           (write)
    python3 tools/gen_mldtypes_reference.py --check tests/data   (re-derive, compare)
"""
import struct
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

MAGIC = b"FP8SCALE-GOLDEN\0"
RECORD = np.dtype([("bits", "<u4"), ("out", "u1")])


def read_golden(path: Path) -> np.ndarray:
    raw = path.read_bytes()
    if raw[:16] != MAGIC:
        raise SystemExit(f"{path}: not a golden file")
    version, count = struct.unpack_from("<II", raw, 16)
    if version != 1 or len(raw) != 24 + 5 * count:
        raise SystemExit(f"{path}: bad header or size")
    return np.frombuffer(raw, dtype=RECORD, offset=24, count=count)


def write_golden(path: Path, bits: np.ndarray, out: np.ndarray) -> None:
    rec = np.empty(len(bits), dtype=RECORD)
    rec["bits"] = bits
    rec["out"] = out
    path.write_bytes(MAGIC + struct.pack("<II", 1, len(bits)) + rec.tobytes())


def generate(data: Path, out_dir: Path) -> None:
    bits = np.concatenate([read_golden(data / "e4m3fn_h200_bf16.golden")["bits"],
                           read_golden(data / "e4m3fn_h200_fp32.golden")["bits"]])
    x = bits.view(np.float32)
    for name, dtype, overflow in (("e4m3fn", ml_dtypes.float8_e4m3fn, 464.0),
                                  ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 248.0)):
        # Below the overflow midpoint, or NaN (both sides give the format's NaN).
        keep = np.isnan(x) | (np.abs(x) < overflow)
        with np.errstate(invalid="ignore"):  # NaN inputs convert to NaN, as intended
            out = x[keep].astype(dtype).view(np.uint8)
        write_golden(out_dir / f"{name}_mldtypes.golden", bits[keep], out)
        print(f"{name}: {keep.sum()} inputs (ml_dtypes {ml_dtypes.__version__})")


def main() -> int:
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    data = Path(args[0] if args else "tests/data")
    if not check:
        generate(data, data)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(data, Path(tmp))
        for name in ("e4m3fn", "e4m3fnuz"):
            fresh = (Path(tmp) / f"{name}_mldtypes.golden").read_bytes()
            committed = (data / f"{name}_mldtypes.golden").read_bytes()
            if fresh != committed:
                print(f"{name}: committed data differs from what ml_dtypes gives now")
                return 1
    print("committed ml_dtypes data re-derived bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
