"""The T-FDPA step of NVIDIA matrix units, the reference: every product exact, aligned
to the largest exponent, truncated to F fraction bits, summed exactly, rounded once
(``tensorcore``'s module docstring states the rule).  ``fused_dot`` is one step;
``tensorcore_fast`` must give its bits.
"""

from __future__ import annotations

import numpy as np

from .. import eft
from . import cpuunits, fdpa
from ...core.formats import Format, get_format
from ...core.rounding import round_values

from .model import TensorCoreModel

__all__ = ['exponents', 'ALIGNED', 'finish', 'tfdpa_step', 'fused_dot']


# ---------------------------------------------------------------------------------------------
def exponents(v, fmt: Format):
    """max(floor(log2|v|), emin) for nonzero finite v (int64), 0 elsewhere."""
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.where(np.isfinite(v), v, 0.0))
    return np.maximum(e.astype(np.int64) - 1, fmt.emin)


# The aligned terms as integers: a term times 2**(F - e_max) is below 2**(F + 2) <= 2**42 in
# magnitude (F <= 40), so a 53-bit integer format holds every one and never saturates.
ALIGNED = Format("aligned", kind="int", bits=53)


def _align(v, scale):
    """Step 3: ``v * 2**scale`` truncated toward zero to an integer, by the one rounding routine.

    The scaling is exact wherever the result can be nonzero (it only underflows for
    terms far below one unit, which truncate to 0 either way)."""
    y = np.ldexp(v, scale)
    return round_values(y, ALIGNED, "toward_zero", "saturate", out=y)


def tfdpa_step(P, EP, c, model: TensorCoreModel, cfmt: Format, ofmt: Format, keep=False):
    """One step over the last axis of the products P (exponents EP) with accumulator c
    (values of ``cfmt``), c entering where ``model.c_entry`` says.  Steps other than
    T-FDPA (AMD) are ``floatfmt.arith.matrixunit.fdpa.step``.  ``keep``: a zero term keeps its
    exponent EP in e_max (GST-FDPA's group sums) instead of ``zero_exponent``."""
    if model.algorithm in ("e_fdpa", "ftz_addmul", "tr_fdpa", "gtr_fdpa"):
        return fdpa.step(P, EP, c, model, cfmt, ofmt)
    if model.algorithm in cpuunits.ALGORITHMS:  # Intel AMX / AVX512-BF16
        c = np.array(np.broadcast_to(c, P.shape[:-1]), np.float64)
        return cpuunits.step([P[..., k] for k in range(P.shape[-1])], c, model.algorithm)
    if model.c_entry == "aligned":
        return _fused(P, EP, c, model, cfmt, ofmt, keep)
    s = _fused(P, EP, np.zeros(np.shape(c)), model, cfmt, ofmt, keep)  # the products alone
    t, cls = eft.exact_sum(s, c)  # then one addition, rounded to nearest-even
    policy = "inf" if model.overflow == "inf" and ofmt.inf else "saturate"
    return round_values(t, ofmt, "nearest_even", policy, sticky=cls)


def _fused(P, EP, c, model: TensorCoreModel, cfmt: Format, ofmt: Format, keep=False):
    """Steps 2-5 of the module docstring: c is one term of the fused sum (``keep``: see
    ``tfdpa_step``)."""
    F = model.F
    floor = model.zero_exponent
    with np.errstate(invalid="ignore", over="ignore"):
        total = P.sum(-1) + c  # NaN / Inf detection (finite terms cannot overflow float64)
    special = ~np.isfinite(total)
    fin_p = np.isfinite(P)
    nzp = fin_p if keep else (P != 0) & fin_p
    ec = np.where((c != 0) & np.isfinite(c), exponents(c, cfmt), floor)
    e_max = np.maximum(np.where(nzp, EP, floor).max(-1), ec)
    scale = (F - e_max).astype(np.int64)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        y = _align(np.where(fin_p, P, 0.0), scale[..., None])
        yc = _align(np.where(np.isfinite(c), c, 0.0), scale)
        S = y.sum(-1) + yc  # integers below 2**(F+8): exact
        val = np.ldexp(S, -scale)
    return finish(S, val, special, total, model, ofmt)


def finish(S, val, special, total, model: TensorCoreModel, ofmt: Format):
    """Step 5: the exact sum val (the integer sum S of the aligned terms times
    2**(e_max - F)) rounded once to the step format; +0 for an exact zero; ``total``
    (Inf or NaN) where ``special`` (None: nowhere)."""
    mode = model.rounding
    r = round_values(val, ofmt, mode, "inf" if ofmt.inf else "saturate")
    if model.overflow == "inf":
        big = np.abs(val) >= 2.0 ** (ofmt.emax + 1)
        if big.any():
            r = np.where(big, np.copysign(np.inf, val), r)
    else:
        r = np.clip(r, -ofmt.max, ofmt.max)
    r = np.where(S == 0, 0.0, r)  # exact zero: +0
    if special is None:
        return r
    return np.where(special, np.where(np.isnan(total), np.nan, total), r)


def fused_dot(P, EP, model: TensorCoreModel, c=None, keep=False):
    """Chain fused steps over the last axis of exact products P with exponents EP.

    P, EP: arrays (..., K).  c: initial accumulator (default +0).  ``keep``: zero terms
    keep their exponent in the alignment (GST-FDPA group sums; see ``tfdpa_step``).  Returns
    the accumulator values (float64, in the model's step format)."""
    cfmt = get_format(model.acc_fmt)
    ofmt = model.output_format
    K = P.shape[-1]
    acc = np.zeros(P.shape[:-1]) if c is None else np.broadcast_to(np.asarray(c, np.float64),
                                                                     P.shape[:-1]).copy()
    if model.ftz:
        acc = fdpa.flush_to_plus_zero(acc, cfmt)
    for k0 in range(0, max(K, 1), model.L):
        if K == 0:
            break
        acc = tfdpa_step(P[..., k0:k0 + model.L], EP[..., k0:k0 + model.L], acc, model, cfmt, ofmt, keep)
        cfmt = ofmt
    return acc
