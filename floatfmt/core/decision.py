"""One value, and why: ``decide`` rounds one value as ``round_values`` does and reports
how (a ``Decision``), for the explanations (``ff.explain``) and ``cast.rounding_decision``.

Every field is read from the routine's own results, so an explanation cannot disagree
with ``cast``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .formats import Format
from .modes import STOCHASTIC, resolve_overflow
from .rounding import daz_flush, round_chunk, round_values

__all__ = ["Decision", "decide"]

# --------------------------------------------------------------- one value, and why
@dataclass(frozen=True)
class Decision:
    """What the rounding routine did with one value, for explanations (``decide``).

    Every field is read from the routine's own results (``round_values`` for
    the stored value, its unbounded-range rounding for the neighbours and the
    choice), never from a second statement of the rules.

    value : the stored value, exactly what ``round_values`` (so ``cast``) returns.
    input : the float64 value the routine rounded (after daz; +-Inf / NaN kept).
    sticky : its remainder class (see ``round_values``).
    special : ``"nan"`` or ``"inf"`` for a NaN or infinite input, else None.
    daz : True when daz turned a nonzero input into zero before rounding.
    invalid : True when the format has no value of this kind at all (a negative
        value or zero in an unsigned float format such as E8M0): the result is NaN.
    beyond : True when |input| is so far past the format's range that the routine
        clamps the exponent (|x| >= 2**(emax + 2)) or the input is past float64:
        no neighbours are reported, only the overflow.
    lower, upper : Fractions, the values of the format's grid with an unbounded
        range just below and above the input (``round_values`` in modes
        ``down`` / ``up`` before range handling); equal when the input is on the
        grid; either may lie outside the format's range.  None when special,
        invalid or beyond.
    rounded : the neighbour the mode chose, before range handling (a Fraction;
        None when special, invalid, beyond, or a stochastic draw that the result
        cannot reveal, see ``chosen``).
    chosen : ``"exact"``, ``"lower"``, ``"upper"``, or ``"either"`` (stochastic
        only: both neighbours would be stored as the same value, e.g. both
        saturate), or None (special / invalid / beyond).
    nearer : ``"lower"`` or ``"upper"`` (the neighbour nearer to the input), or
        None when exact or a tie.
    tie : True when the input is exactly halfway between the neighbours.
    outside : which neighbours (``"lower"``, ``"upper"``) lie outside the format's
        range (not representable), e.g. ``("lower",)`` for -128.3 in int8.
    out_of_range : ``"above"`` (the rounded value, or for beyond / Inf the input,
        exceeds the largest finite value), ``"below"`` (under the most negative
        value: ``-max``, or an integer format's min, 0 for unsigned integers), or None.
    action : what the range handling did: ``"inf"`` or ``"nan"`` (overflow to
        Inf / NaN), ``"saturate"`` (overflow clipped to the largest finite value by
        the saturate policy or an integer format's clipping), ``"max"`` (overflow
        in a mode that does not round outward: toward_zero, odd, or the directed
        mode pointing back toward zero, gives the largest finite value under the
        inf / nan policies, as IEEE 754 says), ``"wrap"`` (two's complement
        wrap-around), ``"flush"`` (ftz: a subnormal result became zero),
        ``"smallest"`` (a format without zero stores its smallest value for a
        result of 0), or None.
    """

    value: float
    input: float
    sticky: int
    special: str | None = None
    daz: bool = False
    invalid: bool = False
    beyond: bool = False
    lower: Fraction | None = None
    upper: Fraction | None = None
    rounded: Fraction | None = None
    chosen: str | None = None
    nearer: str | None = None
    tie: bool = False
    outside: tuple = ()
    out_of_range: str | None = None
    action: str | None = None


def _same(a: float, b: float) -> bool:
    """Equal as stored values: NaN equals NaN, and the sign of zero counts."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _frac(v: float, fmt: Format) -> Fraction:
    """A neighbour as a Fraction; float64 overflow (+-Inf from the unbounded rounding
    of an fp64-wide format just below 2**1024) stands for +-2**1024."""
    if math.isinf(v):
        return Fraction(2) ** 1024 * (1 if v > 0 else -1)
    return Fraction(v)


def _ulp64(x: float) -> Fraction:
    """Spacing of float64 just above |x| (2**-1074 at zero), exactly."""
    if x == 0:
        return Fraction(2) ** -1074
    e = math.frexp(abs(x))[1] - 1
    return Fraction(2) ** (max(e, -1022) - 52)


def _side_of_midpoint(x: float, sticky: int, mid: Fraction) -> int:
    """-1, 0 or +1: the exact value (x plus its sticky part, away from zero) compared
    with ``mid``, in magnitude."""
    ax, am = abs(Fraction(x)), abs(mid)
    if sticky == 0:
        return (ax > am) - (ax < am)
    if am <= ax:
        return 1  # the sticky part is beyond x
    gap = am - ax
    u = _ulp64(x)
    if gap >= u:
        return -1
    half = u / 2
    if gap != half:  # a midpoint between two float64 values other than halfway: cannot be
        raise AssertionError(f"midpoint {mid} is not on the float64 grid near {x!r}")
    return {1: -1, 2: 0, 3: 1}[sticky]


# size: one value's decision read from the routine's results step by step (special,
# daz, neighbours, choice, range handling), each step a few lines
def decide(x, fmt: Format, mode="nearest_even", overflow=None, *, ftz=False, daz_below=None,
           rng=None, sr_bits=None, sticky=0, resid=None, stored=None) -> Decision:
    """Round one value as ``round_values`` does and report how (a ``Decision``).

    ``x`` is one float64 value, ``sticky`` its remainder class and ``resid``
    (optional) the finer remainder, exactly as ``round_values`` takes them (``cast`` prepares them from any input); the
    other arguments are those of ``round_values`` (canonical mode and policy).
    The stored value is ``round_values``' own result, so it equals ``cast`` for
    the same arguments (a stochastic draw included, given the same ``rng``).
    ``stored``: the result of an earlier call (an element of an array cast),
    used instead of rounding again; for a deterministic mode it must be the
    routine's result (ValueError otherwise).

    The neighbours and the chosen one come from the routine's rounding with an
    unbounded range (modes ``down``, ``up`` and ``mode`` itself); the range
    handling (overflow, saturation, ftz, no zero) is read from the difference
    between that rounding and the stored value.  A stochastic draw is read from
    the stored value: ``chosen`` is ``"either"`` when both neighbours give it.

    >>> from floatfmt.core.formats import get_format
    >>> d = decide(-128.3, get_format("int8"))
    >>> d.lower, d.upper, d.chosen, d.out_of_range, d.value
    (Fraction(-129, 1), Fraction(-128, 1), 'upper', None, -128.0)
    """
    x = float(x)
    sticky = int(sticky or 0)
    policy = resolve_overflow(overflow, fmt)
    st = None if sticky == 0 else np.array([sticky], np.uint8)
    if stored is None:
        value = float(round_values(np.array([x]), fmt, mode, policy, ftz=ftz, daz_below=daz_below,
                                   rng=rng, sr_bits=sr_bits, sticky=st,
                                   resid=None if resid is None else np.array([resid], np.int64))[0])
    else:
        value = float(stored)
    base = dict(value=value, input=x, sticky=sticky)
    if math.isnan(x):
        return Decision(special="nan", **base)
    daz = False
    if daz_below is not None:
        xd, sd, _ = daz_flush(np.array([x]), st, None, daz_below)
        # (a zero with a sticky part, e.g. the decimal 1e-400, is a tiny value: flushed too)
        daz = bool(abs(x) < daz_below and (x != 0 or sticky != 0))
        if daz:
            x, sticky, st = float(xd[0]), 0, None
            base.update(input=x, sticky=0)

    def finish(r: Fraction) -> float:
        """The routine applied to a value already on the grid: only its range handling acts.
        (A format without zero has no input 0 to apply it to: the routine stores its
        smallest value for a result of 0, which the caller reads from ``value``.)"""
        if r == 0 and not fmt.zero:
            return value
        v = float(r) if abs(r) < Fraction(2) ** 1024 else (math.inf if r > 0 else -math.inf)
        if v == 0:
            v = math.copysign(0.0, x)  # a zero result keeps the input's sign, as in the routine
        return float(round_values(np.array([v]), fmt, mode, policy, ftz=ftz,
                                  rng=np.random.default_rng(0), sr_bits=sr_bits)[0])

    # (P3109 unsigned formats take negatives as out of range below, not as invalid)
    unsigned_float = fmt.kind == "float" and not fmt.signed and fmt.rules != "p3109"
    neg = math.copysign(1.0, x) < 0
    if unsigned_float and ((neg and (x != 0 or sticky)) or (not fmt.zero and x == 0 and not sticky)):
        return Decision(invalid=True, daz=daz, **base)
    lo_val = float(fmt.min) if fmt.kind == "int" else (-fmt.max if fmt.signed else 0.0)

    def side(r) -> str | None:
        if r > fmt.max_exact:
            return "above"
        return "below" if r < lo_val else None

    def action(out: str | None, r) -> str | None:
        if out is not None:
            if math.isnan(value):
                return "nan"
            if math.isinf(value):
                return None if (isinstance(r, float) and math.isinf(r)) else "inf"
            return {"wrap": "wrap", "saturate": "saturate"}.get(policy, "max")
        if r != 0 and value == 0:
            return "flush"
        if r == 0 and value != 0:
            return "smallest"
        return None

    out: str | None  # the side of the range a value falls outside, if any
    if math.isinf(x) and not sticky:
        out = "above" if x > 0 else "below"
        return Decision(special="inf", out_of_range=out, action=action(out, x), daz=daz, **base)
    far = fmt.kind == "float" and (math.isinf(x) or (fmt.emax + 2 <= 1023
                                                    and abs(x) >= math.ldexp(1.0, fmt.emax + 2)))
    xs = np.array([x])
    if far:
        out = "above" if x > 0 else "below"
        return Decision(beyond=True, out_of_range=out, action=action(out, Fraction(0)), daz=daz, **base)
    with np.errstate(all="ignore"):
        lower = _frac(float(round_chunk(xs, fmt, "down", st, None, None)[0]), fmt)
        upper = _frac(float(round_chunk(xs, fmt, "up", st, None, None)[0]), fmt)
    if sticky and lower == upper:  # an integer too wide for float64's steps: far past the range
        out = "above" if x > 0 else "below"
        return Decision(beyond=True, out_of_range=out, action=action(out, Fraction(0)), daz=daz, **base)
    tie, nearer = False, None
    if lower != upper:
        s = _side_of_midpoint(x, sticky, (lower + upper) / 2)
        tie = s == 0
        if not tie:  # s > 0: past the midpoint, away from zero
            toward_zero_is_lower = not neg
            near_zero = "lower" if toward_zero_is_lower else "upper"
            far_zero = "upper" if toward_zero_is_lower else "lower"
            nearer = far_zero if s > 0 else near_zero
    outside = tuple(n for n, v in (("lower", lower), ("upper", upper)) if side(v) is not None)
    info = dict(lower=lower, upper=upper, tie=tie, nearer=nearer, daz=daz, **base)
    if lower == upper:
        out = side(lower)
        got = finish(lower)
        if not _same(got, value):
            if stored is not None:
                raise ValueError(f"{value!r} is not {x!r} stored in {fmt.name} ({got!r})")
            raise AssertionError(f"round_values is not idempotent at {x!r}: {got!r} vs {value!r}")
        return Decision(rounded=lower, chosen="exact", out_of_range=out,
                        action=action(out, lower), outside=outside, **info)
    if mode in STOCHASTIC:
        v_lo, v_hi = finish(lower), finish(upper)
        if _same(v_lo, value) and _same(v_hi, value):
            return Decision(chosen="either", outside=outside, **info)
        if not (_same(v_lo, value) or _same(v_hi, value)):
            raise ValueError(f"{value!r} is not a stochastic rounding of {x!r} to {fmt.name}")
        chosen = "lower" if _same(v_lo, value) else "upper"
    else:
        with np.errstate(all="ignore"):
            r = _frac(float(round_chunk(xs, fmt, mode, st, None, sr_bits)[0]), fmt)
        if r not in (lower, upper):
            raise AssertionError(f"rounding {x!r} gave {r}, not a neighbour ({lower}, {upper})")
        chosen = "lower" if r == lower else "upper"
        got = finish(r)
        if not _same(got, value):
            if stored is not None:
                raise ValueError(f"{value!r} is not {x!r} rounded {mode} to {fmt.name} ({got!r})")
            raise AssertionError(f"the rounding of {x!r} ({value!r}) is not its range handling "
                                 f"of {r} ({got!r})")
    r = lower if chosen == "lower" else upper
    out = side(r)
    return Decision(rounded=r, chosen=chosen, out_of_range=out, action=action(out, r),
                    outside=outside, **info)
