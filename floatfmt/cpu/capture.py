"""``python -m floatfmt.cpu.capture --out DIR``: record this CPU's bf16 / fp16 / int8 units.

Runs single instructions on random and edge inputs where the CPU has them, and
``torch.mm`` of bf16 CPU tensors when torch is installed, and writes
``DIR/cpu_capture.npz`` in the layout of ``tests/data/cpu/intel_xeon_amx/`` (its README
lists the keys), plus ``flags`` (the CPU flags found), ``missing`` (the sections not
captured and why) and the ``cpu`` model string.

The instructions come from ``units.c`` (shipped beside this module as source), compiled
now by the system C compiler (``cc``, or ``$CC``) into a temporary folder and loaded with
ctypes; nothing compiled ships with floatfmt, and ``import floatfmt`` never needs a
compiler.  Sections and the flags they need (``/proc/cpuinfo``):

=============  ====================================  ======================================
section        instruction                           flags
=============  ====================================  ======================================
``amx_bf16``   TDPBF16PS (16x32 by 32x16 tiles)      amx_tile amx_bf16 (and the OS grant)
``amx_int8``   TDPBSSD (16x64 by 64x16 tiles)        amx_tile amx_int8 (and the OS grant)
``dp_bf16``    VDPBF16PS                             avx512f avx512_bf16
``cvt_bf16``   VCVTNEPS2BF16                         avx512f avx512_bf16
``fp16``       AVX512-FP16 add, mul, div, sqrt, fma  avx512f avx512_fp16
``torch_mm``   torch.mm of bf16 CPU tensors          torch
=============  ====================================  ======================================

A CPU without a unit is no error: the capture says which flags are missing and records
the rest.  ``floatfmt hw-report DIR`` replays the file against the presets
(``floatfmt.cpu.compare``).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["FLAGS", "cpu_flags", "missing_flags", "build_library", "capture", "main", "KINDS"]

FLAGS = {
    "amx_bf16": ("amx_tile", "amx_bf16"),
    "amx_int8": ("amx_tile", "amx_int8"),
    "dp_bf16": ("avx512f", "avx512_bf16"),
    "cvt_bf16": ("avx512f", "avx512_bf16"),
    "fp16": ("avx512f", "avx512_fp16"),
}
KINDS = ("narrow", "wide", "extreme", "tiny", "subnormal", "flush", "special", "cancel")
SHAPES = ((16, 16, 32), (32, 32, 64), (64, 64, 256), (48, 80, 96), (33, 17, 70),
          (128, 64, 512), (8, 256, 1024))


def cpu_flags() -> tuple[str, set]:
    """(model name, flags) from /proc/cpuinfo; ('', empty set) where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor(), set()
    model, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and not model:
            model = value.strip()
        if key.strip() == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def missing_flags(flags: set) -> dict:
    """{section: the flags it needs that ``flags`` lacks} for the sections that cannot run."""
    return {s: [f for f in need if f not in flags] for s, need in FLAGS.items()
            if any(f not in flags for f in need)}


def build_library(folder: str) -> ctypes.CDLL:
    """Compile units.c into ``folder`` with the system compiler and load it."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc) found: the instruction sections need one "
                           "(set CC); the torch section runs without it")
    src = Path(__file__).with_name("units.c")
    lib = Path(folder) / "floatfmt_cpu_units.so"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


# ---------------------------------------------------------------------------------------------
# Inputs (codes).  bf16 code = sign | exponent field << 7 | 7 fraction bits.
def _bf16(rng, shape, lo, hi) -> np.ndarray:
    """Random normal bf16 codes with unbiased exponents in lo..hi."""
    e = rng.integers(lo, hi + 1, shape) + 127
    return ((rng.integers(0, 2, shape) << 15) | (e << 7) | rng.integers(0, 128, shape)).astype(np.uint16)


def _fp32(rng, shape, lo, hi) -> np.ndarray:
    e = rng.integers(lo, hi + 1, shape) + 127
    return ((rng.integers(0, 2, shape).astype(np.uint32) << 31) | (e.astype(np.uint32) << 23)
            | rng.integers(0, 2 ** 23, shape).astype(np.uint32)).astype(np.uint32)


_SPECIAL16 = np.array([0x7F80, 0xFF80, 0x7FC0, 0x0000, 0x8000, 0x7F7F, 0xFF7F, 0x7F00], np.uint16)
_SPECIAL32 = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0, 0x80000000, 0x7F7FFFFF,
                       0xFF7FFFFF], np.uint32)


def operands(rng, kind: str, ashape: tuple, bshape: tuple, cshape: tuple):
    """bf16 codes a, b and fp32 codes c for one input kind (the fixture's README)."""
    exps = {"narrow": (-3, 3), "wide": (-14, 14), "extreme": (-70, 70), "tiny": (-80, -40),
            "subnormal": (-3, 3), "flush": (-76, -56), "special": (-3, 3), "cancel": (-3, 3)}
    lo, hi = exps[kind]
    a, b = _bf16(rng, ashape, lo, hi), _bf16(rng, bshape, lo, hi)
    c = _fp32(rng, cshape, 2 * lo, 2 * hi) if kind != "flush" else \
        (rng.integers(0, 2 ** 23, cshape).astype(np.uint32)
         | (rng.integers(0, 2, cshape).astype(np.uint32) << 31)) * rng.integers(0, 2, cshape).astype(np.uint32)
    if kind == "flush":  # a third of c just above fp32's smallest normal: results that
        # round to it or below it tell the tininess rule apart (after or before rounding)
        m = rng.random(c.shape) < 1 / 3
        c[m] = (np.uint32(0x00800000) + rng.integers(0, 4, m.sum()).astype(np.uint32)) \
            | (rng.integers(0, 2, m.sum()).astype(np.uint32) << 31)
    if kind == "subnormal":  # bf16 subnormals beside normals
        for v in (a, b):
            m = rng.random(v.shape) < 0.4
            v[m] = (rng.integers(0, 2, m.sum()) << 15 | rng.integers(1, 128, m.sum())).astype(np.uint16)
    if kind == "special":
        for v, pool in ((a, _SPECIAL16), (b, _SPECIAL16), (c, _SPECIAL32)):
            m = rng.random(v.shape) < 0.08
            v[m] = rng.choice(pool, m.sum())
    if kind == "cancel":  # each product is cancelled by the next one: a[k+1] = -a[k], b equal
        a[..., 1::2] = a[..., 0::2] ^ 0x8000
        big = rng.random(a.shape[:-1] + (a.shape[-1] // 2,)) < 0.5
        a[..., 0::2] = np.where(big, _bf16(rng, big.shape, 20, 30), a[..., 0::2])
        a[..., 1::2] = a[..., 0::2] ^ 0x8000
        if bshape[-2] == ashape[-1]:
            b[..., 1::2, :] = b[..., 0::2, :]
    return a, b, c


def _vnni(b: np.ndarray, group: int) -> np.ndarray:
    """(n, K, N) -> the VNNI tile layout (n, K / group, N * group)."""
    n, K, N = b.shape
    return np.ascontiguousarray(b.reshape(n, K // group, group, N).transpose(0, 1, 3, 2)
                                .reshape(n, K // group, N * group))


def _ptr(v, ctype):
    return v.ctypes.data_as(ctypes.POINTER(ctype))


# size: one capture routine: each section's inputs, the call into units.c, and the record
def capture(out: Path, tiles: int = 8, lanes: int = 4096, seed: int = 20261201,
            flags: set | None = None, shapes=SHAPES, log=print) -> dict:
    """Run every section this CPU can run; return the arrays (also written to
    ``out / "cpu_capture.npz"``).  ``flags``: the CPU flags to assume (default: this CPU's)."""
    model, found = cpu_flags()
    flags = found if flags is None else set(flags)
    rec: dict = {"cpu": np.array(model), "seed": np.array(seed),
                 "flags": np.array(sorted(f for f in flags if f.startswith(("amx", "avx512"))))}
    missing = missing_flags(flags)
    for s, need in missing.items():
        log(f"{s}: skipped, this CPU lacks {' '.join(need)}")
    rng = np.random.default_rng(seed)
    runnable = [s for s in FLAGS if s not in missing]
    with tempfile.TemporaryDirectory() as tmp:
        lib = None
        if runnable:
            try:
                lib = build_library(tmp)
            except (RuntimeError, subprocess.CalledProcessError, OSError) as err:
                detail = getattr(err, "stderr", "") or str(err)
                for s in runnable:
                    missing[s] = [f"compiler: {detail.strip()[:200]}"]
                log(f"instruction sections skipped: {detail.strip()[:200]}")
        if lib is not None and any(s.startswith("amx") for s in runnable if s not in missing):
            if lib.ff_amx_request() != 0:
                for s in ("amx_bf16", "amx_int8"):
                    if s not in missing:
                        missing[s] = ["the OS refused the AMX tile state (arch_prctl)"]
                        log(f"{s}: skipped, the OS refused the AMX tile state")
        if lib is not None:
            _instructions(lib, rec, missing, rng, tiles, lanes, log)
    _torch_section(rec, missing, rng, shapes, log)
    rec["missing"] = np.array([f"{s}: {' '.join(v)}" for s, v in missing.items()])
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "cpu_capture.npz", **rec)
    log(f"wrote {out / 'cpu_capture.npz'}")
    return rec


def _instructions(lib, rec, missing, rng, tiles, lanes, log):
    """The sections of units.c this CPU runs, into ``rec``."""
    i32, u16, u8, f32 = ctypes.c_int32, ctypes.c_uint16, ctypes.c_uint8, ctypes.c_float
    if "amx_bf16" not in missing:
        parts = [operands(rng, k, (tiles, 16, 32), (tiles, 32, 16), (tiles, 16, 16)) for k in KINDS]
        a, b, c = (np.ascontiguousarray(np.concatenate(p)) for p in zip(*parts))
        d = np.zeros_like(c)
        bv = _vnni(b, 2)
        lib.ff_tdpbf16ps(len(a), _ptr(a, u16), _ptr(bv, u16), _ptr(c, f32), _ptr(d, f32))
        rec.update(amx_bf16_a=a, amx_bf16_b=b, amx_bf16_c=c, amx_bf16_d=d,
                   amx_bf16_kind=np.repeat(np.array(KINDS), tiles))
        log(f"amx_bf16: {d.size} outputs")
    if "amx_int8" not in missing:
        n = 2 * tiles
        a = rng.integers(-128, 128, (n, 16, 64)).astype(np.int8)
        b = rng.integers(-128, 128, (n, 64, 16)).astype(np.int8)
        c = rng.integers(-2 ** 31, 2 ** 31, (n, 16, 16)).astype(np.int32)
        d = np.zeros_like(c)
        bv = _vnni(b, 4)
        lib.ff_tdpb(0, n, _ptr(a, u8), _ptr(bv, u8), _ptr(c, i32), _ptr(d, i32))
        rec.update(amx_int8_a=a, amx_int8_b=b, amx_int8_c=c, amx_int8_d=d)
        log(f"amx_int8: {d.size} outputs (c over the whole int32 range: sums wrap)")
    if "dp_bf16" not in missing:
        kinds = [k for k in KINDS if k != "cancel"]
        parts = [operands(rng, k, (lanes, 2), (lanes, 2), (lanes,)) for k in kinds]
        a, b, c = (np.ascontiguousarray(np.concatenate(p)) for p in zip(*parts))
        d = np.zeros_like(c)
        lib.ff_vdpbf16ps(len(c), _ptr(a, u16), _ptr(b, u16), _ptr(c, f32), _ptr(d, f32))
        rec.update(dp_bf16_a=a.reshape(-1), dp_bf16_b=b.reshape(-1), dp_bf16_c=c, dp_bf16_d=d,
                   dp_bf16_kind=np.repeat(np.array(kinds), lanes))
        log(f"dp_bf16: {d.size} lanes")
    if "cvt_bf16" not in missing:
        n = 16 * lanes
        x = np.concatenate([rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32),
                            (rng.integers(0, 2 ** 23, n) | (rng.integers(0, 2, n) << 31)).astype(np.uint32),
                            ((_fp32(rng, n, -126, 127) & ~np.uint32(0xFFFF)) | np.uint32(0x8000))])
        y = np.zeros(len(x), np.uint16)
        xf = np.ascontiguousarray(x.view(np.float32))
        lib.ff_cvtneps2bf16(len(x), _ptr(xf, f32), _ptr(y, u16))
        rec.update(cvt_bf16_x=x, cvt_bf16_y=y)
        log(f"cvt_bf16: {y.size} conversions (random codes, subnormals, exact ties)")
    if "fp16" not in missing:
        n = 32 * lanes
        a, b, c = (rng.integers(0, 2 ** 16, n).astype(np.uint16) for _ in range(3))
        outs = {op: np.zeros(n, np.uint16) for op in ("add", "mul", "div", "sqrt", "fma")}
        lib.ff_fp16_ops(n, *(_ptr(v, u16) for v in (a, b, c)), *(_ptr(v, u16) for v in outs.values()))
        rec.update(fp16_a=a, fp16_b=b, fp16_c=c, **{f"fp16_{k}": v for k, v in outs.items()})
        log(f"fp16: {n} of each of add, mul, div, sqrt, fma")


def _torch_section(rec, missing, rng, shapes, log):
    """torch.mm of bf16 CPU tensors (1 thread), if torch is installed."""
    try:
        import torch
    except ImportError:
        missing["torch_mm"] = ['torch is not installed (pip install "floatfmt[torch]")']
        log("torch_mm: skipped, torch is not installed")
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for i, (M, N, K) in enumerate(shapes):
            a, b, _ = operands(rng, "wide", (M, K), (K, N), (1,))
            ta = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
            tb = torch.from_numpy(b.view(np.int16).copy()).view(torch.bfloat16)
            d = torch.mm(ta, tb).view(torch.int16).numpy().view(np.uint16)
            rec.update({f"torch_mm_{i}_a": a, f"torch_mm_{i}_b": b, f"torch_mm_{i}_d": d})
    finally:
        torch.set_num_threads(threads)
    rec["torch_mm_shapes"] = np.array(shapes, np.int64).reshape(-1, 3)
    rec["torch_version"] = np.array(torch.__version__)
    log(f"torch_mm: {len(shapes)} shapes (torch {torch.__version__}, 1 thread)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m floatfmt.cpu.capture", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for cpu_capture.npz")
    p.add_argument("--tiles", type=int, default=8, help="AMX tiles per input kind")
    p.add_argument("--lanes", type=int, default=4096, help="VDPBF16PS lanes per input kind")
    p.add_argument("--seed", type=int, default=20261201)
    args = p.parse_args(argv)
    if platform.machine().lower() not in ("x86_64", "amd64"):
        print(f"this is a {platform.machine()} CPU: only the torch section can run")
    capture(Path(args.out), args.tiles, args.lanes, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
