#!/usr/bin/env python3
"""Writes the sample activations file for the fp8scale-pipeline input reader.

The file is written by the `safetensors` package itself (safetensors.numpy,
bf16 through ml_dtypes), so the C++ reader is tested against the reference
writer's bytes. The values are a fixed pattern, not random numbers, so that the
C++ test computes every expected element on its own:

    v(i) = ((37 * i + salt) % 251 - 125) / 16,  times 16 where i % last_dim % 97 == 3

for the flat index i (a few "outlier channels", as real activations have).
Every value is a multiple of 1/16 of magnitude <= 125, exact in bf16, fp16 and
fp32. Besides the three activation tensors the file holds special bf16 / fp16
bit patterns (+-0, +-inf, NaN, subnormals, max), an I64 tensor (listed by the
reader but not loadable as float), an empty F32 tensor and an F32 scalar.

    python3 tools/make_sample_safetensors.py [OUT]        write (default tests/data/sample_activations.safetensors)
    python3 tools/make_sample_safetensors.py --check [F]  regenerate, compare with F byte for byte
    python3 tools/make_sample_safetensors.py --broken DIR write a small valid file and one broken
                                                          variant per header rule into DIR
"""
import argparse
import json
import struct
import sys
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import safetensors
from safetensors.numpy import save, save_file

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "sample_activations.safetensors"

# name -> (shape, dtype, salt): the activation tensors (keep in sync with
# tests/pipeline/test_safetensors.cpp).
ACTIVATIONS = {
    "layers.0.attn_out": ((17, 16, 128), ml_dtypes.bfloat16, 0),
    "layers.0.mlp_gate_up": ((17, 4096), np.float16, 1),
    "layers.0.hidden": ((17, 7168), np.float32, 2),
}
SPECIALS_BF16 = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x7F7F, 0x3F81, 0x0080, 0xC2F6]
SPECIALS_F16 = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x7BFF, 0x3C01, 0x0400, 0x83FF]


def pattern(shape, salt):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    v = ((37 * i + salt) % 251 - 125).astype(np.float32) / 16
    v = np.where(i % shape[-1] % 97 == 3, v * 16, v)
    return v.reshape(shape)


def sample_tensors():
    tensors = {name: pattern(shape, salt).astype(dtype) for name, (shape, dtype, salt) in ACTIVATIONS.items()}
    tensors["layers.0.token_ids"] = (1000 * np.arange(17, dtype=np.int64) + 7)
    tensors["layers.0.empty"] = np.zeros((0, 128), dtype=np.float32)
    tensors["layers.0.input_scale"] = np.array(0.0078125, dtype=np.float32)
    tensors["specials.bf16"] = np.array(SPECIALS_BF16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    tensors["specials.f16"] = np.array(SPECIALS_F16, dtype=np.uint16).view(np.float16)
    return tensors


METADATA = {"producer": "tools/make_sample_safetensors.py"}  # one key: the writer's order of several varies


def write_sample(out: Path) -> None:
    save_file(sample_tensors(), str(out), metadata=METADATA)
    size = out.stat().st_size
    print(f"{out}: {size} bytes, safetensors {safetensors.__version__}, numpy {np.__version__}, "
          f"ml_dtypes {ml_dtypes.__version__}")
    if size >= 2 * 1024 * 1024:
        raise SystemExit(f"{out}: {size} bytes, the sample must stay below 2 MiB")


# --- broken variants -----------------------------------------------------------

def split(raw: bytes):
    (n,) = struct.unpack_from("<Q", raw, 0)
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(header, data: bytes) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # padded to 8 bytes, as the writer does
    return struct.pack("<Q", len(text)) + text + data


def broken_variants(raw: bytes):
    header, data = split(raw)
    (n,) = struct.unpack_from("<Q", raw, 0)
    body = raw[8:]

    def edited(fn):
        h = json.loads(json.dumps(header))
        fn(h)
        return join(h, data)

    def overlap(h):
        h["b"]["data_offsets"] = [o - 4 for o in h["b"]["data_offsets"]]

    def set_field(tensor, field, value):
        return lambda h: h[tensor].__setitem__(field, value)

    cut = raw[8:8 + n // 2]
    return {
        # wrong header length: past the end of the file, shorter than the JSON, absurdly large
        "header_length_past_end": struct.pack("<Q", len(raw)) + body,
        "header_length_short": struct.pack("<Q", n - 16) + body,  # past the padding: cuts the JSON
        "header_too_large": struct.pack("<Q", 1 << 40) + body,
        # the data buffer ends before the last tensor does
        "offsets_past_end": raw[:-16],
        "overlapping_offsets": edited(overlap),
        "unknown_dtype": edited(set_field("a", "dtype", "BF17")),
        "shape_mismatch": edited(set_field("a", "shape", [4, 7])),
        "negative_dim": edited(set_field("c", "shape", [-4])),
        "truncated_json": struct.pack("<Q", len(cut)) + cut,
        "not_an_object": join([1, 2, 3], b""),
    }


def write_broken(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    valid = save({
        "a": pattern((4, 8), 0).astype(ml_dtypes.bfloat16),  # bytes [16, 80) of the data buffer
        "b": pattern((4, 8), 1).astype(np.float16),          # [80, 144)
        "c": pattern((4,), 2),                               # [0, 16): the writer puts F32 first
    })
    (out_dir / "valid_small.safetensors").write_bytes(valid)
    variants = broken_variants(valid)
    for name, raw in variants.items():
        (out_dir / f"{name}.safetensors").write_bytes(raw)
    print(f"{out_dir}: valid_small + {len(variants)} broken variants: {', '.join(variants)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--check", action="store_true", help="regenerate and compare with OUT byte for byte")
    ap.add_argument("--broken", type=Path, metavar="DIR", help="write broken variants into DIR")
    args = ap.parse_args()
    if args.broken:
        write_broken(args.broken)
        return 0
    if not args.check:
        write_sample(args.out)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh_path = Path(tmp) / "sample.safetensors"
        write_sample(fresh_path)
        fresh, committed = fresh_path.read_bytes(), args.out.read_bytes()
    if fresh != committed:
        at = next((i for i, (x, y) in enumerate(zip(fresh, committed)) if x != y), min(len(fresh), len(committed)))
        print(f"{args.out}: differs from a fresh write at byte {at} "
              f"({len(committed)} bytes committed, {len(fresh)} written now)")
        return 1
    print(f"{args.out}: re-derived byte for byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
