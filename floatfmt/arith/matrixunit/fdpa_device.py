"""The AMD matrix-unit steps of ``floatfmt.arith.matrixunit.fdpa`` (``e_fdpa``, ``ftz_addmul``, ``tr_fdpa``,
``gtr_fdpa``) written over the array namespace: torch ops on the tensor's device (torch
is never imported here).

``floatfmt.arith.matrixunit.tensorcore_device`` calls ``step`` for a model whose ``algorithm`` is one
of these, once per block of L products along K, exactly where ``floatfmt.arith.matrixunit.tensorcore``
calls ``floatfmt.arith.matrixunit.fdpa.step``; the rules are the ones of ``floatfmt.arith.matrixunit.fdpa``'s module
docstring.  The layout differs only in where K lies: here the products ``P`` and their
exponents ``EP`` have the K axis *first*, ``(l, ..., rows, cols)``, and the accumulator
``c`` has the output shape ``(..., rows, cols)``.

How each step is computed exactly on the device:

* ``tr_fdpa`` / ``gtr_fdpa``: every alignment is a multiplication by a power of two
  (exact) and a rounding to an integer by the one rounding routine (``round_values``
  to a 53-bit integer format, toward zero or down), as ``fdpa._cut``;
* ``ftz_addmul``: each addition is ``floatfmt.arith.ops_device.device_add`` in the step format
  (TwoSum and the remainder class, rounded once to nearest-even), then the flush;
* ``e_fdpa``: the L products and c are summed exactly by
  ``floatfmt.arith.eft_device.exact_sum`` (integer limbs: the sum truncated toward zero to
  float64 and the remainder class of what lies below), which ``round_values`` rounds
  once to the fp32 step format, nearest-even, ties decided by the class even where
  they lie below float64's reach.

Results are float64 tensors of step-format values; NaN is NaN, Inf as the numpy steps
give it, an exact zero +0.
"""

from __future__ import annotations

from typing import Any

from ...core.formats import Format
from .fdpa import STEP_ROUNDINGS, StepModel
from ..limbs import limb_sum as exact_sum
from ..ops import add_rule as device_add
from ...core.rounding import round_values

__all__ = ["step", "flush_to_plus_zero", "scale_parts", "scaled_terms"]

_ALIGNED = Format("aligned", kind="int", bits=53)  # aligned terms as integers (< 2**52)


def flush_to_plus_zero(v: Any, fmt: Format, xp: Any) -> Any:
    """``fdpa.flush_to_plus_zero`` on a float64 tensor: values below fmt's smallest normal
    in magnitude (subnormals, -0) become +0."""
    return xp.where(v.abs() < fmt.smallest_normal, 0.0, v)


def _flush_keep_sign(v: Any, fmt: Format, xp: Any) -> Any:
    return xp.where(v.abs() < fmt.smallest_normal, xp.copysign(0.0, v), v)


def _cut(v: Any, k: Any, mode: str, xp: Any) -> Any:
    """v * 2**k rounded to an integer in ``mode`` (exact scaling, as ``fdpa._cut``)."""
    return round_values(xp.ldexp(v, k), _ALIGNED, mode, "saturate")


def _exponents(v: Any, fmt: Format, zero_exponent: int, xp: Any) -> Any:
    """max(floor(log2|v|), emin) for nonzero finite v (int64), ``zero_exponent`` elsewhere."""
    t = xp.t
    fin = t.isfinite(v) & (v != 0)
    _, e = t.frexp(xp.where(fin, v, 1.0))
    e = t.clamp(e.to(t.int64) - 1, min=fmt.emin)
    return t.where(fin, e, t.full_like(e, zero_exponent))


def _specials(P: Any, c: Any, xp: Any) -> tuple[Any, Any]:
    """(mask, value): where the float64 sum of the non-finite products and c is Inf / NaN."""
    t = xp.t
    total = xp.where(t.isfinite(P), 0.0, P).sum(0) + xp.where(t.isfinite(c), 0.0, c)
    return ~t.isfinite(total), total


def _special_result(r: Any, special: Any, total: Any, xp: Any) -> Any:
    return xp.where(special, xp.where(xp.t.isnan(total), float("nan"), total), r)


def _e_fdpa(P: Any, c: Any, ofmt: Format, xp: Any) -> Any:
    """The L products and c added exactly, rounded once to ofmt (RNE); see the docstring."""
    t = xp.t
    special, total = _specials(P, c, xp)
    T = t.cat([xp.where(t.isfinite(P), P, 0.0), xp.where(t.isfinite(c), c, 0.0)[None]])
    s, cls = exact_sum(T, "nearest_even")
    r = round_values(s, ofmt, "nearest_even", "inf" if ofmt.inf else "saturate", sticky=cls)
    r = xp.where((s == 0) & (cls == 0), 0.0, r)  # an exact zero sum: +0
    return _special_result(r, special, total, xp)


def _ftz_addmul(P: Any, c: Any, L: int, ftz: bool, ofmt: Format, xp: Any) -> Any:
    """Products rounded to ofmt (and flushed); the pairwise tree over L products (a short
    block padded with +0 products); then c + s (see ``fdpa._ftz_addmul``)."""
    t = xp.t

    def flush(v: Any) -> Any:
        return _flush_keep_sign(v, ofmt, xp) if ftz else v

    def add(x: Any, y: Any) -> Any:
        return flush(device_add(x, y, ofmt, "nearest_even", "inf"))

    p = flush(round_values(P, ofmt, "nearest_even", "inf"))
    terms = [p[i] for i in range(p.shape[0])]
    terms += [t.zeros_like(c)] * (L - len(terms))
    while len(terms) > 1:
        nxt = [add(terms[i], terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return add(c, terms[0])


def _set_sum(P: Any, EP: Any, model: StepModel, xp: Any) -> tuple[Any, Any]:
    """One product set of TR / GTR: (S, e), the truncated fused sum S * 2**(e - F)."""
    t = xp.t
    nz = (P != 0) & t.isfinite(P)
    e = t.where(nz, EP, t.full_like(EP, model.zero_exponent)).amax(0)
    y = _cut(xp.where(nz, P, 0.0), (model.F - e)[None], "toward_zero", xp)
    return y.sum(0), e


def _tr_fdpa(P: Any, EP: Any, c: Any, model: StepModel, cfmt: Format, ofmt: Format,
             xp: Any) -> Any:
    t = xp.t
    F = model.F
    if model.product_overflow:
        P = xp.where(P.abs() >= 2.0 ** (ofmt.emax + 1), xp.copysign(float("inf"), P), P)
    special, total = _specials(P, c, xp)
    n = model.interleave
    sums = [_set_sum(P[j::n], EP[j::n], model, xp) for j in range(min(n, P.shape[0]))]
    e_p = sums[0][1]
    for _, e in sums[1:]:
        e_p = t.maximum(e_p, e)
    if len(sums) == 1:
        S = sums[0][0]
    else:  # GTR: each set sum to F bits below 2**e_p
        mode = STEP_ROUNDINGS[model.group_rounding]
        S = sum(_cut(s, e - e_p, mode, xp) for s, e in sums)
    cf = xp.where(t.isfinite(c), c, 0.0)
    e_c = _exponents(cf, cfmt, model.zero_exponent, xp)
    E = t.maximum(e_p, e_c)
    mode = STEP_ROUNDINGS[model.combine_rounding]
    A = _cut(S, e_p - F - (E - model.F2), mode, xp)  # units of 2**(E - F2)
    C = _cut(cf, F - E, mode, xp)  # units of 2**(E - F)
    if model.c_cutoff is not None:
        C = xp.where(e_c < E - model.c_cutoff, 0.0, C)
    units = A + xp.ldexp(C, model.F2 - F)  # below 2**(F2 + 4): exact
    val = xp.ldexp(units, E - model.F2)
    r = round_values(val, ofmt, "nearest_even", "inf" if ofmt.inf else "saturate")
    r = xp.where(units == 0, 0.0, r)
    return _special_result(r, special, total, xp)


def step(P: Any, EP: Any, c: Any, model: StepModel, cfmt: Format, ofmt: Format,
         xp: Any) -> Any:
    """One step of ``model.algorithm`` (``e_fdpa``, ``ftz_addmul``, ``tr_fdpa`` or
    ``gtr_fdpa``) over the first axis of the exact products P (int64 exponents EP), with
    the accumulator c (values of cfmt, P's shape without the first axis); the result's
    values in ofmt, as ``floatfmt.arith.matrixunit.fdpa.step`` gives them."""
    alg = model.algorithm
    if alg == "e_fdpa":
        return _e_fdpa(P, c, ofmt, xp)
    if alg == "ftz_addmul":
        return _ftz_addmul(P, c, model.L, model.ftz, ofmt, xp)
    if alg in ("tr_fdpa", "gtr_fdpa"):
        return _tr_fdpa(P, EP, c, model, cfmt, ofmt, xp)
    raise ValueError(f"no separate device step for algorithm {alg!r}; steps here: "
                     "e_fdpa, ftz_addmul, tr_fdpa, gtr_fdpa")


# ---------------------------------------------------------------------------------------------
# Block-scaled T-FDPA (Blackwell ST-FDPA / GST-FDPA): the terms of ``fdpa.scaled_terms``
def scale_parts(s: Any, fmt: Format, xp: Any) -> tuple[Any, Any]:
    """``fdpa.scale_parts`` on a float64 tensor: (significand, exponent) of |s| with
    e = max(floor(log2|s|), emin); NaN scales a NaN significand, zero scales zero."""
    t = xp.t
    a = s.abs()
    fin = t.isfinite(a) & (a != 0)
    _, e = t.frexp(xp.where(fin, a, 1.0))
    e = t.where(fin, t.clamp(e.to(t.int64) - 1, min=fmt.emin), t.full_like(e, fmt.emin,
                                                                           dtype=t.int64))
    return xp.where(t.isfinite(a), xp.ldexp(a, -e), float("nan")), e


def scaled_terms(x: Any, sx: Any, y: Any, sy: Any, elem: Format, scale_fmt: Format,
                 scale_block: int, group: int, xp: Any, zero_exponent: int = -126) -> tuple[Any, Any]:
    """``fdpa.scaled_terms`` on tensors: the terms (..., M, N, n) block-scaled T-FDPA adds
    for ``x @ y`` and their exponents (ST: scaled products, exponent e_x + e_y + e(s_x) +
    e(s_y); GST: scaled exact sums of ``group`` products, exponent e(s_x) + e(s_y), kept
    for a zero sum, a zero scale's exponent ``zero_exponent``)."""
    t = xp.t
    K = x.shape[-1]
    if group > 1 and K % group:
        pad = group - K % group
        x = t.cat([x, t.zeros(tuple(x.shape[:-1]) + (pad,), dtype=x.dtype, device=x.device)], -1)
        y = t.cat([y, t.zeros(tuple(y.shape[:-2]) + (pad, y.shape[-1]), dtype=y.dtype,
                              device=y.device)], -2)
        K += pad
    sig_x, e_x = scale_parts(sx, scale_fmt, xp)
    sig_y, e_y = scale_parts(sy, scale_fmt, xp)
    per, n = scale_block // group, K // group  # terms per scale, terms

    def expand(v: Any, axis: int) -> Any:
        return v.repeat_interleave(per, dim=axis).narrow(axis, 0, n)

    ax = xp.ldexp(expand(sig_x, -1), expand(e_x, -1))  # |s_x| per term: (..., M, n)
    ayt = xp.ldexp(expand(sig_y, -2), expand(e_y, -2)).transpose(-1, -2)  # (..., N, n)
    ex_s, eyt_s = expand(e_x, -1), expand(e_y, -2).transpose(-1, -2)
    yt = y.transpose(-1, -2)  # (..., N, K)
    if group == 1:
        T = (x * ax)[..., :, None, :] * (yt * ayt)[..., None, :, :]
        ET = (_exponents(x, elem, 0, xp) + ex_s)[..., :, None, :] \
            + (_exponents(yt, elem, 0, xp) + eyt_s)[..., None, :, :]
    else:  # sums of `group` products: exact in float64 in any order (narrow elements)
        ex_s = t.where(expand(sig_x, -1) == 0, zero_exponent, ex_s)
        eyt_s = t.where(expand(sig_y, -2).transpose(-1, -2) == 0, zero_exponent, eyt_s)
        xg = x.reshape(tuple(x.shape[:-1]) + (n, group))
        yg = yt.reshape(tuple(yt.shape[:-1]) + (n, group))
        sums = t.einsum("...mgk,...ngk->...mng", xg, yg)
        T = sums * ax[..., :, None, :] * ayt[..., None, :, :]
        ET = ex_s[..., :, None, :] + eyt_s[..., None, :, :]
    return T, ET
