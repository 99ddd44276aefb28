"""The T-FDPA step of NVIDIA matrix units, the reference: every product exact, aligned
to the largest exponent, truncated to F fraction bits, summed exactly, rounded once
(``tensorcore``'s module docstring states the rule).  ``fused_dot`` chains the steps.

Written once over the array namespace (``floatfmt.backend.namespace``): the same body
runs numpy arrays and torch tensors of any device.  The K axis of the products is the
last one.  ``_fused`` has two named strategies for the same bits: ``"general"`` (zero
and non-finite products masked) and ``"lean"`` (fewer passes over the products, for
the cases ``lean_ok`` admits; tensors on a device use it); tests/test_tensorcore_fast.py
proves them equal on numpy.  numpy's faster kernel of the whole K chain is
``tensorcore_fast``; ``tensorcore.choose_kernel`` is the one place that picks among them.
"""

from __future__ import annotations

from . import cpuunits, fdpa
from .fdpa import rne_add
from ...backend.namespace import NUMPY, namespace
from ...core.formats import Format, get_format
from ...core.rounding import round_values

from .model import TensorCoreModel

__all__ = ['exponents', 'ALIGNED', 'finish', 'tfdpa_step', 'fused_dot', 'lean_ok',
           'ZERO_OPERAND', 'STRATEGIES']

#: The strategies of one T-FDPA step (``_fused``); both give the same bits.
STRATEGIES = ("general", "lean")


# ---------------------------------------------------------------------------------------------
def exponents(v, fmt: Format):
    """max(floor(log2|v|), emin) for nonzero finite v (int64), emin elsewhere."""
    xp = namespace(v)
    with xp.quiet():
        _, e = xp.frexp(xp.where(xp.isfinite(v), v, 0.0))
    return xp.clamp_min(xp.toint(e) - 1, fmt.emin)


# The aligned terms as integers: a term times 2**(F - e_max) is below 2**(F + 2) <= 2**42 in
# magnitude (F <= 40), so a 53-bit integer format holds every one and never saturates.
ALIGNED = Format("aligned", kind="int", bits=53)

# A zero operand's exponent for the lean strategy: a product with a zero factor gets an
# exponent below every model's zero_exponent floor, so it never sets e_max (the general
# strategy masks such products instead, a pass over every product).
ZERO_OPERAND = -(1 << 40)

_AMD = ("e_fdpa", "ftz_addmul", "tr_fdpa", "gtr_fdpa")


def _align(v, scale, xp):
    """Step 3: ``v * 2**scale`` truncated toward zero to an integer, by the one rounding routine.

    The scaling is exact wherever the result can be nonzero (it only underflows for
    terms far below one unit, which truncate to 0 either way)."""
    y = xp.ldexp(v, scale)
    return round_values(y, ALIGNED, "toward_zero", "saturate", out=y if xp is NUMPY else None)


def lean_ok(m: TensorCoreModel, in_fmt: Format) -> bool:
    """Whether the model's T-FDPA steps may take the ``"lean"`` strategy: the scale
    F - e_max then lies in [-1022, 1022] for every step (e_max is at least the
    zero_exponent floor and at most the largest exponent of a product of two inputs or of
    an accumulator value), so 2**scale and 2**-scale are normal powers read from bits.
    The operands' exponents must then mark zeros with ``ZERO_OPERAND``."""
    hi = max(2 * in_fmt.emax + 1, get_format(m.acc_fmt).emax, m.output_format.emax)
    return (m.algorithm not in _AMD and m.algorithm not in cpuunits.ALGORITHMS
            and in_fmt.kind == "float" and m.F - m.zero_exponent <= 1022
            and hi - m.F <= 1022)


def tfdpa_step(P, EP, c, model: TensorCoreModel, cfmt: Format, ofmt: Format, keep=False,
               strategy: str = "general"):
    """One step over the last axis of the products P (exponents EP) with accumulator c
    (values of ``cfmt``), c entering where ``model.c_entry`` says.  Steps other than
    T-FDPA (AMD) are ``floatfmt.arith.matrixunit.fdpa.step``, Intel's ``cpuunits.step``.
    ``keep``: a zero term keeps its exponent EP in e_max (GST-FDPA's group sums) instead
    of ``zero_exponent``.  ``strategy``: see ``_fused``."""
    xp = namespace(P)
    if model.algorithm in _AMD:
        return fdpa.step(P, EP, c, model, cfmt, ofmt)
    if model.algorithm in cpuunits.ALGORITHMS:  # Intel AMX / AVX512-BF16
        c = xp.copy(xp.broadcast_to(c, P.shape[:-1]))
        return cpuunits.step([P[..., k] for k in range(P.shape[-1])], c, model.algorithm)
    if model.c_entry == "aligned":
        return _fused(P, EP, c, model, cfmt, ofmt, keep, strategy)
    s = _fused(P, EP, xp.zeros(c.shape, c), model, cfmt, ofmt, keep, strategy)  # the products
    policy = "inf" if model.overflow == "inf" and ofmt.inf else "saturate"
    return rne_add(s, c, ofmt, policy)  # then one addition, rounded to nearest-even


def _fused(P, EP, c, model: TensorCoreModel, cfmt: Format, ofmt: Format, keep=False,
           strategy: str = "general"):
    """Steps 2-5 of the module docstring: c is one term of the fused sum (``keep``: see
    ``tfdpa_step``).

    ``strategy="general"``: zero products (unless ``keep``) and non-finite ones are
    masked out of e_max and the sum.  ``"lean"`` (only where ``lean_ok`` holds, zero
    operands' exponents ``ZERO_OPERAND``; not with ``keep``): no masks over the
    products: a zero product's exponent lies below the floor, a lane holding a
    non-finite product is replaced by the float64 total at the end; the truncated terms
    are summed as integers and scaled back once by 2**-scale read from bits."""
    xp = namespace(P)
    F = model.F
    floor = model.zero_exponent
    with xp.quiet():
        total = P.sum(-1) + c  # NaN / Inf detection (finite terms cannot overflow float64)
        special = ~xp.isfinite(total)
        fin_c = xp.isfinite(c)
        cv = xp.where(fin_c, c, 0.0)
        ec = xp.where(cv != 0, exponents(cv, cfmt), floor)
        if strategy == "lean":
            e_max = xp.maximum(xp.clamp_min(xp.amax(EP, -1), floor), ec)
            bits = (F + 1023 - e_max) << 52  # 2**scale, scale = F - e_max in [-1022, 1022]
            up = xp.floats(bits)
            down = xp.floats((2046 << 52) - bits)  # 2**-scale
            y = round_values(P * up[..., None], ALIGNED, "toward_zero", "saturate")
            S = y.sum(-1) + round_values(cv * up, ALIGNED, "toward_zero", "saturate")
            val = S * down
        elif strategy == "general":
            fin_p = xp.isfinite(P)
            nzp = fin_p if keep else (P != 0) & fin_p
            e_max = xp.maximum(xp.amax(xp.where(nzp, EP, floor), -1), ec)
            scale = xp.toint(F - e_max)
            y = _align(xp.where(fin_p, P, 0.0), scale[..., None], xp)
            S = y.sum(-1) + _align(cv, scale, xp)  # integers below 2**(F+8): exact
            val = xp.ldexp(S, -scale)
        else:
            from ...core.names import unknown_name
            raise unknown_name("T-FDPA strategy", strategy, list(STRATEGIES))
    return finish(S, val, special, total, model, ofmt)


def finish(S, val, special, total, model: TensorCoreModel, ofmt: Format):
    """Step 5: the exact sum val (the integer sum S of the aligned terms times
    2**(e_max - F)) rounded once to the step format; +0 for an exact zero; ``total``
    (Inf or NaN) where ``special`` (None: nowhere)."""
    xp = namespace(val)
    mode = model.rounding
    r = round_values(val, ofmt, mode, "inf" if ofmt.inf else "saturate")
    if model.overflow == "inf":
        big = xp.abs(val) >= 2.0 ** (ofmt.emax + 1)
        if xp.some(big):
            r = xp.where(big, xp.signed(float("inf"), val), r)
    else:
        r = xp.clip(r, -ofmt.max, ofmt.max)
    r = xp.where(S == 0, 0.0, r)  # exact zero: +0
    if special is None:
        return r
    return xp.where(special, xp.where(xp.isnan(total), float("nan"), total), r)


def fused_dot(P, EP, model: TensorCoreModel, c=None, keep=False, strategy: str = "general"):
    """Chain fused steps over the last axis of exact products P with exponents EP.

    P, EP: arrays or tensors (..., K).  c: initial accumulator (default +0).  ``keep``:
    zero terms keep their exponent in the alignment (GST-FDPA group sums; see
    ``tfdpa_step``).  ``strategy``: see ``_fused``.  Returns the accumulator values
    (float64, in the model's step format)."""
    xp = namespace(P)
    cfmt = get_format(model.acc_fmt)
    ofmt = model.output_format
    K = P.shape[-1]
    shape = tuple(P.shape[:-1])
    acc = xp.zeros(shape, P) if c is None else \
        xp.copy(xp.broadcast_to(xp.values(xp.operand(c, P)), shape))
    if model.ftz:
        acc = fdpa.flush_to_plus_zero(acc, cfmt)
    for k0 in range(0, K, model.L):
        acc = tfdpa_step(P[..., k0:k0 + model.L], EP[..., k0:k0 + model.L], acc, model, cfmt,
                         ofmt, keep, strategy)
        cfmt = ofmt
    return acc
