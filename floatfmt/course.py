"""Exercise checkers for the assignments in ``notebooks/assignments/``.

``check(exercise_id, answer)`` computes the right answer with floatfmt on the
spot (never a stored constant), prints ``PASS`` or ``FAIL`` with a hint that
does not give the answer away, and returns a ``CheckResult`` (truthy when
passed).  Equivalent forms are accepted: a value as a float, an exact
``Fraction`` or a string (``"0x1p-11"``, ``"2**-11"``), and, where the answer
is a value of a format, its code (an int, ``"0x1001"`` or ``"0b..."``).

    >>> check("fp16-overflow-threshold", 65520, quiet=True).passed
    True
    >>> bool(check("bf16-consecutive-integers", 255, quiet=True))
    False
    >>> exercises()[:2]
    ['fp16-one-plus-x', 'bf16-consecutive-integers']
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from numbers import Real

import numpy as np

from .cast import cast
from .codec import decode, encode, values
from .exact import _parse_string, floor_log2, to_fraction
from .explain import _pow2 as _pow2_or_none
from .formats import get_format, hex_code

__all__ = ["check", "exercises", "CheckResult", "gradient_sample", "activation_sample",
           "grad_max_per_step", "mx_block"]


@dataclass
class CheckResult:
    """Outcome of ``check``: ``passed``, ``exercise`` and the ``message`` shown."""

    passed: bool
    exercise: str
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


class _Wrong(Exception):
    """A wrong answer; the message is the hint."""


# ----------------------------------------------------------------------------- data sets
def gradient_sample(n=100_000, seed=2024) -> np.ndarray:
    """Deterministic stand-in for one step's gradients: random signs, log10
    magnitudes normal around -6 with standard deviation 1 (float64)."""
    rng = np.random.default_rng(seed)
    mags = 10.0 ** rng.normal(-6.0, 1.0, n)
    return np.where(rng.random(n) < 0.5, -mags, mags)


def activation_sample(n=4096, seed=7) -> np.ndarray:
    """Deterministic activations: mostly normal with standard deviation 0.05,
    plus a few outliers between 1 and 3 in magnitude (as LLM activations have)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.05, n)
    idx = rng.choice(n, 8, replace=False)
    x[idx] = rng.choice([-1.0, 1.0], 8) * rng.uniform(1.0, 3.0, 8)
    return x


def grad_max_per_step(steps=24, seed=3) -> np.ndarray:
    """Largest |gradient| (unscaled) at each training step: usually about 1e-2,
    with occasional spikes."""
    rng = np.random.default_rng(seed)
    g = 10.0 ** rng.normal(-2.0, 0.3, steps)
    g[[5, 6, 13]] = [3.0, 1.5, 0.9]
    return g


# ----------------------------------------------------------------------------- answer parsing
_POW = re.compile(r"^\s*([+-]?)\s*2\s*(?:\*\*|\^)\s*\(?\s*([+-]?\d+)\s*\)?\s*$")


def _is_missing(answer) -> bool:
    return answer is None or answer is Ellipsis


def _to_fraction(a, what="answer") -> Fraction:
    """Exact value of a number given as int, float, Fraction, Decimal, numpy
    scalar or string (decimal, hex float, ``2**k``)."""
    if isinstance(a, (bool, np.bool_)):
        raise _Wrong(f"The {what} should be a number, not {a!r}.")
    if isinstance(a, str):
        m = _POW.match(a)
        if m:
            v = Fraction(2) ** int(m[2])
            return -v if m[1] == "-" else v
        try:
            a = _parse_string(a)
        except TypeError:
            raise _Wrong(f"Could not read the {what} {a!r} as a number.") from None
    if isinstance(a, np.generic) and a.dtype.kind not in "iuf":
        a = float(a)
    if isinstance(a, (float, np.floating)) and not np.isfinite(a):
        raise _Wrong(f"The {what} {float(a)!r} is not finite.")
    if isinstance(a, Real) or hasattr(a, "as_integer_ratio"):
        try:
            return to_fraction(a)  # exact, long double included
        except (TypeError, ValueError):
            pass
    raise _Wrong(f"The {what} should be a number, got {type(a).__name__}.")


def _code_string(a):
    """Int of a code given as ``"0x.."``, ``"0b.."`` or a bit string with spaces, else None."""
    if not isinstance(a, str):
        return None
    s = a.strip().lower().replace("_", "")
    try:
        if s.startswith("0x") and "p" not in s and "." not in s:
            return int(s, 16)
        if s.startswith("0b"):
            return int(s[2:].replace(" ", ""), 2)
        if s and set(s) <= set("01 ") and " " in s:
            return int(s.replace(" ", ""), 2)
    except ValueError:
        return None
    return None


def _value_or_code(a, fmt, expected: Fraction):
    """Read an answer that may be a value of ``fmt`` or its code.  Returns
    (value as Fraction, how it was read)."""
    f = get_format(fmt)
    code = _code_string(a)
    if code is None and isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)) \
            and expected.denominator != 1 and 0 <= int(a) < (1 << f.bits):
        code = int(a)  # an int where a fraction is expected: read it as the code
    if code is not None:
        if not 0 <= code < (1 << f.bits):
            raise _Wrong(f"{a!r} is not a {f.bits}-bit {f.name} code.")
        v = decode(code, f)
        if not math.isfinite(v):
            raise _Wrong(f"Code {a!r} is not a finite {f.name} value.")
        return Fraction(v), f"the {f.name} code {hex_code(code, f)}"
    return _to_fraction(a), "the value"


def _pow2(v) -> str:
    """``2^k`` for a positive power of two, else the float's repr."""
    v = Fraction(v)
    return (v > 0 and _pow2_or_none(v)) or repr(float(v))


# ----------------------------------------------------------------------------- exercises
def _ex_one_plus_x(answer, fmt="fp16"):
    """Smallest value x of ``fmt`` with fmt(1 + x) != 1 under round-to-nearest-even."""
    f = get_format(fmt)
    pos = values(f)
    pos = pos[pos > 0]
    # 1 + x is exact in float64 for every value of a format of at most 16 bits.
    moved = cast(1.0 + pos, f) != 1.0
    right = Fraction(float(pos[np.argmax(moved)]))
    got, how = _value_or_code(answer, f, right)
    eps = Fraction(2) ** -f.mbits
    if got == right or cast(got, f) == float(right) and got > right / 2:
        note = "" if got == right else f" (your {float(got)!r} rounds to that {f.name} value)"
        return (f"x = {float(right)!r} = 2^-{f.mbits + 1} + 2^-{2 * f.mbits + 1}{note}: the smallest {f.name} "
                f"number past the midpoint between 1 and 1 + eps, so 1 + x rounds up.")
    if got <= 0:
        raise _Wrong("x must be positive.")
    if got == eps:
        raise _Wrong(f"2^-{f.mbits} (eps) is the gap from 1 to the next {f.name} number. Round-to-nearest "
                     "moves 1 + x to that number for smaller x too: how small can x be?")
    if got == eps / 2:
        raise _Wrong(f"1 + 2^-{f.mbits + 1} lies exactly halfway between 1 and the next {f.name} number. "
                     "Which way does a tie go under round-to-nearest-even?")
    if cast(float(got), f) != float(got):
        raise _Wrong(f"Your x = {float(got)!r} is not a {f.name} number; the question asks for the "
                     f"smallest {f.name} value x.")
    if cast(1.0 + float(got), f) == 1.0:
        raise _Wrong(f"With x = {float(got)!r}, {f.name}(1 + x) is still 1: x is too small.")
    raise _Wrong(f"1 + x != 1 for your x = {float(got)!r}, but a smaller {f.name} value also works.")


def _ex_consecutive_integers(answer, fmt="bf16"):
    """Largest N such that every integer 0, 1, ..., N is a value of ``fmt``."""
    f = get_format(fmt)
    n = np.arange(0, 2.0 ** min(f.mbits + 3, 60))
    bad = cast(n, f) != n
    right = int(n[np.argmax(bad)]) - 1
    got = _to_fraction(answer)
    if got == right:
        return (f"N = {right} = 2^{f.mbits + 1}: with {f.mbits + 1} significant bits every integer up to "
                f"2^{f.mbits + 1} fits; {right + 1} would need {f.mbits + 2}.")
    if got.denominator != 1:
        raise _Wrong("N is an integer.")
    g = int(got)
    if g > 1e6:
        raise _Wrong(f"{g} is a value of {f.name}, but the question asks for the point where integers "
                     "stop being consecutive. Check the integers just above 2^k for small k.")
    if g < right:
        raise _Wrong(f"Every integer up to {g} is exact, and the run goes on: keep going.")
    raise _Wrong(f"Not every integer up to {g} is a {f.name} value: find the first one that is not.")


def _ex_overflow_threshold(answer, fmt="fp16"):
    """Smallest positive integer that rounds to +Inf in ``fmt`` (round to nearest even)."""
    f = get_format(fmt)
    start = int(f.max)
    n = np.arange(start, start + 2 * int(2.0 ** (f.emax - f.mbits)) + 2, dtype=np.float64)
    right = int(n[np.argmax(np.isinf(cast(n, f)))])
    got = _to_fraction(answer)
    if got == right:
        return (f"{right} is exactly halfway between the max {f.max:g} and {2.0 ** (f.emax + 1):g} "
                f"(which {f.name} cannot hold); the tie goes to the even one, {2.0 ** (f.emax + 1):g}, "
                "which overflows to Inf.")
    g = float(got)
    if g == f.max:
        raise _Wrong(f"{g:g} is the largest finite {f.name} value: it does not overflow.")
    if g < right:
        raise _Wrong(f"{f.name}({g:g}) = {cast(g, f)!r}: values a little above max still round down to max.")
    raise _Wrong(f"{g:g} does overflow, but a smaller integer already does. Think about the midpoint "
                 "between max and the next power of two, and ties.")


def _ex_loss_scale(answer, fmt="fp16", target=0.999, seed=2024):
    """A loss scale S such that at least ``target`` of gradient_sample(seed)*S
    survives in ``fmt`` (neither 0 nor Inf) and nothing overflows."""
    f = get_format(fmt)
    g = gradient_sample(seed=seed)
    got = _to_fraction(answer, "loss scale")
    if got <= 0:
        raise _Wrong("A loss scale must be positive.")

    def stats(s):
        r = cast(g * float(s), f)
        return float(np.mean(r == 0)), int(np.sum(~np.isfinite(r)))

    ks = [k for k in range(-10, 41) if (lambda z, o: 1 - z >= target and o == 0)(*stats(Fraction(2) ** k))]
    lo, hi = (ks[0], ks[-1]) if ks else (None, None)
    zero, over = stats(got)
    if over:
        raise _Wrong(f"With S = {_pow2(got)}, {over} scaled gradients overflow to Inf: S is too large.")
    if 1 - zero < target:
        raise _Wrong(f"With S = {_pow2(got)}, {100 * zero:.2f}% of the gradients still underflow to 0 "
                     f"(allowed: {100 * (1 - target):.2f}%): S is too small.")
    extra = "" if got.numerator & (got.numerator - 1) == 0 and got.denominator & (got.denominator - 1) == 0 \
        else " (prefer a power of two: multiplying by it is exact)"
    return (f"S = {_pow2(got)} keeps {100 * (1 - zero):.3f}% and overflows nothing{extra}. Every power of two "
            f"from 2^{lo} to 2^{hi} works; dynamic loss scaling hunts for the top of that range.")


def _ex_rne_bits(answer, n=100_000, seed=11):
    """A function mapping float32 bit patterns (uint32 array) to bf16 codes
    (round to nearest even, NaN stays NaN), written with integer operations."""
    if not callable(answer):
        raise _Wrong("The answer should be a function: f(bits) -> bf16 codes.")
    rng = np.random.default_rng(seed)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
                         0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x00000001, 0x807FFFFF,
                         0x00008000, 0x00018000, 0x3F808000, 0x3F818000, 0x3F7FFFFF, 0x3F800001],
                        dtype=np.uint64)
    hi = rng.integers(0, 1 << 16, n // 4, dtype=np.uint64) << 16
    ties = hi | 0x8000
    near = hi | rng.choice(np.array([0x7FFF, 0x8001], dtype=np.uint64), n // 4)
    rand = rng.integers(0, 1 << 32, n - 2 * (n // 4) - specials.size, dtype=np.uint64)
    bits = np.concatenate([specials, ties, near, rand]).astype(np.uint32)
    x = bits.view(np.float32)
    want = encode(x, "bf16").astype(np.int64)
    try:
        got = np.asarray(answer(bits.copy()))
        if got.shape != bits.shape:
            raise ValueError
    except Exception:  # noqa: BLE001 - fall back to one call per value
        try:
            got = np.array([int(answer(int(b))) for b in bits])
        except Exception as err:  # noqa: BLE001
            raise _Wrong(f"Calling your function failed: {type(err).__name__}: {err}") from None
    got = got.astype(np.int64)
    nan_in = np.isnan(x)
    got_nan = ((got >> 7) & 0xFF) == 0xFF
    ok = np.where(nan_in, got_nan & ((got & 0x7F) != 0), got == want)
    if ok.all():
        return f"All {bits.size:,} inputs (ties, near-ties, NaN, Inf, overflow, subnormals, random) agree."
    wrong = ~ok
    kinds = [("NaN inputs (a NaN must stay a NaN: mantissa not zero)", nan_in),
             ("exact ties (the low 16 bits are 0x8000)", (bits & 0xFFFF) == 0x8000),
             ("values that round up past the largest bf16 to Inf", np.isinf(cast(x, "bf16")) & ~np.isinf(x)),
             ("results of the wrong size (codes must fit 16 bits)", (got < 0) | (got > 0xFFFF)),
             ("ordinary rounding (low 16 bits not 0x8000)", np.ones(bits.shape, bool))]
    for label, mask in kinds:
        m = wrong & mask
        if m.any():
            i = int(np.argmax(m))
            raise _Wrong(f"Wrong on {int(wrong.sum()):,} of {bits.size:,} inputs. First kind: {label}; "
                         f"e.g. input 0x{int(bits[i]):08x} gave 0x{int(got[i]) & 0xFFFFFFFF:04x}.")
    raise AssertionError


def _ex_e4m3_code(answer, values_=(0.3, -5.0, 470.0), fmt="fp8_e4m3"):
    """The fp8_e4m3 codes (round to nearest even, format default overflow) of ``values_``."""
    f = get_format(fmt)
    xs = list(values_)
    ans = list(answer) if isinstance(answer, (list, tuple, np.ndarray)) else [answer]
    if len(ans) != len(xs):
        raise _Wrong(f"Give {len(xs)} codes, one for each of {xs}.")
    for x, a in zip(xs, ans):
        right = encode(x, f)
        code = _code_string(a)
        if code is None:
            if isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
                code = int(a)
            else:
                v = _to_fraction(a)
                raise _Wrong(f"For {x}: {float(v)!r} looks like a value; the question asks for the code "
                             "(an int such as 0x2a or a bit string such as '0 0101 010').")
        if code == right:
            continue
        if not 0 <= code < (1 << f.bits):
            raise _Wrong(f"For {x}: {code} is not an {f.bits}-bit code.")
        v = decode(code, f)
        if math.isnan(v):
            raise _Wrong(f"For {x}: code {hex_code(code, f)} is NaN in {f.name}, but {x} rounds to a finite value.")
        if math.isnan(cast(x, f)):
            raise _Wrong(f"For {x}: code {hex_code(code, f)} is {v!r}; what does {f.name} do with a value "
                         f"this far past its max {f.max:g}?")
        if (v < 0) != (x < 0):
            raise _Wrong(f"For {x}: check the sign bit.")
        if abs(v) == abs(cast(x, f)):
            raise _Wrong(f"For {x}: right magnitude, wrong sign bit.")
        near = abs(v - x) <= 2 * abs(cast(x, f) - x) + 1e-300
        raise _Wrong(f"For {x}: code {hex_code(code, f)} decodes to {v!r}. "
                     + ("Close: compare the distances to both neighbours." if near else
                        "Recompute the exponent field (remember the bias) and the mantissa."))
    return "All codes right: " + ", ".join(f"{x} -> {hex_code(encode(x, f), f)}" for x in xs) + "."


def _ex_master_weights(answer, steps=1000, update=1e-4):
    """(w16, w32): the weight 1.0 after ``steps`` updates of +update, kept
    (and each update rounded) in fp16, and in fp32."""
    try:
        w16a, w32a = (answer["fp16"], answer["fp32"]) if isinstance(answer, dict) else answer
    except (TypeError, ValueError, KeyError):
        raise _Wrong("Give two numbers: (weight kept in fp16, weight kept in fp32).") from None
    right = {}
    for name in ("fp16", "fp32"):
        u = cast(update, name)
        w = 1.0
        for _ in range(steps):
            w = cast(w + u, name)  # w + u is exact in float64 here: one rounding, as the hardware does
        right[name] = w
    g16, g32 = float(_to_fraction(w16a)), float(_to_fraction(w32a))
    msgs = []
    if g16 != right["fp16"]:
        msgs.append("fp16 part: look at what a single update does to 1.0 in fp16"
                    + (" (you may have added the updates up first)." if abs(g16 - 1.1) < 0.01 else "."))
    if g32 != right["fp32"]:
        if abs(g32 - (1 + steps * update)) < 1e-12:
            msgs.append("fp32 part: that is the exact 1 + 1000 * 0.0001; fp32 rounds after every add.")
        elif abs(g32 - right["fp32"]) < 1e-4:
            msgs.append("fp32 part: close; round the update to fp32 too, and round after every add.")
        else:
            msgs.append("fp32 part: recompute, rounding to fp32 after every add.")
    if msgs:
        raise _Wrong(" ".join(msgs))
    return (f"fp16 stays at {right['fp16']!r}: every update is lost. fp32 reaches {right['fp32']!r} "
            f"(exact would be {1 + steps * update:g}): this is why master weights stay in fp32.")


def _ex_fp8_scale(answer, fmt="fp8_e4m3", seed=7):
    """The largest power of two S with max|activation_sample(seed)| * S <= max of ``fmt``."""
    f = get_format(fmt)
    x = activation_sample(seed=seed)
    amax = float(np.max(np.abs(x)))
    k = floor_log2(Fraction(f.max) / Fraction(amax))  # the largest k with amax * 2**k <= max
    right = Fraction(2) ** k
    got = _to_fraction(answer, "scale")
    if got == right:
        under = float(np.mean(cast(x * 2.0 ** k, f) == 0))
        return (f"S = 2^{k}: amax {amax:.4g} * S = {amax * 2.0 ** k:.4g} <= {f.max:g}. After scaling "
                f"{100 * under:.2f}% of the values round to 0 in {f.name}; without the scale "
                f"{100 * float(np.mean(cast(x, f) == 0)):.2f}%.")
    if got <= 0:
        raise _Wrong("The scale must be positive.")
    if got * Fraction(amax) > Fraction(f.max):
        raise _Wrong(f"With S = {_pow2(got)} the largest value becomes {float(got) * amax:.4g} > {f.max:g}.")
    if got.numerator & (got.numerator - 1) or got.denominator & (got.denominator - 1):
        raise _Wrong("Use a power of two: scaling by it is exact, in both directions.")
    raise _Wrong(f"S = {_pow2(got)} does not overflow, but a larger power of two still fits.")


def _ex_dynamic_loss_scale(answer, init=2.0 ** 16, interval=4, fmt="fp16", seed=3):
    """(final scale, skipped steps) of dynamic loss scaling on grad_max_per_step(seed):
    overflow (scaled max is Inf in ``fmt``) halves S and skips the step; after
    ``interval`` good steps in a row S doubles."""
    f = get_format(fmt)
    g = grad_max_per_step(seed=seed)
    s, good, skipped = init, 0, 0
    for gm in g:
        if not math.isfinite(cast(gm * s, f)):
            s, good, skipped = s / 2, 0, skipped + 1
        else:
            good += 1
            if good == interval:
                s, good = s * 2, 0
    try:
        sa, ka = answer
    except (TypeError, ValueError):
        raise _Wrong("Give two numbers: (final scale, number of skipped steps).") from None
    sa, ka = _to_fraction(sa, "scale"), _to_fraction(ka, "count")
    if sa == Fraction(s) and ka == skipped:
        return (f"Final scale {_pow2(s)}, {skipped} steps skipped: each spike halves the scale and the "
                "step is thrown away; quiet stretches double it again.")
    if ka != skipped:
        raise _Wrong(f"{int(ka)} skipped steps is not right: a step is skipped exactly when the scaled "
                     "maximum overflows fp16 at the scale in force at that step.")
    raise _Wrong("The skip count is right but the final scale is not: remember to reset the count of "
                 "good steps after an overflow and after each doubling.")


# ----------------------------------------------------------------------------- quantisation lab
# (exercises of notebooks/assignments/10_mx_scale_code and 11_int8_codes; see floatfmt.scaling)
def mx_block(seed=5) -> np.ndarray:
    """One block of 32 activations whose largest magnitude is the float64 just below 1/4."""
    x = np.random.default_rng(seed).normal(0.0, 0.05, 32)
    x[3] = -np.nextafter(0.25, 0.0)
    return x


def _ex_mx_scale_code(answer, fmt="mxfp8_e4m3", seed=5):
    """The E8M0 scale code (biased shared exponent) OCP MX gives ``mx_block(seed)``."""
    from .scaling import quantize
    right = int(quantize(mx_block(seed), fmt).scale_codes[0])
    got = _code_string(answer) if isinstance(answer, str) else answer
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer)):
        raise _Wrong("Give the code as an integer 0..255 (or a string such as '0x7f').")
    got = int(got)
    if got == right:
        return (f"Code {right}: E = {right - 127} = floor(log2 amax) - emax_elem, with floor(log2) "
                "read from the exponent field, so a value just below a power of two is not "
                "rounded up to it.")
    if got == right + 1:
        raise _Wrong("One too high: floor(log2(amax)) is off where amax is just below a power of "
                     "two. Read the exponent from the bits (np.frexp) instead of a float log2.")
    if not 0 <= got <= 255:
        raise _Wrong("An E8M0 code is one byte: 0..255, exponent + 127.")
    raise _Wrong("Shared exponent = floor(log2(max |v|)) - emax of the element format, and the "
                 "code adds the bias 127.")


def _ex_int8_codes(answer, n=8, seed=7):
    """The symmetric per-tensor int8 codes (-127..127, scale fp32(amax / 127), round to
    nearest even) of the first ``n`` values of activation_sample(seed), amax over all of it."""
    from .scaling import quantize
    x = activation_sample(seed=seed)
    q = quantize(x, "int8")
    right = [int(c) for c in q.codes[:n]]
    try:
        got = [int(v) for v in np.asarray(answer).ravel()]
    except (TypeError, ValueError):
        raise _Wrong(f"Give {n} integers (a list or an array).") from None
    if len(got) != n:
        raise _Wrong(f"Give exactly {n} codes, one per value.")
    if got == right:
        return (f"scale = fp32(amax / 127) = {q.scale:.9g}; the outliers set amax = "
                f"{float(np.max(np.abs(x))):.4g}, so most activations use only a few codes.")
    # The two usual mistakes, rounded by the one routine (every value here is within int8).
    if got == [int(v) for v in cast(x[:n] / q.scale, "int8", rounding="toward_zero")]:
        raise _Wrong("Those are truncated: quantisation rounds to the nearest integer.")
    if got == [int(v) for v in cast(x[:n] / float(np.max(np.abs(x[:n]))) * 127, "int8")]:
        raise _Wrong("The scale comes from the whole tensor's amax, not from these 8 values.")
    raise _Wrong("code = round(x / scale) with scale = amax / 127 (stored as fp32), clamped to "
                 "-127..127.")


_EXERCISES = {
    "fp16-one-plus-x": _ex_one_plus_x,
    "bf16-consecutive-integers": _ex_consecutive_integers,
    "fp16-overflow-threshold": _ex_overflow_threshold,
    "fp16-loss-scale": _ex_loss_scale,
    "bf16-rne-bits": _ex_rne_bits,
    "e4m3-code": _ex_e4m3_code,
    "master-weights": _ex_master_weights,
    "fp8-scale": _ex_fp8_scale,
    "dynamic-loss-scale": _ex_dynamic_loss_scale,
    "mx-scale-code": _ex_mx_scale_code,
    "int8-codes": _ex_int8_codes,
}


def exercises() -> list[str]:
    """Ids of every exercise ``check`` knows."""
    return list(_EXERCISES)


def check(exercise_id: str, answer, *, quiet: bool = False, **params) -> CheckResult:
    """Check ``answer`` for the exercise ``exercise_id``; print and return the result.

    ``params`` override the exercise's data (for example ``fmt="bf16"`` or
    ``values_=(1.0, 2.5)``), so a teacher can vary a question; the right
    answer is always recomputed with floatfmt.  ``answer=None`` (or ``...``)
    reports that there is no answer yet, as a failed check.
    """
    if not isinstance(exercise_id, str):
        raise TypeError(f"exercise_id must be a string, not {type(exercise_id).__name__}")
    fn = _EXERCISES.get(exercise_id)
    if fn is None:
        close = difflib.get_close_matches(exercise_id, list(_EXERCISES), n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"unknown exercise {exercise_id!r}.{hint} Known: {', '.join(_EXERCISES)}.")
    if _is_missing(answer):
        res = CheckResult(False, exercise_id, f"NO ANSWER [{exercise_id}]: set `answer` in the cell above "
                                              "and run this cell again.")
    else:
        try:
            res = CheckResult(True, exercise_id, f"PASS [{exercise_id}] {fn(answer, **params)}")
        except _Wrong as hint:
            res = CheckResult(False, exercise_id, f"FAIL [{exercise_id}] {hint} Try again.")
    if not quiet:
        print(res.message)
    return res

