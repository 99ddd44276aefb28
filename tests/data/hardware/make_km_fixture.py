"""Build km_tensorcore.npz and manifest.json from the Khattak-Mikaitis validation data.

Input: the uint32 copy of their ``model_validation/`` text files (one npz with keys
``GPU/FMT/a_FMT``, ``b_FMT``, ``c_fp32``, ``d_fp32``, ``d_fp16``, every value as float32
bits; see README.md).  Output, next to this file: every array once (GPUs that were given
the same operands share them), each in its format's own code width, checked to convert
back to the input's bits exactly.  Not run by the tests; run by hand:

    python tests/data/hardware/make_km_fixture.py PATH/km_tensorcore_validation.npz
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

HERE = Path(__file__).resolve().parent
FORMATS = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "E4M3": "fp8_e4m3", "E5M2": "fp8_e5m2"}
GPUS = {"V100": "v100", "A100": "a100", "A2": "a2", "Ada": "ada", "H100": "h100", "B200": "b200"}
ROWS = 5000


def to_codes(bits: np.ndarray, fmt: str) -> np.ndarray:
    """float32 bit patterns of values of fmt -> fmt's own codes (checked to be lossless)."""
    f = bits.astype(np.uint32).view(np.float32)
    if fmt == "tf32":
        codes = bits.astype(np.uint32)
        assert not (codes & 0x1FFF).any(), "tf32 values keep 10 fraction bits"
        return codes
    if fmt == "bf16":
        assert not (bits & 0xFFFF).any()
        return (bits >> 16).astype(np.uint16)
    dt = {"fp16": np.float16, "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}[fmt]
    v = f.astype(dt)
    assert np.array_equal(v.astype(np.float32).view(np.uint32), bits), f"not {fmt} values"
    return v.view(np.uint16 if fmt == "fp16" else np.uint8)


def build(src: Path) -> None:
    z = np.load(src)
    arrays: dict[str, np.ndarray] = {}
    by_hash: dict[str, str] = {}

    def put(key: str, arr: np.ndarray) -> str:
        h = hashlib.sha256(arr.dtype.str.encode() + arr.tobytes()).hexdigest()
        if h in by_hash:
            return by_hash[h]
        by_hash[h] = key
        arrays[key] = arr
        return key

    sets = []
    for gpu in GPUS:
        for src_fmt, fmt in FORMATS.items():
            pre = f"{gpu}/{src_fmt}/"
            if pre + "c_fp32" not in z.files:
                continue
            a = z[pre + f"a_{src_fmt}"].reshape(ROWS, -1)
            b = z[pre + f"b_{src_fmt}"].reshape(ROWS, -1)
            k = a.shape[1]
            rec = {"gpu": gpu, "model": GPUS[gpu], "fmt": fmt, "source_fmt": src_fmt, "k": k,
                   "a": put(f"ops/{fmt}_k{k}_{gpu}/a", to_codes(a, fmt)),
                   "b": put(f"ops/{fmt}_k{k}_{gpu}/b", to_codes(b, fmt)),
                   "c": put(f"{gpu}/{fmt}/c", z[pre + "c_fp32"].astype(np.uint32)),
                   "outputs": {}}
            for out in ("fp32", "fp16"):
                if pre + f"d_{out}" not in z.files:
                    continue
                d = z[pre + f"d_{out}"].astype(np.uint32)
                rec["outputs"][out] = {"d": put(f"{gpu}/{fmt}/d_{out}",
                                                d if out == "fp32" else to_codes(d, "fp16")),
                                       "c_used": not (gpu == "H100" and fmt.startswith("fp8")
                                                      and out == "fp32")}
            sets.append(rec)
    np.savez_compressed(HERE / "km_tensorcore.npz", **arrays)
    manifest = json.loads((HERE / "manifest.json").read_text()) if (HERE / "manifest.json").exists() else {}
    manifest["sets"] = sets
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    build(Path(sys.argv[1]))
