"""The built-in exercises of notebooks/assignments (registered on import).

Each checker computes the right answer with floatfmt on the spot and raises
``Wrong`` with a hint that names the mistake without giving the answer away."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from numbers import Real

import numpy as np

from ..core.cast import cast
from ..core.codec import decode, encode, next_up, ulp
from ..core.intake import parse_string, floor_log2, to_fraction
from ..teach.numtext import pow2_text as _pow2_or_none
from ..core.formats import get_format, hex_code
from .registry import Exercise, Wrong, register

_Wrong = Wrong


# ----------------------------------------------------------------------------- data sets
def gradient_sample(n=100_000, seed=2024, center=-6.0) -> np.ndarray:
    """Deterministic stand-in for one step's gradients: random signs, log10
    magnitudes normal around ``center`` with standard deviation 1 (float64)."""
    rng = np.random.default_rng(seed)
    mags = 10.0 ** rng.normal(center, 1.0, n)
    return np.where(rng.random(n) < 0.5, -mags, mags)


def activation_sample(n=4096, seed=7) -> np.ndarray:
    """Deterministic activations: mostly normal with standard deviation 0.05,
    plus a few outliers between 1 and 3 in magnitude (as LLM activations have)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.05, n)
    idx = rng.choice(n, 8, replace=False)
    x[idx] = rng.choice([-1.0, 1.0], 8) * rng.uniform(1.0, 3.0, 8)
    return x


def grad_max_per_step(steps=24, seed=3, spikes=(6, 9, 17)) -> np.ndarray:
    """Largest |gradient| (unscaled) at each training step: usually about 1e-2,
    with spikes of 3.0, 1.5 and 0.9 at the steps ``spikes``."""
    rng = np.random.default_rng(seed)
    g = 10.0 ** rng.normal(-2.0, 0.3, steps)
    g[list(spikes)] = [3.0, 1.5, 0.9][:len(spikes)]
    return g


# ----------------------------------------------------------------------------- answer parsing
_POW = re.compile(r"^\s*([+-]?)\s*2\s*(?:\*\*|\^)\s*\(?\s*([+-]?\d+)\s*\)?\s*$")


def answer_fraction(a, what="answer") -> Fraction:
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
            a = parse_string(a)
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
    (value as Fraction, how it was read: a phrase naming the reading used).

    A code must be written unambiguously (``"0x1001"``, ``"0b..."``); a bare
    int is read as the value it is (``1`` is one, not the code 0x0001)."""
    f = get_format(fmt)
    code = _code_string(a)
    if code is not None:
        if not 0 <= code < (1 << f.bits):
            raise _Wrong(f"{a!r} is not a {f.bits}-bit {f.name} code.")
        v = float(decode(code, f))  # one code: a float
        if not math.isfinite(v):
            raise _Wrong(f"Code {a!r} is not a finite {f.name} value.")
        return Fraction(v), f"read {a!r} as the {f.name} code {hex_code(code, f)} = {v!r}"
    got = answer_fraction(a)
    if isinstance(a, (int, np.integer)):
        return got, f"read {a!r} as the value {float(got)!r}; write a code as a string, '0x...'"
    return got, ""


def _pow2(v) -> str:
    """``2^k`` for a positive power of two, else the float's repr."""
    v = Fraction(v)
    return (v > 0 and _pow2_or_none(v)) or repr(float(v))


# ----------------------------------------------------------------------------- exercises
def _ex_one_plus_x(answer, fmt="fp16"):
    """Smallest value x of ``fmt`` with fmt(1 + x) != 1 under round-to-nearest-even."""
    f = get_format(fmt)
    eps = Fraction(2) ** -f.mbits
    # 1 + eps/2 is a tie that goes to the even 1; the next value of fmt above eps/2 moves it.
    right = Fraction(next_up(float(eps / 2), f))
    assert cast(1 + right, f) != 1 and cast(1 + eps / 2, f) == 1  # the claim, in exact arithmetic
    got, how = _value_or_code(answer, f, right)
    if got == right or got > eps / 2 and cast(got, f) == float(right):
        note = "" if got == right else f" (your {float(got)!r} rounds to that {f.name} value)"
        return (f"x = {float(right)!r} = 2^-{f.mbits + 1} + 2^-{2 * f.mbits + 1}{note}: the smallest {f.name} "
                f"number past the midpoint between 1 and 1 + eps, so 1 + x rounds up." + (f" ({how})" if how else ""))
    if got <= 0:
        raise _Wrong("x must be positive" + (f" ({how})." if how else "."))
    if got == eps:
        raise _Wrong(f"2^-{f.mbits} (eps) is the gap from 1 to the next {f.name} number. Round-to-nearest "
                     "moves 1 + x to that number for smaller x too: how small can x be?")
    if got == eps / 2:
        raise _Wrong(f"1 + 2^-{f.mbits + 1} lies exactly halfway between 1 and the next {f.name} number. "
                     "Which way does a tie go under round-to-nearest-even?")
    if cast(got, f) != float(got):
        raise _Wrong(f"Your x = {float(got)!r} is not a {f.name} number; the question asks for the "
                     f"smallest {f.name} value x" + (f" ({how})." if how else "."))
    if cast(1 + got, f) == 1:
        raise _Wrong(f"With x = {float(got)!r}, {f.name}(1 + x) is still 1: x is too small"
                     + (f" ({how})." if how else "."))
    raise _Wrong(f"1 + x != 1 for your x = {float(got)!r}, but a smaller {f.name} value also works"
                 + (f" ({how})." if how else "."))


def _ex_consecutive_integers(answer, fmt="bf16"):
    """Largest N such that every integer 0, 1, ..., N is a value of ``fmt``."""
    f = get_format(fmt)
    p = f.mbits + 1
    right = 2 ** p  # with p significant bits: every integer up to 2^p, and 2^p + 1 needs p + 1 bits
    n = np.arange(0, right + 2, dtype=np.float64) if right < 1 << 20 else np.array([right - 1, right, right + 1.0])
    assert np.all(cast(n[:-1], f) == n[:-1]) and cast(n[-1], f) != n[-1]
    got = answer_fraction(answer)
    if got == right:
        return (f"N = {right} = 2^{p}: with {p} significant bits every integer up to "
                f"2^{p} fits; {right + 1} would need {p + 1}.")
    if got.denominator != 1:
        raise _Wrong("N is an integer.")
    g = int(got)
    if g > 64 * right:
        raise _Wrong(f"Not every integer up to {g} is a {f.name} value. Check the integers just above "
                     "2^k for small k.")
    if g < right:
        raise _Wrong(f"Every integer up to {g} is exact, and the run goes on: keep going.")
    raise _Wrong(f"Not every integer up to {g} is a {f.name} value: find the first one that is not.")


def _ex_overflow_threshold(answer, fmt="fp16"):
    """Smallest positive integer that rounds to +Inf in ``fmt`` (round to nearest even).
    Only formats with an Inf have one (OCP E4M3 overflows to NaN, FP4/FP6 saturate)."""
    f = get_format(fmt)
    if not f.inf:
        raise ValueError(f"{f.name} has no Inf, so no value rounds to +Inf; choose a format with Inf")
    top = Fraction(f.max)
    mid = top + Fraction(ulp(f.max, f)) / 2  # halfway between max and 2^(emax+1); the tie goes up
    right = math.ceil(mid)
    assert math.isinf(cast(Fraction(right), f)) and math.isfinite(cast(Fraction(right - 1), f))
    got = answer_fraction(answer)
    if got == right:
        return (f"{right} is exactly halfway between the max {f.max:g} and 2^{f.emax + 1} "
                f"(which {f.name} cannot hold); the tie goes to the even one, 2^{f.emax + 1}, "
                "which overflows to Inf.")
    if got.denominator != 1:
        raise _Wrong("The question asks for an integer.")
    if got == top:
        raise _Wrong(f"{float(got):g} is the largest finite {f.name} value: it does not overflow.")
    if got < right:
        raise _Wrong(f"{f.name}({float(got):g}) = {cast(got, f)!r}: values a little above max still round "
                     "down to max.")
    raise _Wrong(f"{float(got):g} does overflow, but a smaller integer already does. Think about the "
                 "midpoint between max and the next power of two, and ties.")


def _ex_loss_scale(answer, fmt="fp16", target=0.999, seed=2024, center=-6.0):
    """A loss scale S such that at least ``target`` of gradient_sample(seed=seed,
    center=center) * S survives in ``fmt`` (neither 0 nor Inf) and nothing overflows."""
    f = get_format(fmt)
    g = gradient_sample(seed=seed, center=center)
    got = answer_fraction(answer, "loss scale")
    if got <= 0:
        raise _Wrong("A loss scale must be positive.")

    def stats(s):
        r = cast(g * float(s), f)
        return float(np.mean(r == 0)), int(np.sum(~np.isfinite(r)))

    ks = [k for k in range(-30, 81) if (lambda z, o: 1 - z >= target and o == 0)(*stats(Fraction(2) ** k))]
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


def rne_inputs(n=100_000, seed=11) -> np.ndarray:
    """The float32 bit patterns (uint32) the bf16-rne-bits checker tries: specials,
    exact ties, near-ties and random patterns."""
    rng = np.random.default_rng(seed)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
                         0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x00000001, 0x807FFFFF,
                         0x00008000, 0x00018000, 0x3F808000, 0x3F818000, 0x3F7FFFFF, 0x3F800001],
                        dtype=np.uint64)
    hi = rng.integers(0, 1 << 16, n // 4, dtype=np.uint64) << 16
    ties = hi | 0x8000
    near = hi | rng.choice(np.array([0x7FFF, 0x8001], dtype=np.uint64), n // 4)
    rand = rng.integers(0, 1 << 32, n - 2 * (n // 4) - specials.size, dtype=np.uint64)
    return np.concatenate([specials, ties, near, rand]).astype(np.uint32)


def _ex_rne_bits(answer, n=100_000, seed=11):
    """A function mapping float32 bit patterns (uint32 array) to bf16 codes
    (round to nearest even, NaN stays NaN), written with integer operations."""
    if not callable(answer):
        raise _Wrong("The answer should be a function: f(bits) -> bf16 codes.")
    bits = rne_inputs(n, seed)
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
    size = (got < 0) | (got > 0xFFFF)
    tie = ((bits & 0xFFFF) == 0x8000) & ~nan_in
    over = np.isinf(cast(x, "bf16")) & ~np.isinf(x)
    kinds = [("results of the wrong size (codes must fit 16 bits)", size),
             ("ordinary rounding (not a tie, not NaN, no overflow)", ~(nan_in | tie | over | size)),
             ("exact ties (the low 16 bits are 0x8000)", tie & ~size),
             ("values that round up past the largest bf16 to Inf", over & ~size),
             ("NaN inputs (a NaN must stay a NaN: mantissa not zero)", nan_in & ~size)]
    parts = []
    for label, mask in kinds:  # every kind of input it gets wrong, the most basic first
        m = wrong & mask
        if m.any():
            i = int(np.argmax(m))
            parts.append(f"{label}: {int(m.sum()):,} wrong, e.g. input 0x{int(bits[i]):08x} gave "
                         f"0x{int(got[i]) & 0xFFFFFFFF:04x}")
    raise _Wrong(f"Wrong on {int(wrong.sum()):,} of {bits.size:,} inputs. " + "; ".join(parts) + ".")


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
                v = answer_fraction(a)
                raise _Wrong(f"For {x}: {float(v)!r} looks like a value; the question asks for the code "
                             "(an int such as 0x2a or a bit string such as '0 0101 010').")
        if code == right:
            continue
        if not 0 <= code < (1 << f.bits):
            raise _Wrong(f"For {x}: {code} is not an {f.bits}-bit code.")
        v = decode(code, f)
        if math.isnan(v) and math.isnan(cast(x, f)):
            raise _Wrong(f"For {x}: NaN is the right value (it overflows and {f.name} has no Inf), but "
                         f"code {hex_code(code, f)} has the wrong sign bit for {x}.")
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
    g16, g32 = float(answer_fraction(w16a)), float(answer_fraction(w32a))
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


def _ex_fp8_scale(answer, fmt="fp8_e4m3", seed=7, gain=1.0):
    """The largest power of two S with max|activation_sample(seed) * gain| * S <= max of ``fmt``."""
    f = get_format(fmt)
    x = activation_sample(seed=seed) * gain
    amax = float(np.max(np.abs(x)))
    k = floor_log2(Fraction(f.max) / Fraction(amax))  # the largest k with amax * 2**k <= max
    right = Fraction(2) ** k
    got = answer_fraction(answer, "scale")
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


def _dls(g, init, interval, fmt, reset_on_overflow=True, growth="reset"):
    """Dynamic loss scaling over the per-step maxima ``g``: (final scale, skipped steps).
    ``reset_on_overflow=False`` and ``growth`` = "once" (the count is not reset after a
    doubling, so ``good == interval`` fires once) or "every" (not reset, tested with
    ``>=``: every later good step doubles) model the usual mistakes."""
    s, good, skipped = init, 0, 0
    for gm in g:
        if not math.isfinite(cast(gm * s, fmt)):
            s, skipped = s / 2, skipped + 1
            good = 0 if reset_on_overflow else good
        else:
            good += 1
            if good == interval or growth == "every" and good > interval:
                s = s * 2
                good = 0 if growth == "reset" else good
    return s, skipped


def _dls_mistakes(g, init, interval, fmt):
    return [(_dls(g, init, interval, fmt, reset_on_overflow=False),
             "your simulation does not reset the count of good steps after an overflow"),
            (_dls(g, init, interval, fmt, growth="once"),
             "your simulation does not restart the count of good steps after a doubling"),
            (_dls(g, init, interval, fmt, growth="every"),
             "your simulation does not restart the count of good steps after a doubling (so every "
             "later good step doubles)")]


def _ex_dynamic_loss_scale(answer, init=2.0 ** 16, interval=4, fmt="fp16", seed=3, spikes=(6, 9, 17)):
    """(final scale, skipped steps) of dynamic loss scaling on grad_max_per_step(seed):
    overflow (scaled max is Inf in ``fmt``) halves S and skips the step; after
    ``interval`` good steps in a row S doubles and the count starts again."""
    f = get_format(fmt)
    g = grad_max_per_step(seed=seed, spikes=spikes)
    s, skipped = _dls(g, init, interval, f)
    try:
        sa, ka = answer
    except (TypeError, ValueError):
        raise _Wrong("Give two numbers: (final scale, number of skipped steps).") from None
    sa, ka = answer_fraction(sa, "scale"), answer_fraction(ka, "count")
    if ka.denominator != 1:
        raise _Wrong(f"The number of skipped steps is a whole number, not {float(ka)!r}.")
    if sa == Fraction(s) and ka == skipped:
        return (f"Final scale {_pow2(s)}, {skipped} steps skipped: each spike halves the scale and the "
                "step is thrown away; quiet stretches double it again.")
    for (ms, mk), what in _dls_mistakes(g, init, interval, f):
        if (ms, mk) != (s, skipped) and sa == Fraction(ms) and ka == mk:
            raise _Wrong(f"That is what happens if {what}.")
    if ka != skipped:
        raise _Wrong(f"{int(ka)} skipped steps is not right: a step is skipped exactly when the scaled "
                     "maximum overflows fp16 at the scale in force at that step.")
    raise _Wrong("The skip count is right but the final scale is not: remember to reset the count of "
                 "good steps after an overflow and after each doubling.")


# ----------------------------------------------------------------------------- quantisation lab
# (exercises of notebooks/assignments/10_mx_scale_code and 11_int8_codes; see floatfmt.scaling.quantize)
def mx_block(seed=5, top=0.25) -> np.ndarray:
    """One block of 32 activations whose largest magnitude is the float64 just below
    ``top`` (a power of two); the others are normal with standard deviation top / 5."""
    x = np.random.default_rng(seed).normal(0.0, top / 5, 32)
    x = np.clip(x, -np.nextafter(top, 0.0), np.nextafter(top, 0.0))
    x[3] = -np.nextafter(top, 0.0)
    return x


def _ex_mx_scale_code(answer, fmt="mxfp8_e4m3", seed=5, top=0.25):
    """The E8M0 scale code (biased shared exponent) OCP MX gives ``mx_block(seed, top)``."""
    from ..scaling.quantize import quantize
    right = int(quantize(mx_block(seed, top), fmt).scale_codes[0])
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
    from ..scaling.quantize import quantize
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


# ----------------------------------------------------------------------------- registration
def _seed(rng) -> dict:
    return {"seed": int(rng.integers(1, 10 ** 6))}


def _pick(name, choices):
    return lambda rng: {name: choices[int(rng.integers(len(choices)))]}


def _e4m3_values(rng) -> dict:
    """Three values: a small one (subnormal or low normal), a negative mid-range one,
    and one beyond 464 (it overflows: NaN in E4M3)."""
    small = float(f"{rng.uniform(0.004, 0.9):.3g}")
    mid = -float(f"{rng.uniform(1.5, 300):.3g}")
    big = float(rng.integers(465, 2000))
    return {"values_": (small, mid, big)}


def _fp8_scale_variant(rng) -> dict:
    """A seed and a gain whose answer differs from the lesson's (default) one."""
    f = get_format("fp8_e4m3")
    k0 = floor_log2(Fraction(f.max) / Fraction(float(np.max(np.abs(activation_sample())))))
    while True:
        p = {**_seed(rng), "gain": float(f"{2.0 ** rng.uniform(-7, 7):.3g}")}
        amax = float(np.max(np.abs(activation_sample(seed=p["seed"]) * p["gain"])))
        if floor_log2(Fraction(f.max) / Fraction(amax)) != k0:
            return p


def _dls_variant(rng) -> dict:
    """Data on which each mistake named in the hints changes the answer."""
    f = get_format("fp16")
    while True:
        seed = int(rng.integers(1, 10 ** 6))
        spikes = tuple(sorted(int(v) for v in rng.choice(np.arange(4, 22), 3, replace=False)))
        g = grad_max_per_step(seed=seed, spikes=spikes)
        right = _dls(g, 2.0 ** 16, 4, f)
        if all(m != right for m, _ in _dls_mistakes(g, 2.0 ** 16, 4, f)):
            return {"seed": seed, "spikes": spikes}


def _master_variant(rng) -> dict:
    return {"steps": int(rng.integers(5, 21)) * 100, "update": [1e-4, 2e-4, 5e-5, 3e-4][int(rng.integers(4))]}


_INF_FORMATS = ("fp16", "bf16", "tf32", "fp32", "fp8_e5m2")
_MX = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1")

for _ex in [
    Exercise("fp16-one-plus-x", _ex_one_plus_x, "smallest x with 1 + x != 1", 1.0, {"fmt": "fp16"},
             _pick("fmt", ("bf16", "tf32", "fp8_e4m3", "fp8_e5m2")),  # never the lessons' fp16
             {"fmt": ("fp16", "bf16", "tf32", "fp32", "fp8_e4m3", "fp8_e5m2")},
             ("eps is the gap above 1; 1 + eps/2 is a tie.",)),
    Exercise("bf16-consecutive-integers", _ex_consecutive_integers, "largest run of integers", 1.0,
             {"fmt": "bf16"}, _pick("fmt", ("fp16", "fp8_e4m3", "fp8_e5m2", "tf32")),  # never the lessons' bf16
             {"fmt": ("bf16", "fp16", "tf32", "fp32", "fp8_e4m3", "fp8_e5m2")},
             ("Count significant bits: p = mantissa bits + 1.",)),
    Exercise("fp16-overflow-threshold", _ex_overflow_threshold, "smallest integer that overflows", 1.0,
             {"fmt": "fp16"}, _pick("fmt", _INF_FORMATS[1:]), {"fmt": _INF_FORMATS},  # never the lessons' fp16
             ("Overflow is judged after rounding; look at the midpoint above max.",)),
    Exercise("fp16-loss-scale", _ex_loss_scale, "a working loss scale", 1.0, {"fmt": "fp16"},
             lambda rng: {**_seed(rng), "center": float(rng.choice([-12.0, -11.5, -11.0]))},
             {"fmt": ("fp16",)}, ("Too small: underflow; too large: overflow.",)),
    Exercise("bf16-rne-bits", _ex_rne_bits, "float32 -> bf16 with integer operations", 2.0, {}, _seed, {},
             ("Add 0x7FFF plus the lowest kept bit, then shift; NaN first.",),
             probe=lambda p: rne_inputs(p.get("n", 100_000), p.get("seed", 11))),
    Exercise("e4m3-code", _ex_e4m3_code, "FP8 codes by hand", 1.0, {"fmt": "fp8_e4m3"}, _e4m3_values,
             {"fmt": ("fp8_e4m3",)}, ("Bias 7; E4M3 has no Inf: past 464 it is NaN.",)),
    Exercise("master-weights", _ex_master_weights, "updates in fp16 vs fp32", 1.0, {}, _master_variant, {},
             ("Round after every add.",)),
    Exercise("fp8-scale", _ex_fp8_scale, "a per-tensor FP8 scale", 1.0, {"fmt": "fp8_e4m3"},
             _fp8_scale_variant,
             {"fmt": ("fp8_e4m3", "fp8_e5m2")}, ("The largest power of two that keeps amax * S <= max.",)),
    Exercise("dynamic-loss-scale", _ex_dynamic_loss_scale, "dynamic loss scaling by hand", 1.0, {},
             _dls_variant, {"fmt": ("fp16",)},
             ("Reset the good-step count after an overflow and after each doubling.",)),
    Exercise("mx-scale-code", _ex_mx_scale_code, "an MX block's E8M0 scale code", 1.0,
             {"fmt": "mxfp8_e4m3"},
             lambda rng: {**_seed(rng), **_pick("fmt", _MX)(rng), "top": 2.0 ** int(rng.integers(-12, 13))},
             {"fmt": _MX},
             ("floor(log2 amax) from the exponent bits.",)),
    Exercise("int8-codes", _ex_int8_codes, "symmetric INT8 codes", 1.0, {}, _seed, {},
             ("scale = amax / 127 over the whole tensor.",)),
]:
    register(_ex)
