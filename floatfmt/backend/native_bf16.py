"""torch's own float32 -> bfloat16 conversion as ``cast``'s kernel for float32 CPU tensors,
taken only where this process's torch is shown to give the reference's bits.

``cast(t, "bf16")`` of a float32 CPU tensor ``t`` (round to nearest even, overflow to Inf,
no ``ftz`` / ``daz``) returns ``t.to(torch.bfloat16).to(torch.float32)`` (past ``CHUNK``
elements a contiguous tensor chunk by chunk, larger strided views by the numpy kernel) when

* the machine is x86-64.  There torch converts either with integer operations (add
  ``0x7FFF`` plus bit 16 of the pattern, keep the top half: round to nearest even, a
  carry moving into the exponent gives the next binade, past the largest finite value
  Inf) or with VCVTNEPS2BF16; neither reads the floating-point control register (the
  DAZ / FTZ bits ``torch.set_flush_denormal`` sets), so one probe decides for the process.
  Elsewhere (an Arm BFCVT follows FPCR's flush-to-zero bit) the numpy kernels round;
* the probe, run once on first use, gives the bits of ``round_f32``'s bit kernel (the
  reference, itself proven against MPFR; handed in by ``round_f32``) on every float32 exponent field, both signs,
  with bit 16 clear and set and the 16 dropped bits at 0, 1, a tie -1, the tie, a tie +1
  and all ones; on the whole array (torch's vector loop, and its thread pool above its
  grain size), on every short slice at four offsets (its scalar tails) and on strided
  views.  VCVTNEPS2BF16, which flushes subnormal inputs and results, fails it;
* no element is NaN: torch turns every NaN into its own quiet NaN, floatfmt keeps the
  payload (quieted).  A float32 sum of the result is NaN when an element is, or when
  +Inf and -Inf (or partial sums overflowing both ways) meet; only then is every
  element looked at.

Why: one fused pass each way, where the numpy bit kernel makes five.  ``cast`` of float32
tensors of 2**15 / 2**18 / 2**22 / 2**24 standard normal values on one core of the CI
machine (an AVX-512 Xeon), ns an element: 0.46 / 0.41 / 0.56 / 1.42 this way, 0.97 /
0.81 / 0.75 / 1.44 by the numpy kernel; on two threads 0.54 / 0.18 / 0.30 / 1.05 against
0.99 / 0.78 / 0.81 / 1.55.  ``gemm="fast"`` casts every operand, output and gradient of
the emulated layers, mostly tensors of 2**13 to 2**17 elements.
tests/test_native_bf16.py checks ``cast`` of float32 tensors on all 2**32 float32
patterns against ml_dtypes.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

import numpy as np

__all__ = ["round_bf16", "available"]

_STATE: dict = {}


def available(reference: Any) -> bool:
    """Whether torch's conversion is taken here (x86-64, and the probe against
    ``reference`` passed; probed on the first call)."""
    ok = _STATE.get("ok")
    if ok is None:
        ok = _STATE["ok"] = platform.machine().lower() in ("x86_64", "amd64") and _probe(reference)
    return ok


def round_bf16(t: Any, reference: Any) -> Any:
    """``t`` (a float32 CPU tensor) rounded to bfloat16 under nearest even with overflow to
    Inf, as float32; None where the reference must round it (not ``available``, or a NaN
    in ``t``: see the module docstring).  ``reference``: the numpy kernel's rounding of a
    float32 array to bf16 under the same rule (the probe's oracle; core passes
    ``round_f32.bf16_reference``: the backend does not import the layer above it).

    Two ties (bf16 keeps 7 fraction bits), each to the even neighbour, and a NaN:

    >>> import torch
    >>> from floatfmt.core.round_f32 import bf16_reference
    >>> r = round_bf16(torch.tensor([1 + 2**-8, 1 + 3 * 2**-8]), bf16_reference)
    >>> r is None or r.tolist() == [1.0, 1 + 2**-6]
    True
    >>> round_bf16(torch.tensor([1.0, float("nan")]), bf16_reference) is None
    True
    """
    if not available(reference):
        return None
    torch = sys.modules["torch"]
    n = t.numel()
    if n <= CHUNK:
        r = t.to(torch.bfloat16).to(torch.float32)
    elif t.is_contiguous():  # chunk by chunk: a cache-sized bfloat16 intermediate
        r = torch.from_numpy(np.empty(tuple(t.shape), np.float32))
        src, dst = t.reshape(-1), r.view(-1)
        for i in range(0, n, CHUNK):
            dst[i:i + CHUNK].copy_(src[i:i + CHUNK].to(torch.bfloat16))
    else:  # (the numpy kernel rounds large strided views in their memory order)
        return None
    s = float(r.sum())
    if s != s and bool(torch.isnan(r).any()):  # (a NaN sum without NaN: +Inf and -Inf)
        return None
    return r


# Tensors past CHUNK elements convert a chunk at a time into memory numpy allocates: the
# whole-tensor round trip's bfloat16 intermediate and result are fresh memory from torch's
# allocator, whose first touch of 64 MiB cost 1.2 ns an element against numpy's 0.3 on one
# core of the CI machine (the round trip of 2**24 elements: 2.9 ns an element, the numpy
# kernel 1.5, this 1.4).
CHUNK = 1 << 18


def _patterns() -> np.ndarray:
    """The probe's float32 bit patterns (no NaN): every exponent field and sign, bit 16
    clear / set, the dropped 16 bits at 0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, and a few
    fraction tops (the carry into the exponent, and past the largest finite to Inf)."""
    exp = np.arange(256, dtype=np.uint32) << np.uint32(23)
    top = np.array([0, 1 << 16, 0x3F << 17, 0x7F << 16], np.uint32)
    low = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    sign = np.array([0, 1 << 31], np.uint32)
    u = (sign[:, None, None, None] | exp[None, :, None, None] | top[None, None, :, None]
         | low[None, None, None, :]).ravel()
    nan = (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return u[~nan | ((u & np.uint32(0x7FFFFF)) == 0)]


def _probe(reference: Any, convert: Any = None) -> bool:
    """``convert`` (a float32 tensor to its bfloat16 values as float32; torch's round trip
    by default) equals ``reference`` bit for bit on the probe (module docstring)."""
    torch = sys.modules["torch"]
    if convert is None:
        def convert(v: Any) -> Any:
            return v.to(torch.bfloat16).to(torch.float32)
    x = np.tile(_patterns().view(np.float32), 6)  # past torch's grain size (32768)
    want = reference(x).view(np.uint32)
    t = torch.from_numpy(x)

    def same(v: Any, w: np.ndarray) -> bool:
        got = convert(v).contiguous().numpy().view(np.uint32)
        return bool(np.array_equal(got.ravel(), w.ravel()))

    if not same(t, want):
        return False
    for off in range(4):
        for n in range(1, 40):
            if not same(t[off:off + n], want[off:off + n]):
                return False
    k = want.size // 4 * 4
    return (same(t[::3], want[::3]) and same(t[:k].reshape(4, -1).T, want[:k].reshape(4, -1).T)
            and same(t[:k].reshape(-1, 4)[:, 1:3], want[:k].reshape(-1, 4)[:, 1:3]))
