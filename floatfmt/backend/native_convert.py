"""torch's own float32 -> bfloat16 / float16 conversions as ``cast``'s kernel for float32 CPU
tensors, taken only where this process's torch is shown to give the reference's bits.

``cast(t, name)`` of a float32 CPU tensor ``t`` with ``name`` bf16 or fp16 (under any name:
the same fields), round to nearest even, overflow to Inf, no ``ftz`` / ``daz``, returns
``t.to(dtype).to(torch.float32)`` (past ``CHUNK`` elements a contiguous tensor chunk by chunk,
larger strided views by the numpy kernel) when

* the machine is x86-64.  There torch converts to bfloat16 with integer operations (add
  ``0x7FFF`` plus bit 16 of the pattern, keep the top half) or with VCVTNEPS2BF16, and to
  float16 with VCVTPS2PH (its rounding given by the instruction, not by the control
  register; "MXCSR.FTZ is ignored", and DAZ only zeroes float32 subnormal inputs, which
  round to a zero of their sign in both formats anyway) or with c10's bit-and-float scalar
  code, whose intermediates are never subnormal but for such inputs; back to float32 is
  exact (VCVTPH2PS, or a shift).  Elsewhere (an Arm BFCVT / FCVT follows FPCR's
  flush-to-zero bit) the numpy kernels round;
* the probe, run once per format on first use, gives the bits of ``round_f32``'s numpy
  kernel (the reference, itself proven against MPFR; handed in by ``round_f32``) on every
  float32 exponent field, both signs, and for every count ``d`` of dropped fraction bits
  (1 to 23: the format's normal range and each binade of its subnormals) the dropped bits
  at 1, a tie -1, the tie, a tie +1 and all ones, with the lowest kept bit clear and set
  and the bits above it clear and set (the carry into the exponent, and past the largest
  finite value to Inf); on the whole array (torch's vector loop, and its thread pool
  above its grain size), on every short slice at four offsets (its scalar tails) and on
  strided views; under this thread's floating-point state and under the other one of
  ``torch.set_flush_denormal`` (DAZ and FTZ both set or both clear), so that a later switch
  finds the verdict still true.  VCVTNEPS2BF16, which flushes subnormal inputs and
  results, fails it;
* no element is NaN: torch turns NaNs into its own quiet NaN (bfloat16: every one;
  float16: in its scalar tails), floatfmt keeps the payload (quieted).  A float32 sum of
  the result is NaN when an element is, or when +Inf and -Inf (or partial sums
  overflowing both ways) meet; only then is every element looked at.

Why: one fused pass each way, where the numpy kernels make five (bf16) or eight (fp16, the
scaled kernel).  ``cast`` of float32 tensors of 2**15 / 2**18 / 2**22 / 2**24 standard
normal values to bf16 on one core of the CI machine (an AVX-512 Xeon), ns an element: 0.46 /
0.41 / 0.56 / 1.42 this way, 0.97 / 0.81 / 0.75 / 1.44 by the numpy kernel; on two threads
0.54 / 0.18 / 0.30 / 1.05 against 0.99 / 0.78 / 0.81 / 1.55.  ``gemm="fast"`` casts every
operand, output and gradient of the emulated layers, mostly tensors of 2**13 to 2**17
elements.  tests/test_native_convert.py checks ``cast`` of float32 tensors on all 2**32
float32 patterns against ml_dtypes (bf16) and numpy's float16 (fp16).
"""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np

from .fpu import flushing

__all__ = ["round_native", "available", "FORMATS"]

FORMATS = ("bf16", "fp16")
"""The formats torch converts to natively (torch dtype names below)."""

_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
_STATE: dict = {}


def available(name: str, reference: Any) -> bool:
    """Whether torch's conversion to ``name`` (one of ``FORMATS``) is taken here (x86-64,
    and the probe against ``reference`` passed; probed on the first call for ``name``)."""
    ok = _STATE.get(name)
    if ok is None:
        ok = _STATE[name] = (platform.machine().lower() in ("x86_64", "amd64")
                             and _probe(name, reference))
    return ok


def round_native(t: Any, name: str, reference: Any) -> Any:
    """``t`` (a float32 CPU tensor) rounded to ``name`` (bf16 or fp16) under nearest even
    with overflow to Inf, as float32; None where the reference must round it (not
    ``available``, or a NaN in ``t``: see the module docstring).  ``reference(x, name)``:
    the numpy kernel's rounding of a float32 array under the same rule (the probe's oracle;
    core passes ``round_f32.native_reference``: the backend does not import the layer
    above it).

    Two ties each (bf16 keeps 7 fraction bits, fp16 10), each to the even neighbour, and a
    NaN:

    >>> import torch
    >>> from floatfmt.core.round_f32 import native_reference
    >>> r = round_native(torch.tensor([1 + 2**-8, 1 + 3 * 2**-8]), "bf16", native_reference)
    >>> r is None or r.tolist() == [1.0, 1 + 2**-6]
    True
    >>> r = round_native(torch.tensor([1 + 2**-11, 1 + 3 * 2**-11]), "fp16", native_reference)
    >>> r is None or r.tolist() == [1.0, 1 + 2**-9]
    True
    >>> round_native(torch.tensor([1.0, float("nan")]), "fp16", native_reference) is None
    True
    """
    if not available(name, reference):
        return None
    torch = sys.modules["torch"]
    dtype = getattr(torch, _DTYPES[name])
    n = t.numel()
    if n <= CHUNK:
        r = t.to(dtype).to(torch.float32)
    elif t.is_contiguous():  # chunk by chunk: a cache-sized 16-bit intermediate
        r = torch.from_numpy(np.empty(tuple(t.shape), np.float32))
        src, dst = t.reshape(-1), r.view(-1)
        for i in range(0, n, CHUNK):
            dst[i:i + CHUNK].copy_(src[i:i + CHUNK].to(dtype))
    else:  # (the numpy kernel rounds large strided views in their memory order)
        return None
    s = float(r.sum())
    if s != s and bool(torch.isnan(r).any()):  # (a NaN sum without NaN: +Inf and -Inf)
        return None
    return r


# Tensors past CHUNK elements convert a chunk at a time into memory numpy allocates: the
# whole-tensor round trip's 16-bit intermediate and result are fresh memory from torch's
# allocator, whose first touch of 64 MiB cost 1.2 ns an element against numpy's 0.3 on one
# core of the CI machine (the bf16 round trip of 2**24 elements: 2.9 ns an element, the
# numpy kernel 1.5, this 1.4).
CHUNK = 1 << 18


def _patterns() -> np.ndarray:
    """The probe's float32 bit patterns (no NaN; see the module docstring), unique."""
    fracs = [np.array([0, 0x7FFFFF, 1 << 22], np.uint32)]
    for d in range(1, 24):
        h = 1 << (d - 1)
        low = np.array([1, h - 1, h, h + 1, 2 * h - 1], np.uint32)
        kept = np.array([0, 1 << d], np.uint32) if d < 23 else np.array([0], np.uint32)
        above = np.array([0, 0x7FFFFF & ~((2 << d) - 1)], np.uint32)
        fracs.append((low[:, None, None] | kept[None, :, None] | above[None, None, :]).ravel())
    frac = np.unique(np.concatenate(fracs))
    exp = np.arange(256, dtype=np.uint32) << np.uint32(23)
    sign = np.array([0, 1 << 31], np.uint32)
    u = (sign[:, None, None] | exp[None, :, None] | frac[None, None, :]).ravel()
    nan = (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return u[~nan | ((u & np.uint32(0x7FFFFF)) == 0)]


def _probe(name: str, reference: Any, convert: Any = None) -> bool:
    """``convert`` (a float32 tensor to its ``name`` values as float32; torch's round trip by
    default) equals ``reference`` bit for bit on the probe (module docstring), under both
    states of ``torch.set_flush_denormal`` (this thread's restored after)."""
    torch = sys.modules["torch"]
    if convert is None:
        dtype = getattr(torch, _DTYPES[name])

        def convert(v: Any) -> Any:
            return v.to(dtype).to(torch.float32)
    x = _patterns().view(np.float32)  # (past torch's grain size, 32768)
    want = reference(x, name).view(np.uint32)
    t = torch.from_numpy(x)

    def same(v: Any, w: np.ndarray) -> bool:
        got = convert(v).contiguous().numpy().view(np.uint32)
        return bool(np.array_equal(got.ravel(), w.ravel()))

    def passes() -> bool:
        if not same(t, want):
            return False
        for off in range(4):
            for n in range(1, 40):
                if not same(t[off:off + n], want[off:off + n]):
                    return False
        k = want.size // 4 * 4
        return (same(t[::3], want[::3])
                and same(t[:k].reshape(4, -1).T, want[:k].reshape(4, -1).T)
                and same(t[:k].reshape(-1, 4)[:, 1:3], want[:k].reshape(-1, 4)[:, 1:3]))

    if not passes():
        return False
    was = flushing()
    if not torch.set_flush_denormal(not was):  # (no such mode on this CPU: one state only)
        return True
    try:
        return passes()
    finally:
        torch.set_flush_denormal(was)
