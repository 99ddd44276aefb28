"""Intel CPU matrix units (AMX, AVX-512 BF16) as matrix-unit models, and the evidence for them.

The presets here join the GPU ones in ``ff.tensorcore_models()`` (keys ``"amx/bf16"``,
``"amx/int8"``, ``"avx512/bf16"``) and run wherever a model is accepted (``ff.mma``,
``ff.matmul(..., model=)``, ``ff.dot``, the recipes).  Their steps are not truncated
fused sums but chains of ordinary fp32 additions, so they are new ``algorithm`` names:

``vdpbf16`` (AVX512-BF16 ``VDPBF16PS``, L = 2)
    Intel's pseudo-code: per fp32 lane ``t = c; t += a[2i+1] * b[2i+1]; t += a[2i] * b[2i]``,
    the odd pair first.  Each product is exact (it is not rounded to fp32 first: an
    addition takes the exact product, as an FMA does).
``amx_bf16`` (AMX ``TDPBF16PS``, L = 32)
    Not the manual's sequential pseudo-code.  For one output element the 32 products of
    a row of A and a column of B go into two fp32 partial sums, ``s0`` over even k and
    ``s1`` over odd k, each starting at +0 and taking its products in k order; then
    ``s = s0 + s1`` and ``d = c + s``.

In both, every addition is ``x + y`` of the exact operands rounded once to nearest-even
with fp32's precision and an unbounded exponent, and then (x86's tininess after
rounding, Intel's FTZ) a result below 2**-126 in magnitude is a zero of its sign and one
of at least 2**128 is +-Inf (the capture cannot tell this tininess rule from flushing
the result rounded on fp32's subnormal grid: both reproduce it).  DAZ: bf16 operands and the fp32 accumulator input that are
subnormal are read as zeros of their sign (``TensorCoreModel.daz``; the step flushes c
itself, so every entry point gets it).  NaN and Inf follow IEEE addition (Inf - Inf is
NaN).  A short last step (K not a multiple of L) is padded with +0 products.

The AMX int8 preset (``TDPBSSD``) is the integer path of every int8 model: exact products
and sums, wrapped to int32 (Intel's pseudo-code adds without saturation; the measured
data never overflows, so the wrap is the manual's, not measured).  The four signedness
variants are ``tdpb``.

``ff.matmul(a, b, "bf16", model="amx", out_fmt="bf16")`` is ``torch.mm`` of bf16 CPU tensors
on an AMX Xeon (oneDNN's ``brg_matmul``) as measured: TDPBF16PS chained over K in tiles of 32
(a short last tile for the rest) onto an fp32 accumulator from +0, then one RNE rounding to
bf16; 1 thread, K up to 1024, M and N up to 256.  Not captured, so unknown: how oneDNN
blocks a longer K or splits K between threads, ``torch.bmm`` / ``F.linear`` / convolutions,
and what it does on CPUs without AMX.

Evidence: ``tests/data/cpu/intel_xeon_amx/`` (a capture made by this project on an Intel
Xeon with AMX, its README and manifest) is replayed by ``tests/test_cpu_replay.py`` on
every test run.

Below, the products 1, 2**-24, 0, 2**-24 (2**-24 is half an ulp of 1): AMX adds the two
odd ones first (2**-23) and 1 + 2**-23 is exact; the sequential order rounds each
1 + 2**-24 back to 1 (a tie, to even):

>>> import floatfmt as ff
>>> a, b = [1.0, 2.0**-24, 0.0, 2.0**-24], [1.0, 1.0, 1.0, 1.0]
>>> ff.dot(a, b, "bf16", model="amx"), ff.dot(a, b, "bf16", model="avx512")
(1.0000001192092896, 1.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import eft, ops
from ...core.formats import Format, get_format
from ...backend.namespace import NUMPY, is_tensor, namespace
from ...core.rounding import round_values

__all__ = ["ALGORITHMS", "CPU_UNITS", "CPU_ALIASES", "step", "fp32_add", "read_as_zero",
           "tdpb", "vcvtneps2bf16", "TDPB_KINDS"]

#: The step names a ``TensorCoreModel.algorithm`` may take for the CPU units.
ALGORITHMS = {
    "vdpbf16": "AVX512-BF16 VDPBF16PS: c + odd product + even product, fp32 RNE adds, DAZ/FTZ",
    "amx_bf16": "AMX TDPBF16PS: even-k and odd-k fp32 partial sums from +0, added, then to c; "
                "fp32 RNE adds, DAZ/FTZ",
}

# fp32's precision with float64's exponent range: the rounding before the FTZ test
_WIDE = get_format("e11m23")
_TINY = 2.0 ** -126  # fp32's smallest normal
_HUGE = 2.0 ** 128


def _xp(v: Any):
    return namespace(v) if is_tensor(v) else NUMPY


def read_as_zero(v: Any, fmt: Format) -> Any:
    """DAZ: values of ``fmt`` below its smallest normal in magnitude become zeros of
    their sign (float64 arrays or tensors)."""
    xp = _xp(v)
    return xp.where(xp.abs(v) < fmt.smallest_normal, xp.signed(0.0, v), v)


def fp32_add(x: Any, y: Any) -> Any:
    """One fp32 addition as these units do it: the exact ``x + y`` rounded to nearest
    even with 24 significant bits and an unbounded exponent; then a result below
    2**-126 in magnitude is a zero of its sign (FTZ, tininess after rounding) and one of
    2**128 or more is +-Inf.  numpy arrays or tensors (``ff.add`` rounds on tensors;
    on numpy the same exact sum, ``eft.exact_sum``, goes to the rounding routine).

    >>> float(fp32_add(2.0**-126, -0.75 * 2.0**-150))   # rounds below 2**-126: flushed
    0.0
    """
    if is_tensor(x) or is_tensor(y):
        r = ops.add(x, y, _WIDE)  # the device's ff.add (the operands are in _WIDE already)
    else:  # ff.add's numpy rule without its per-call work: the exact sum, rounded once
        t, cls = eft.exact_sum(x, y)
        r = round_values(t, _WIDE, "nearest_even", "inf", sticky=cls)
    xp = _xp(r)
    a = xp.abs(r)
    r = xp.where(a < _TINY, xp.signed(0.0, r), r)
    return xp.where(a >= _HUGE, xp.signed(np.inf, r), r)


def step(terms: list, c: Any, algorithm: str) -> Any:
    """One instruction of ``algorithm`` for one output element per array position:
    ``terms`` are the L exact products (arrays or tensors of one shape, index k), ``c``
    the accumulator (values of fp32).  The rules are the module docstring's; this one
    function serves numpy arrays and tensors (``floatfmt.arith.matrixunit.tfdpa``)."""
    c = read_as_zero(c, get_format("fp32"))
    xp = _xp(c)
    if algorithm == "vdpbf16":
        t = c
        for k0 in range(0, len(terms), 2):
            pair = terms[k0:k0 + 2]
            odd = pair[1] if len(pair) > 1 else xp.full(pair[0], 0.0, float)  # a +0 pad
            t = fp32_add(fp32_add(t, odd), pair[0])
        return t
    if algorithm == "amx_bf16":
        s0 = s1 = xp.full(c, 0.0, float)  # both partial sums start at +0
        for k, p in enumerate(terms):
            if k % 2:
                s1 = fp32_add(s1, p)
            else:
                s0 = fp32_add(s0, p)
        return fp32_add(c, fp32_add(s0, s1))
    raise ValueError(f"no CPU step {algorithm!r}; steps here: {', '.join(ALGORITHMS)}")


# ---------------------------------------------------------------------------------------------
# Presets: unit -> (description, {input format: TensorCoreModel fields}), as fdpa's tables.
_CAPTURE = ("tests/data/cpu/intel_xeon_amx/ (an Intel Xeon with amx_bf16 amx_int8 avx512_bf16, "
            "captured by this project)")
_BF16: dict[str, Any] = dict(F=0, rounding="nearest_even", daz=True, zero_exponent=-126)

CPU_UNITS: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    "amx": ("Intel AMX (Sapphire Rapids and later Xeons). bf16: TDPBF16PS, one instruction per "
            "32 products of a row-column pair: even-k and odd-k fp32 partial sums from +0 "
            "(RNE, in k order), added, then added to c; DAZ and FTZ (signed zeros). Not the "
            "manual's sequential pseudo-code (it gets 54,370 of 148,480 measured outputs "
            "wrong). Measured: all 148,480 outputs of 580 tiles (kinds narrow, wide, extreme, "
            "tiny, subnormal, flush, special, cancel), 0 mismatches; and torch.mm of bf16 CPU "
            "tensors (oneDNN brg_matmul:avx10_1_512_amx, 1 thread) is this instruction "
            "chained over K tiles of 32 from a +0 accumulator, then RNE to bf16: all 20,017 "
            "outputs of 7 shapes up to K = 1024, 0 mismatches. int8: TDPBSSD, exact int32 "
            "sums (all 10,240 outputs of 40 tiles, 0 mismatches; no sum overflows there, so "
            "the int32 wrap is the manual's, not measured). Evidence: " + _CAPTURE,
            {"bf16": dict(_BF16, algorithm="amx_bf16", L=32), "int8": dict(F=0, L=64)}),
    "avx512": ("Intel / AMD AVX512-BF16 VDPBF16PS: per fp32 lane c + a[2i+1] b[2i+1] + a[2i] "
               "b[2i] as two fp32 RNE additions of exact products in that order (Intel's "
               "pseudo-code); DAZ and FTZ (signed zeros). Measured: all 229,376 lanes "
               "(kinds narrow, wide, extreme, tiny, subnormal, flush, special), 0 mismatches "
               "(the even product first: 10,895 differ). Evidence: " + _CAPTURE,
               {"bf16": dict(_BF16, algorithm="vdpbf16", L=2)}),
}
CPU_ALIASES = {"intel_amx": "amx", "tdpbf16ps": "amx", "sapphire_rapids": "amx",
               "avx512_bf16": "avx512", "vdpbf16ps": "avx512"}

#: TDPB<a><b>D: the signedness of A and B (s: int8, u: uint8).
TDPB_KINDS = {"ssd": (True, True), "sud": (True, False), "usd": (False, True),
              "uud": (False, False)}


def tdpb(a: Any, b: Any, c: Any = 0, kind: str = "ssd") -> np.ndarray:
    """AMX ``TDPBSSD`` / ``TDPBSUD`` / ``TDPBUSD`` / ``TDPBUUD``: D = C + A . B with int8
    or uint8 operands (``kind``: the signedness of A, then B) and int32 C, every product
    and sum exact and the result wrapped to int32 (the manual's pseudo-code: no
    saturation).  ``a``: (..., M, K), ``b``: (..., K, N) integers in their type's range
    (ValueError otherwise); returns int64 values of the int32 result.

    >>> int(tdpb([[255]], [[-1]], [[0]], "usd")[0, 0]), int(tdpb([[1]], [[1]], 2**31 - 1)[0, 0])
    (-255, -2147483648)
    """
    from ...core.names import unknown_name
    if kind not in TDPB_KINDS:
        raise unknown_name("TDPB kind", kind, list(TDPB_KINDS))
    x, y, z = (np.asarray(v) for v in (a, b, c))
    for v, signed, what in ((x, TDPB_KINDS[kind][0], "a"), (y, TDPB_KINDS[kind][1], "b"),
                            (z, None, "c")):
        lo, hi = (-2 ** 31, 2 ** 31 - 1) if signed is None else \
            ((-128, 127) if signed else (0, 255))
        if v.dtype.kind not in "iub" or (v.size and (v.min() < lo or v.max() > hi)):
            raise ValueError(f"tdpb {kind}: {what} must hold integers in {lo}..{hi}")
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise ValueError(f"tdpb: shapes {x.shape} and {y.shape} do not align as (..., M, K) "
                         "and (..., K, N)")
    r = np.matmul(x.astype(np.int64), y.astype(np.int64)) + z.astype(np.int64)
    return (r + 2 ** 31) % 2 ** 32 - 2 ** 31


def vcvtneps2bf16(codes: Any) -> np.ndarray:
    """``VCVTNEPS2BF16`` on fp32 codes (uint32 bit patterns): bf16 codes (uint16).  A
    number is rounded to nearest even with fp32 subnormals read as zeros of their sign
    (the value ``ff.cast(x, "bf16", daz=True)`` gives); a NaN keeps its sign and top
    payload bits and is quieted: ``(code >> 16) | 0x0040``.

    >>> [hex(v) for v in vcvtneps2bf16([0x3F808000, 0x00000001, 0x7F800001])]
    ['0x3f80', '0x0', '0x7fc0']
    """
    from ...core.codec import encode
    x = np.asarray(codes, np.uint32)
    v = x.view(np.float32)  # float32 in: daz reads fp32 subnormals as zero
    nan = np.isnan(v)
    out = np.asarray(encode(np.where(nan, np.float32(0), v), "bf16", daz=True), np.uint16)
    return np.where(nan, ((x >> 16) | 0x40).astype(np.uint16), out)
