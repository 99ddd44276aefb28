"""Matrix-unit steps beyond NVIDIA's T-FDPA, and the presets that use them, as data.

MMA-Sim (Xie et al., arXiv 2511.10909 v2, Table 1) names the elementary operation of
every matrix unit it validated.  ``floatfmt.arith.matrixunit.tensorcore`` implements T-FDPA (truncated
fused dot-product-add, NVIDIA); this module adds the others a ``TensorCoreModel``
selects with its ``algorithm`` field (``shared/reference/matrix_units_and_formats.md``
sections 3-8 give the published descriptions):

``e_fdpa`` (AMD CDNA1, MI100, fp16 / bf16)
    The L products and c are added exactly and the sum is rounded once to fp32 with
    round-to-nearest-even (a Kulisch accumulator).
``ftz_addmul`` (AMD CDNA2, MI210 / MI250, fp16 / bf16)
    Subnormal inputs and the initial c are flushed to +0.  Each product is rounded to
    fp32 (RNE) and flushed (sign kept); a tree of fp32 RNE additions, each flushed
    with its sign kept, sums L = 4 products as ``(p0 + p1) + (p2 + p3)`` (L = 2:
    ``p0 + p1``); then ``d = FTZ(d + s)``.
``tr_fdpa`` (AMD CDNA3, MI300, xf32 / bf16 / fp16) and ``gtr_fdpa`` (CDNA3 fp8 FNUZ)
    1. The products are split by index into ``interleave`` sets (1 for TR; 2 for GTR:
       even and odd indices).  Each set is a truncated fused sum: its terms are cut
       toward zero to F bits below 2**e_set (its largest exponent) and added exactly.
    2. GTR: both set sums are rounded (``group_rounding``: ``"floor"``, toward -Inf,
       or ``"toward_zero"``) to F bits below the larger of the two e_set, and added.
    3. E = max(e_p, e_c).  The product sum is rounded (``combine_rounding``, floor) to
       F2 bits below 2**E, c to F bits below 2**E (GTR: c counts as 0 when
       e_c < E - ``c_cutoff``); the two are added exactly.
    4. The sum is rounded once to fp32 with RNE (subnormals kept).
    A product of magnitude at least 2**128 is +-Inf first (``product_overflow``).

The block-scaled T-FDPA variants of Blackwell (``st_fdpa``, ``gst_fdpa``) need no new
step: ``floatfmt.arith.matrixunit.tensorcore.block_scaled_mma`` turns scaled products (ST) or scaled
group sums (GST) into the terms of an ordinary T-FDPA step (see there).

In every step an exponent is ``max(floor(log2|x|), emin)`` of the value's format (a
product's is the sum of its inputs'), and a zero term (a zero product, a zero c) has
the exponent ``zero_exponent`` (-126 in MMA-Sim).  NaN, or +Inf with -Inf, among the
products and c gives NaN; otherwise an Inf is returned as it is; an exact zero is +0.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from .. import eft
from ...backend.namespace import NUMPY, is_tensor, namespace
from ...core.formats import Format
from ...core.rounding import round_values

__all__ = ["ALGORITHMS", "STEP_ROUNDINGS", "rne_add", "EXTRA_GPUS", "EXTRA_ALIASES", "BLOCK_GPUS", "step",
           "flush_to_plus_zero", "scale_parts", "scaled_terms"]

#: MMA-Sim's operation names (paper v2, Table 1) -> what selects them here.
ALGORITHMS = {
    "t_fdpa": "truncated fused dot-product-add (NVIDIA; floatfmt.arith.matrixunit.tensorcore)",
    "e_fdpa": "exact fused dot-product-add, one RNE rounding to fp32 (AMD CDNA1)",
    "ftz_addmul": "fp32 products and a pairwise tree of fp32 adds, flushing subnormals (AMD CDNA2)",
    "tr_fdpa": "truncated product sum, then floor-combined with c, RNE to fp32 (AMD CDNA3)",
    "gtr_fdpa": "tr_fdpa with even / odd product groups (AMD CDNA3 fp8)",
    # (ftz_addmul with ftz=False is the released MMA-Sim's CDNA1 alternative)
    "st_fdpa": "t_fdpa of block-scaled products, one scale pair per step (NVIDIA MXFP8/6/4)",
    "gst_fdpa": "t_fdpa of block-scaled sums of G products (NVIDIA MXFP4 / NVFP4, k=64)",
}
#: Directed roundings of the alignment steps of ``tr_fdpa`` / ``gtr_fdpa``.
STEP_ROUNDINGS = {"floor": "down", "toward_zero": "toward_zero"}

# Aligned terms as integers (below 2**52 in magnitude in every step here).
_ALIGNED = Format("aligned", kind="int", bits=53)


class StepModel(Protocol):
    """The fields of a ``TensorCoreModel`` the steps here read (read-only)."""

    @property
    def algorithm(self) -> str: ...
    @property
    def F(self) -> int: ...
    @property
    def F2(self) -> int: ...
    @property
    def L(self) -> int: ...
    @property
    def zero_exponent(self) -> int: ...
    @property
    def interleave(self) -> int: ...
    @property
    def group_rounding(self) -> str: ...
    @property
    def combine_rounding(self) -> str: ...
    @property
    def c_cutoff(self) -> int | None: ...
    @property
    def product_overflow(self) -> bool: ...
    @property
    def ftz(self) -> bool: ...


def rne_add(x, y, fmt: Format, policy: str):
    """x + y rounded once to fmt with nearest-even (the exact sum and its remainder
    class): the additions of the AMD trees and T-FDPA's ``c_entry="after"``.  numpy
    arrays: ``eft.exact_sum`` (the numpy kernel); tensors: ``ops.add_rule``, the rule
    over the namespace (``tests/test_ops_fast.py`` proves the two equal)."""
    if is_tensor(x) or is_tensor(y):
        from ..ops import add_rule
        return add_rule(x, y, fmt, "nearest_even", policy)
    t, cls = eft.exact_sum(x, y)
    return round_values(t, fmt, "nearest_even", policy, sticky=cls)


def _cut(v, k, mode):
    """``v * 2**k`` rounded to an integer with ``mode`` (toward_zero / down) by the one
    rounding routine; exact scaling (no term here comes near the float64 limits)."""
    xp = namespace(v)
    y = xp.ldexp(v, k)
    return round_values(y, _ALIGNED, mode, "saturate", out=y if xp is NUMPY else None)


def _exponents(v, fmt: Format, zero_exponent: int):
    """max(floor(log2|v|), emin) for nonzero finite v, ``zero_exponent`` elsewhere."""
    xp = namespace(v)
    fin = xp.isfinite(v) & (v != 0)
    with xp.quiet():
        _, e = xp.frexp(xp.where(fin, v, 1.0))
    return xp.where(fin, xp.clamp_min(xp.toint(e) - 1, fmt.emin), zero_exponent)


def _specials(P, c):
    """(mask, value): where the plain float64 sum of the products and c is Inf or NaN."""
    xp = namespace(P)
    with xp.quiet():
        total = xp.where(xp.isfinite(P), 0.0, P).sum(-1) + xp.where(xp.isfinite(c), 0.0, c)
    return ~xp.isfinite(total), total


def _finish_rne(val, exact_zero, special, total, ofmt: Format):
    """val rounded once to ofmt (RNE, Inf past the range); +0 where exact_zero; the
    special value (canonical NaN, or the Inf) where ``special``."""
    xp = namespace(val)
    r = round_values(val, ofmt, "nearest_even", "inf" if ofmt.inf else "saturate")
    r = xp.where(exact_zero, 0.0, r)
    return xp.where(special, xp.where(xp.isnan(total), float("nan"), total), r)


def flush_to_plus_zero(v, fmt: Format):
    """Subnormal values of fmt, and -0, become +0 (an input flush that loses the sign);
    numpy arrays (or array-likes) and tensors."""
    xp = namespace(v)
    v = xp.values(v)
    return xp.where(xp.abs(v) < fmt.smallest_normal, 0.0, v)


def _flush_keep_sign(v, fmt: Format):
    """Results below fmt's smallest normal become a zero of their own sign."""
    xp = namespace(v)
    return xp.where(xp.abs(v) < fmt.smallest_normal, xp.signed(0.0, v), v)


# ---------------------------------------------------------------------------------------------
def _exact_rounded_sum(terms, ofmt: Format):
    """The exact sum of a few float64 arrays rounded once (RNE) to ofmt, exact zero +0:
    the ``"expansion"`` strategy of E-FDPA's sum (numpy arrays).

    Shewchuk's grow-expansion turns the terms into non-overlapping components of
    increasing magnitude (two_sum is exact); adding them from the top stays exact
    until one addition is not, and then everything below only decides the remainder
    class (it is smaller than the last unit of the component just added)."""
    comps: list = []
    for x in terms:
        q = np.asarray(x, np.float64)
        for i, e in enumerate(comps):
            q, h = eft.two_sum(q, e)
            comps[i] = h
        comps.append(q)
    t = np.zeros(np.shape(comps[-1]))
    cls = np.zeros(t.shape, np.uint8)
    for e in reversed(comps):
        exact = cls == 0
        s, c = eft.exact_sum(t, e)
        if c is None:
            c = np.zeros(t.shape, np.uint8)
        # a half-way remainder of an inexact step is pushed off the tie by what is below
        tie = ~exact & (cls == 2) & (e != 0)
        if tie.any():
            away = np.sign(e) == np.sign(t)
            cls = np.where(tie, np.where(away, 3, 1), cls).astype(np.uint8)
        t = np.where(exact, s, t)
        cls = np.where(exact, c, cls).astype(np.uint8)
    r = round_values(t, ofmt, "nearest_even", "inf" if ofmt.inf else "saturate", sticky=cls)
    return np.where((t == 0) & (cls == 0), 0.0, r)


def _limbs_rounded_sum(T, ofmt: Format):
    """The same sum by the ``"limbs"`` strategy (``limbs.limb_sum``, integer limbs, over
    the namespace; T holds the terms on its last axis): the sum truncated toward zero
    to float64 and the remainder class of what lies below, rounded once by the one
    rounding routine."""
    from ..limbs import limb_sum
    xp = namespace(T)
    s, cls = limb_sum(xp.moveaxis(T, -1, 0), "nearest_even")
    r = round_values(s, ofmt, "nearest_even", "inf" if ofmt.inf else "saturate", sticky=cls)
    return xp.where((s == 0) & (cls == 0), 0.0, r)


def _e_fdpa(P, c, ofmt: Format):
    """The L products and c added exactly and rounded once (RNE): numpy arrays by the
    expansion (``_exact_rounded_sum``), tensors by integer limbs (``_limbs_rounded_sum``),
    two strategies of one rule (tests/test_torch_tensorcore.py compares them)."""
    xp = namespace(P)
    special, total = _specials(P, c)
    Pf = xp.where(xp.isfinite(P), P, 0.0)
    cf = xp.where(xp.isfinite(c), c, 0.0)
    if xp is NUMPY:
        r = _exact_rounded_sum([Pf[..., i] for i in range(P.shape[-1])] + [cf], ofmt)
    else:
        r = _limbs_rounded_sum(xp.concatenate([Pf, cf[..., None]], -1), ofmt)
    return xp.where(special, xp.where(xp.isnan(total), float("nan"), total), r)


def _ftz_addmul(P, c, L: int, ftz: bool, ofmt: Format):
    """Products rounded to ofmt and (``ftz``) flushed; the pairwise tree over L products
    (a short last step padded with +0 products, as K padded with zeros); d = FTZ(c + s).
    With ``ftz`` the initial c was flushed to +0 by the caller (``flush_to_plus_zero``)."""
    xp = namespace(P)

    def flush(v):
        return _flush_keep_sign(v, ofmt) if ftz else v

    def add(x, y):
        return flush(rne_add(x, y, ofmt, "inf"))

    with xp.quiet():
        p = flush(round_values(xp.values(P), ofmt, "nearest_even", "inf"))
    terms = [p[..., i] for i in range(p.shape[-1])]
    terms += [xp.zeros(p.shape[:-1], p)] * (L - len(terms))
    while len(terms) > 1:  # (p0 + p1) + (p2 + p3): one tree level at a time
        nxt = [add(terms[i], terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return add(c, terms[0])


def _set_sum(P, EP, model: StepModel):
    """Step 1 of TR / GTR for one set: (S, e) with the truncated fused sum S * 2**(e - F)."""
    xp = namespace(P)
    nz = (P != 0) & xp.isfinite(P)
    e = xp.amax(xp.where(nz, EP, model.zero_exponent), -1)
    y = _cut(xp.where(nz, P, 0.0), (model.F - e)[..., None], "toward_zero")
    return y.sum(-1), e


def _tr_fdpa(P, EP, c, model: StepModel, cfmt: Format, ofmt: Format):
    xp = namespace(P)
    F = model.F
    if model.product_overflow:
        with xp.quiet():
            big = xp.abs(P) >= 2.0 ** (ofmt.emax + 1)
        P = xp.where(big, xp.signed(float("inf"), P), P)
    special, total = _specials(P, c)
    n = model.interleave
    sums = [_set_sum(P[..., j::n], EP[..., j::n], model) for j in range(min(n, P.shape[-1]))]
    e_p = sums[0][1]
    for _, e in sums[1:]:
        e_p = xp.maximum(e_p, e)
    if len(sums) == 1:
        S = sums[0][0]
    else:  # GTR step 2: each set sum to F bits below 2**e_p
        mode = STEP_ROUNDINGS[model.group_rounding]
        S = sum(_cut(s, e - e_p, mode) for s, e in sums)
    cf = xp.where(xp.isfinite(c), c, 0.0)
    e_c = _exponents(cf, cfmt, model.zero_exponent)
    E = xp.maximum(e_p, e_c)
    mode = STEP_ROUNDINGS[model.combine_rounding]
    A = _cut(S, e_p - F - (E - model.F2), mode)  # units of 2**(E - F2)
    C = _cut(cf, F - E, mode)  # units of 2**(E - F)
    if model.c_cutoff is not None:
        C = xp.where(e_c < E - model.c_cutoff, 0.0, C)
    total_units = A + xp.ldexp(C, model.F2 - F)  # below 2**(F2 + 4): exact
    val = xp.ldexp(total_units, E - model.F2)
    return _finish_rne(val, total_units == 0, special, total, ofmt)


def step(P, EP, c, model: StepModel, cfmt: Format, ofmt: Format):
    """One step of ``model.algorithm`` (not ``t_fdpa``) over the last axis of the exact
    products P (exponents EP) with accumulator c (values of cfmt); the result in ofmt.
    numpy arrays (or array-likes) and tensors of any device."""
    xp = namespace(P)
    P = xp.values(P)
    c = xp.values(xp.operand(c, P))
    alg = model.algorithm
    if alg == "e_fdpa":
        return _e_fdpa(P, c, ofmt)
    if alg == "ftz_addmul":
        return _ftz_addmul(P, c, model.L, model.ftz, ofmt)
    if alg in ("tr_fdpa", "gtr_fdpa"):
        return _tr_fdpa(P, EP, c, model, cfmt, ofmt)
    raise ValueError(f"no separate step for algorithm {alg!r}; steps here: "
                     "e_fdpa, ftz_addmul, tr_fdpa, gtr_fdpa")


# ---------------------------------------------------------------------------------------------
# Presets.  Each entry: gpu -> (description, {input format: fields of a TensorCoreModel}).
_CDNA_NOTE = ("Sources: MMA-Sim (Xie et al., arXiv 2511.10909; microsoft/MMA-Sim) and Khattak & "
              "Mikaitis's MATLAB models (arXiv 2512.07004), as summarised in "
              "shared/reference/matrix_units_and_formats.md.")
_E: dict[str, Any] = dict(algorithm="e_fdpa", F=0, rounding="nearest_even", zero_exponent=-126)
_FTZ: dict[str, Any] = dict(algorithm="ftz_addmul", F=0, rounding="nearest_even", zero_exponent=-126, ftz=True,
            product_overflow=True)
_TR: dict[str, Any] = dict(algorithm="tr_fdpa", F=24, F2=31, rounding="nearest_even", zero_exponent=-126,
           product_overflow=True)
_GTR: dict[str, Any] = dict(_TR, algorithm="gtr_fdpa", L=16, interleave=2, c_cutoff=25)

#: Preset tables: gpu -> (description, {input format: TensorCoreModel fields}).
PresetTable = dict[str, tuple[str, dict[str, dict[str, Any]]]]

EXTRA_GPUS: PresetTable = {
    "mi100": ("AMD MI100 (CDNA1): E-FDPA, the products and c added exactly and rounded once "
              "to fp32 (RNE); L = 4 for fp16, 2 for bf16. The released MMA-Sim amd.py models "
              "CDNA1 as the CDNA2 pairwise tree without FTZ instead (a path that only runs on "
              "fp32): the later MMA-Sim code and Khattak & Mikaitis (correct_rounding=1) "
              "agree on E-FDPA; that alternative is "
              "model.replace(algorithm='ftz_addmul', ftz=False, product_overflow=False). "
              + _CDNA_NOTE,
              {"fp16": dict(_E, L=4), "bf16": dict(_E, L=2)}),
    "mi250": ("AMD MI210 / MI250 / MI250X (CDNA2): FTZ-AddMul, L = P = 4 products per tree "
              "((p0 + p1) + (p2 + p3), fp32 RNE adds, subnormals flushed). bf16 is the "
              "'_1k' instruction (P = 4); the older bf16 instructions use P = 2: "
              "model.replace(L=2). Whether -0 survives between instructions is not modelled "
              "(only the first c is flushed). " + _CDNA_NOTE,
              {"fp16": dict(_FTZ, L=4), "bf16": dict(_FTZ, L=4)}),
    "mi300": ("AMD MI300X / MI300A (CDNA3): TR-FDPA for xf32 (tf32 here: the low 13 bits of "
              "each fp32 operand cut, L = 4), bf16 and fp16 (L = 8): products truncated to "
              "F = 24 bits below their own largest exponent, then combined with c by flooring "
              "(toward -Inf) the product sum to F2 = 31 bits and c to 24 bits below "
              "2^max(e_p, e_c), RNE to fp32. That 'asymmetric rounding' is exactly this floor "
              "is read from the code (MMA-Sim, Khattak & Mikaitis armode='rd'), not confirmed "
              "by the paper's text: combine_rounding is a parameter. fp8 (E4M3FNUZ / "
              "E5M2FNUZ, L = 16): GTR-FDPA, even and odd products summed apart, each sum "
              "floored to 24 bits below the larger exponent (an earlier MMA-Sim version "
              "truncates here instead: group_rounding='toward_zero'), c dropped when "
              "e_c < E - 25. " + _CDNA_NOTE,
              {"tf32": dict(_TR, L=4), "bf16": dict(_TR, L=8), "fp16": dict(_TR, L=8),
               "fp8_e4m3fnuz": dict(_GTR), "fp8_e5m2fnuz": dict(_GTR)}),
}
EXTRA_ALIASES = {"cdna1": "mi100", "mi210": "mi250", "mi250x": "mi250", "cdna2": "mi250",
                 "mi300x": "mi300", "mi300a": "mi300", "cdna3": "mi300"}

_BLACKWELL_NOTE = (
    "Block scales are applied inside the instruction (MMA-Sim ST-FDPA / GST-FDPA, validated on "
    "B200; shared/reference/matrix_units_and_formats.md sections 3-4). The exponent a zero term "
    "gets (-126, MMA-Sim's) is unconfirmed when every other term is tiny: zero_exponent is a "
    "parameter. Where c enters is unconfirmed for these kinds too: MMA-Sim aligns it as a term "
    "(c_entry='aligned', used here), while the measured B200 FP8 data of the unscaled kind fits "
    "c added after the products (c_entry='after'); the 'cprec' GPU probes tell them apart. "
    "Not yet measured by floatfmt's own GPU capture (probes in floatfmt.gpu.probes).")
_ST: dict[str, Any] = dict(algorithm="st_fdpa", F=25, L=32, zero_exponent=-126)
_GST: dict[str, Any] = dict(algorithm="gst_fdpa", F=35, L=64, zero_exponent=-126, group=16)

#: Block-scaled presets: gpu -> (description, {block format: TensorCoreModel fields}).  The
#: element format, scale format and scale block come from the block-format registry
#: (``ff.get_block_format``).
BLOCK_GPUS: PresetTable = {
    "b200": ("NVIDIA B200 (Blackwell) block-scaled MMA. MXFP8 / MXFP6 / MXFP4: tcgen05.mma "
             "kind::mxf8f6f4, ST-FDPA: k = 32, one ue8m0 scale per row of A and column of B "
             "per step, each product's exponent e_a + e_b + e(s_a) + e(s_b), then T-FDPA with "
             "F = 25 (c aligned) and RZ to fp32. NVFP4: kind::mxf4nvf4, GST-FDPA: k = 64, "
             "groups of G = 16 fp4 products summed exactly, each group sum times the "
             "significands of its two ue4m3 scales (sign bit ignored) and aligned by the "
             "scales' exponents alone, T-FDPA of the 4 group terms and c with F = 35, RZ to "
             "fp32; Inf handling on that path is unconfirmed. NVFP4's per-tensor fp32 scale "
             "is not part of the instruction. " + _BLACKWELL_NOTE,
             {"mxfp8_e4m3": _ST, "mxfp8_e5m2": _ST, "mxfp6_e2m3": _ST, "mxfp6_e3m2": _ST,
              "mxfp4_e2m1": _ST, "nvfp4": _GST}),
    "b200_mxf4nvf4": ("NVIDIA B200 (Blackwell) tcgen05.mma kind::mxf4nvf4 (GST-FDPA, k = 64, "
                      "G = 16, F = 35, RZ to fp32): MXFP4 with ue8m0 scales per 32, NVFP4 with "
                      "ue4m3 scales per 16. " + _BLACKWELL_NOTE,
                      {"mxfp4_e2m1": _GST, "nvfp4": _GST}),
}


def scale_parts(s, fmt: Format):
    """(significand, exponent) of block-scale values: |s| = sig * 2**e with
    e = max(floor(log2|s|), emin) (the sign of a scale is ignored, as the unit ignores
    the sign bit of a ue4m3 scale); NaN scales keep a NaN significand, zero scales a
    zero one (exponent emin)."""
    xp = namespace(s)
    a = xp.abs(xp.values(s))
    fin = xp.isfinite(a) & (a != 0)
    with xp.quiet():
        _, e = xp.frexp(xp.where(fin, a, 1.0))
    e = xp.where(fin, xp.clamp_min(xp.toint(e) - 1, fmt.emin), fmt.emin)
    return xp.where(xp.isfinite(a), xp.ldexp(a, -e), float("nan")), e


def scaled_terms(x, sx, y, sy, elem: Format, scale_fmt: Format, scale_block: int, group: int,
                 zero_exponent: int = -126, elem_y: Format | None = None):
    """The terms block-scaled T-FDPA adds, for ``x @ y`` (``x``: (..., M, K), ``y``:
    (..., K, N) element values; ``sx``: (..., M, ceil(K / scale_block)), ``sy``:
    (..., ceil(K / scale_block), N) scale values).  Returns (T, ET), shape (..., M, N, n):

    - ``group == 1`` (ST-FDPA): T = x * |s_x| * y * |s_y| (exact), exponent
      e_x + e_y + e(s_x) + e(s_y);
    - ``group == G`` (GST-FDPA): T = (sum of G products x * y) * |s_x| * |s_y| (exact: the
      sums of fp4 products are exact in float64), exponent e(s_x) + e(s_y) alone, kept
      when the group sum is 0 (the step aligns every group term by it); a zero scale's
      exponent there is ``zero_exponent``, as in MMA-Sim.

    K is padded with zero elements to a multiple of ``group``.  ``elem_y``: y's element
    format when it differs from x's (``elem``; the exponents e_y are y's format's).  numpy
    arrays and tensors of any device."""
    xp = namespace(x)
    K = x.shape[-1]
    if group > 1 and K % group:
        pad = group - K % group
        x = xp.concatenate([x, xp.zeros(tuple(x.shape[:-1]) + (pad,), x)], -1)
        y = xp.concatenate([y, xp.zeros(tuple(y.shape[:-2]) + (pad, y.shape[-1]), y)], -2)
        K += pad
    sig_x, e_x = scale_parts(sx, scale_fmt)
    sig_y, e_y = scale_parts(sy, scale_fmt)
    per = scale_block // group  # terms per scale
    n = K // group

    def expand(v, axis):
        return xp.narrow(xp.repeat(v, per, axis), axis, n)

    ax = xp.ldexp(expand(sig_x, -1), expand(e_x, -1))  # |s_x| per term: (..., M, n)
    ay = xp.ldexp(expand(sig_y, -2), expand(e_y, -2))  # (..., n, N)
    ex_s, ey_s = expand(e_x, -1), expand(e_y, -2)
    yt = xp.swapaxes(y, -1, -2)  # (..., N, K)
    ayt, eyt_s = xp.swapaxes(ay, -1, -2), xp.swapaxes(ey_s, -1, -2)  # (..., N, n)
    with xp.quiet():
        if group == 1:
            xs, ys = x * ax, yt * ayt
            T = xs[..., :, None, :] * ys[..., None, :, :]
            ET = (_exponents(x, elem, 0) + ex_s)[..., :, None, :] \
                + (_exponents(yt, elem if elem_y is None else elem_y, 0) + eyt_s)[..., None, :, :]
        else:
            ex_s = xp.where(expand(sig_x, -1) == 0, zero_exponent, ex_s)
            eyt_s = xp.where(xp.swapaxes(expand(sig_y, -2), -1, -2) == 0, zero_exponent, eyt_s)
            xg = x.reshape(tuple(x.shape[:-1]) + (n, group))
            yg = yt.reshape(tuple(yt.shape[:-1]) + (n, group))
            sums = xp.einsum("...mgk,...ngk->...mng", xg, yg)
            T = sums * ax[..., :, None, :] * ayt[..., None, :, :]
            ET = ex_s[..., :, None, :] + eyt_s[..., None, :, :]
    return T, ET
