"""explain() against cast() and independent reasoning, for every registered format.

Issue 9, class 7: explain() restated the rounding rules and drifted from cast
at integer edges (an exact -128 in int8 reported as an overflow, neighbours that
do not bracket x, a negative uint8 input called exact), and with daz (both
"exact, nothing to round" and "rounds to zero").  This sweep checks every
claim an explanation makes, for every format in the registry, every rounding
mode (stochastic with a fixed seed), every overflow policy the format allows,
ftz and daz on and off, at and around zero, the smallest subnormal, the smallest
normal, one, midpoints, max, the first grid value past max and far beyond, for
both signs (negative inputs to unsigned formats included), NaN and +-Inf:

* the stored value equals ``cast`` with the same arguments (the oracle), and
  for deterministic modes the MPFR / Fraction reference ``round_one``;
* the neighbours are the two grid values bracketing the exact value with an
  unbounded range (MPFR ``neighbours``, floor / ceil for integers), equal iff x
  is on the grid;
* the exactness, tie, nearer-neighbour, overflow, saturation, flush (ftz),
  daz and underflow claims of the text hold by Fraction reasoning done here
  from the raw fields (``tests/oracles/mpfr.Spec``), not from floatfmt;
* the text never makes two contradictory claims.

Failures are gathered per kind so that a run on old code reports how many
claims of each kind were wrong.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

import floatfmt as ff
from oracles import mpfr as ref

# (rootdir-relative import, as tests/test_cast_oracle.py does)


def _fl(v) -> float:
    """A Fraction as a float, +-Inf past float64 (fp64's grid value 2**1024)."""
    return float(v) if abs(v) < Fraction(2) ** 1024 else (math.inf if v > 0 else -math.inf)


def _num(v) -> str:
    """How explain prints a number (its documented convention): whole numbers below 1e16
    plainly, -0 kept, otherwise Python's shortest repr; fp64's grid value 2**1024 as 2^1024."""
    if isinstance(v, Fraction) and abs(v) == Fraction(2) ** 1024:
        return ("-" if v < 0 else "") + "2^1024"
    v = float(v)
    if math.isfinite(v) and v == int(v) and abs(v) < 1e16:
        return str(int(v)) if v != 0 or math.copysign(1, v) > 0 else "-0"
    return repr(v)

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic")


def _policies(f):
    out = ["saturate"]
    if f.kind == "int":
        return out + ["wrap"]
    if f.inf:
        out.append("inf")
    if f.nan != "none" and not (f.nan == "ieee" and f.mbits == 0):
        out.append("nan")
    return out


def _points(f):
    """Exact test values (Fractions) at and around the edges of f, both signs."""
    s = ref.spec(f)
    if s.is_int:
        lo, hi = Fraction(s.lo), Fraction(s.hi)
        mags = [Fraction(0), Fraction(1, 2), Fraction(3, 10), Fraction(7, 10), Fraction(3, 2),
                Fraction(5, 2), Fraction(1)]
        edge = [lo, lo - Fraction(1, 2), lo - Fraction(3, 10), lo - Fraction(7, 10), lo - 1,
                lo + Fraction(1, 2), lo + Fraction(2, 5), hi, hi + Fraction(1, 2), hi + Fraction(3, 10),
                hi + Fraction(7, 10), hi + 1, hi - Fraction(1, 2), 2 * hi + 5, Fraction(10) ** 30,
                -Fraction(10) ** 30, Fraction(-3), Fraction(-1, 3)]
        return sorted(set(mags + [-m for m in mags] + edge))
    two = Fraction(2)
    tiny = two ** (s.emin - (s.mbits if s.zero else 0))      # smallest positive value
    norm = two ** s.emin
    step_top = two ** (s.emax - s.mbits)                       # spacing in the top binade
    eps = two ** -s.mbits
    mags = [tiny, tiny / 2, tiny / 4, tiny * 3 / 4, tiny * 3 / 2, norm, norm - tiny / 2, norm + tiny / 2,
            Fraction(1), 1 + eps / 2, 1 + eps / 4, 1 + eps * 3 / 4, 1 + eps + eps / 2,
            s.max, s.max - step_top / 2, s.max + step_top / 2, s.max + step_top / 4,
            s.max + step_top * 3 / 4, s.max + step_top, s.max + 2 * step_top, 2 * s.max,
            two ** (s.emax + 2), Fraction(10) ** 400, Fraction(1, 10)]
    return sorted(set([Fraction(0)] + mags + [-m for m in mags]))


def _as_input(X):
    """Floats where they are exact (the usual input), Fractions otherwise."""
    try:
        v = float(X)
    except OverflowError:
        return X
    return v if math.isfinite(v) and Fraction(v) == X else X


def _rounding_line(t):
    return next(line for line in t.splitlines() if line.startswith("rounding"))


def _same(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _int_round(X, mode):
    """Unbounded integer rounding by Fractions (stochastic: None)."""
    fl = X.numerator // X.denominator
    if fl == X:
        return Fraction(fl)
    frac = X - fl
    half = Fraction(1, 2)
    n = {"toward_zero": fl if X > 0 else fl + 1, "up": fl + 1, "down": fl,
         "nearest_away": (fl if frac < half else fl + 1) if frac != half else (fl + 1 if X > 0 else fl),
         "nearest_even": fl if frac < half else fl + 1 if frac > half else (fl if fl % 2 == 0 else fl + 1),
         "odd": fl if fl % 2 else fl + 1}.get(mode)
    return None if n is None else Fraction(n)


def _grid_neighbours(R: Fraction, s) -> tuple[Fraction, Fraction]:
    """The grid values of a float format (precision mbits + 1, smallest exponent emin,
    no upper limit) just below and above R, by Fractions."""
    a = abs(R)
    if a == 0:
        e = s.emin
    else:
        e = a.numerator.bit_length() - a.denominator.bit_length()
        if Fraction(2) ** e > a:
            e -= 1
        e = max(e, s.emin)
    q = Fraction(2) ** (e - s.mbits)
    n = R / q
    fl = n.numerator // n.denominator
    lo = fl * q
    return lo, (lo if lo == R else lo + q)


class Facts:
    """What must be true of one explanation, worked out here from the raw fields."""

    def __init__(self, f, X, mode, policy, ftz, daz_zero):
        s = ref.spec(f)
        self.s = s
        R = Fraction(0) if daz_zero else X   # the value actually rounded
        if policy == "wrap":  # cast reduces modulo 2**bits first (exact), then rounds and wraps
            R = (abs(X) % (1 << f.bits)) * (1 if X >= 0 else -1)
        self.R = R
        self.invalid = (not s.is_int and not s.signed and (R < 0 or (R == 0 and not s.zero)))
        # far past the range: the routine works in float64 and clamps the exponent at
        # emax + 1, so no neighbours are reported (integers: past float64's integers)
        # (fp64: past float64 itself, 2**1024)
        self.far = abs(R) >= (Fraction(2) ** 53 if s.is_int else
                              Fraction(2) ** min(s.emax + 2, 1024))
        if s.is_int and self.far:
            self.nb, self.r = None, R
            rng_lo, rng_hi = Fraction(s.lo), Fraction(s.hi)
        elif s.is_int:
            lo = Fraction(R.numerator // R.denominator)
            self.nb = (lo, lo if lo == R else lo + 1)
            self.r = _int_round(R, mode)
            rng_lo, rng_hi = Fraction(s.lo), Fraction(s.hi)
        else:
            self.nb = None if (self.invalid or self.far) else _grid_neighbours(R, s)
            self.r = None
            if self.nb is not None and mode != "stochastic":
                if self.nb[0] == self.nb[1]:
                    self.r = self.nb[0]
                else:  # MPFR's rounding, unbounded above (its range ends at 2**(emax + 2))
                    raw = ref.raw_round(ref.to_exact(R), s, mode)
                    self.r = Fraction(raw) if math.isfinite(raw) else max(self.nb, key=abs)
            rng_lo, rng_hi = (-s.max if s.signed else Fraction(0)), s.max
        if self.far:
            self.r = R
        self.on_grid = self.nb is not None and self.nb[0] == self.nb[1]
        self.tie = self.nb is not None and not self.on_grid and 2 * R == self.nb[0] + self.nb[1]
        self.nearer = None
        if self.nb is not None and not self.on_grid and not self.tie:
            self.nearer = min(self.nb, key=lambda n: abs(n - R))
        in_range = lambda v: rng_lo <= v <= rng_hi  # noqa: E731
        self.rng = (rng_lo, rng_hi)
        self.in_range = in_range
        self.overflow = None if self.r is None else (not self.invalid and not in_range(self.r))
        sub = (not s.is_int) and s.zero
        self.flush = (ftz and sub and self.r is not None and self.r != 0
                      and abs(self.r) < Fraction(2) ** s.emin and not self.overflow)
        # a value of the format, stored unchanged
        self.exact_value = (self.on_grid and not self.invalid and in_range(R) and not daz_zero
                            and not (ftz and sub and R != 0 and abs(R) < Fraction(2) ** s.emin)
                            and (R != 0 or s.zero))


def _check_one(f, x, X, mode, policy, ftz, daz, bad: Counter, examples: dict):
    """Check one explanation; count each kind of wrong claim in ``bad`` (an exception
    counts as a failure of its own kind, so one bad case does not hide the others)."""
    try:
        _check(f, x, X, mode, policy, ftz, daz, bad, examples)
    except Exception as err:  # noqa: BLE001
        kind = f"raised {type(err).__name__}"
        bad[kind] += 1
        examples.setdefault(kind, f"{f.name} x={x!r} {mode} {policy} ftz={ftz} daz={daz}: {err}")


def _check(f, x, X, mode, policy, ftz, daz, bad: Counter, examples: dict):
    def fail(kind, msg):
        bad[kind] += 1
        examples.setdefault(kind, f"{f.name} x={x!r} {mode} {policy} ftz={ftz} daz={daz}: {msg}")

    kw = dict(rounding=mode, overflow=policy, ftz=ftz, daz=daz)
    if mode == "stochastic":
        e = ff.explain(x, f.name, rng=7, **kw)
        want = ff.cast(x, f.name, rng=7, **kw)
    else:
        e = ff.explain(x, f.name, **kw)
        want = ff.cast(x, f.name, **kw)
    t = e.text(colour=False)
    line = _rounding_line(t).lower()
    if not _same(e.value, want):
        fail("stored != cast", f"explain {e.value!r}, cast {want!r}")
    stored_line = next(ln for ln in t.splitlines() if ln.startswith("stored"))
    if stored_line.split()[1] not in (_num(want),):
        fail("stored line", stored_line)
    if X is None:  # NaN / Inf input
        if math.isnan(x):
            if "nan" not in line:
                fail("special wording", line)
        elif x < 0 and not f.signed and f.kind == "float":
            if not (math.isnan(want) and "no value" in line):
                fail("invalid claim", line)
        else:
            kept = math.isinf(want)
            if kept == ("overflow" in line):
                fail("overflow claim", f"Inf -> {want!r}: {line}")
        if "nothing to round" in line:
            fail("contradiction", line)
        return
    daz_zero = daz and X != 0 and abs(X) < Fraction(2) ** -1022  # Python float / Fraction input: fp64
    F = Facts(f, X, mode, policy, ftz, daz_zero)
    if mode != "stochastic" and not daz_zero:
        oracle = ref.round_one(X, f, mode, policy, ftz=ftz)
        if not _same(want, oracle) and not (want == 0 and oracle == 0 and not f.negative_zero):
            fail("cast != reference", f"cast {want!r}, reference {oracle!r}")
    # neighbours
    if F.nb is not None:
        lo, hi = F.nb
        fl = _fl
        if e.lower is None or e.upper is None or (e.lower, e.upper) != (fl(lo), fl(hi)):
            fail("neighbours", f"{e.lower!r}, {e.upper!r}; want {lo}, {hi}")
        if not F.on_grid and not (F.R != 0 or X == 0):
            pass
        nb_line = next((ln for ln in t.splitlines() if ln.startswith("neighbours")), "")
        if not F.on_grid and "<  x  <" in nb_line:
            shown = nb_line.split()
            if shown[1] != _num(lo) or shown[5] != _num(hi):
                fail("neighbours", nb_line)
        if not F.on_grid and "<  x  <" not in nb_line:
            fail("neighbours", f"no bracketing neighbours shown: {nb_line}")
        for v in (lo, hi):
            out = not F.in_range(v)
            named = "outside" in nb_line and _num(v) in nb_line.split("[")[-1]
            if not F.on_grid and out and not named:
                fail("neighbour outside range not flagged", nb_line)
    elif e.lower is not None and e.upper is not None and not (e.lower <= X <= e.upper):
        fail("neighbours", f"{e.lower!r} .. {e.upper!r} do not bracket {X}")
    # exactness
    says_exact = "nothing to round" in line
    if says_exact != F.exact_value:
        fail("exactness claim", line)
    if (e.direction == "exact") != (F.exact_value or (F.on_grid and F.flush is False and daz_zero)):
        if not (daz_zero and e.direction == "exact"):
            fail("exactness claim", f"direction {e.direction!r}")
    if F.exact_value and not _same(want, _fl(F.R)) and not (want == 0 and F.R == 0):
        fail("exact but changed", f"{want!r}")
    # tie and nearer
    if e.tie is not None and bool(e.tie) != F.tie and F.nb is not None:
        fail("tie claim", f"tie={e.tie}")
    if ("a tie" in line) != (F.tie and mode in ("nearest_even", "nearest_away")):
        fail("tie claim", line)
    if mode in ("nearest_even", "nearest_away") and F.nearer is not None:
        if f"nearer neighbour is {_num(_fl(F.nearer))}" not in line:
            fail("nearer claim", line)
    # the chosen neighbour (deterministic modes, in range): named in the text and stored
    if F.r is not None and F.nb is not None and not F.on_grid and not F.overflow and not F.flush:
        if F.r != 0 or f.zero:
            if not _same(want, _fl(F.r)) and not (F.r == 0 and want == 0):
                fail("chosen neighbour", f"{want!r} vs reference {F.r}")
    # overflow, saturation
    if F.overflow is not None:
        said = "overflow" in line
        if said != F.overflow:
            fail("overflow claim", line)
        sat_said = "saturat" in line or "clips it" in line
        sat = F.overflow and math.isfinite(want) and (policy == "saturate" or f.kind == "int"
                                                      and policy != "wrap")
        if sat_said != sat:
            fail("saturation claim", line)
    elif mode == "stochastic" and F.nb is not None and not F.on_grid:
        if "overflow" in line and all(F.in_range(v) for v in F.nb):
            fail("overflow claim", line)
    # ftz, daz, underflow
    if F.flush and "ftz flushes" not in line:
        fail("flush claim", line)
    if "ftz flushes" in line and not ftz:
        fail("flush claim", line)
    if daz_zero != ("daz" in line.split(":", 1)[1] if ":" in line else False):
        fail("daz claim", line)
    under = any("underflow" in n.lower() for n in getattr(e, "notes", []))
    zero_chosen = F.r == 0 or (mode == "stochastic" and F.nb is not None and 0 in F.nb and want == 0)
    if under and not (zero_chosen and not F.on_grid and f.zero and not daz_zero):
        fail("underflow claim", str(e.notes))
    # contradictions
    if says_exact and any(w in line for w in ("dropped part", "overflow", "a tie", "flushes")):
        fail("contradiction", line)
    if says_exact and any("underflow" in n.lower() or "rounds to zero" in n.lower()
                          for n in getattr(e, "notes", [])):
        fail("contradiction", f"{line} / {e.notes}")
    if "either way" in line and mode != "stochastic":
        fail("contradiction", line)
    if F.invalid and not (math.isnan(want) and "no value" in line):
        fail("invalid claim", line)


def zlib_crc(name: str) -> int:
    return zlib.crc32(name.encode())


def _sweep(name):
    f = ff.get_format(name)
    bad, examples = Counter(), {}
    n = 0
    points = [(_as_input(X), X) for X in _points(f)] + [(math.nan, None), (math.inf, None),
                                                         (-math.inf, None)]
    s = ref.spec(f)
    small = Fraction(2) ** (s.emin + 1) if not s.is_int else Fraction(2)
    big = s.max / 2

    def matters(X, k, ftz):
        """Points where the policy (k > 0: not the first) or ftz can change something,
        plus one and zero; every point for the first policy without ftz."""
        if X is None or X in (0, 1):
            return True
        return (not ftz or abs(X) < small) and (k == 0 or abs(X) >= big or X < 0 and not s.signed)

    # random values of the whole range (fixed seed): grid values, midpoints, and points between
    rnd = np.random.default_rng(zlib_crc(name))
    extra = []
    for _ in range(12):
        if s.is_int:
            g = Fraction(int(rnd.integers(s.lo - 3, s.hi + 4)))
            q = Fraction(1)
        else:
            e = int(rnd.integers(s.emin - 1, s.emax + 2))
            q = Fraction(2) ** (max(e, s.emin) - s.mbits)
            g = (Fraction(2) ** e if e >= s.emin else 0) + q * int(rnd.integers(0, 1 << s.mbits))
            g = -g if (s.signed and rnd.random() < 0.5) else g
        extra += [g, g + q / 2, g + q * Fraction(int(rnd.integers(1, 1000)), 1000)]
    for X in extra:
        for mode in MODES:
            n += 1
            _check_one(f, _as_input(X), X, mode, _policies(f)[0], False, False, bad, examples)
    for mode in MODES:
        for k, policy in enumerate(_policies(f)):
            for ftz in (False, True):
                for x, X in points:
                    if matters(X, k, ftz):
                        n += 1
                        _check_one(f, x, X, mode, policy, ftz, False, bad, examples)
    # daz: inputs that are subnormal in their own format (float16 -> fp16 threshold; Python
    # floats -> fp64's), and normal ones next to them
    h = [np.float16(2.0 ** -20), np.float16(-(2.0 ** -24)), np.float16(2.0 ** -14), np.float16(-3.0)]
    d = [2.0 ** -1074, -(2.0 ** -1030), 2.0 ** -1022, 0.0, "1e-400", "-1e-400"]
    for mode in ("nearest_even", "toward_zero", "up", "down", "stochastic"):
        for ftz in (False, True):
            for x in h + d:
                n += 1
                X = Fraction(x) if isinstance(x, str) else Fraction(float(x))
                if isinstance(x, np.float16):
                    try:
                        _check_daz16(f, x, X, mode, ftz, bad, examples)
                    except Exception as err:  # noqa: BLE001
                        bad[f"raised {type(err).__name__}"] += 1
                        examples.setdefault(f"raised {type(err).__name__}", f"{f.name} {x!r}: {err}")
                else:
                    _check_one(f, x, X, mode, None, ftz, True, bad, examples)
    return n, bad, examples


def _check_daz16(f, x, X, mode, ftz, bad, examples):
    """daz with a float16 input: the threshold is fp16's smallest normal 2**-14."""
    kw = dict(rounding=mode, ftz=ftz, daz=True)
    if mode == "stochastic":
        kw["rng"] = 3
    e = ff.explain(x, f.name, **kw)
    want = ff.cast(x, f.name, **kw)
    line = _rounding_line(e.text(colour=False)).lower()
    zeroed = X != 0 and abs(X) < Fraction(2) ** -14
    if not _same(e.value, want):
        bad["stored != cast"] += 1
        examples.setdefault("stored != cast", f"{f.name} {x!r} daz: {e.value!r} vs {want!r}")
    if zeroed:
        ok = ("daz" in line and "nothing to round" not in line
              and not any("underflow" in n.lower() for n in e.notes))
        if not ok:
            bad["daz claim"] += 1
            examples.setdefault("daz claim", f"{f.name} {x!r}: {line} / {e.notes}")
        if f.signed and f.zero and f.kind == "float" and not _same(want, math.copysign(0.0, float(x))) \
                and f.negative_zero:
            bad["daz value"] += 1
    elif "daz:" in line:
        bad["daz claim"] += 1
        examples.setdefault("daz claim", f"{f.name} {x!r} not subnormal in fp16: {line}")


@pytest.mark.parametrize("name", ff.formats())
def test_explain_claims_match_cast_and_reference(name):
    n, bad, examples = _sweep(name)
    assert n > 300
    if bad:
        lines = [f"{k}: {v} of {n} cases, e.g. {examples[k]}" for k, v in sorted(bad.items())]
        pytest.fail(f"{sum(bad.values())} wrong claims in {name}:\n" + "\n".join(lines))


@pytest.mark.parametrize("x,fmt,kw,want,must,must_not", [
    (-128.0, "int8", {}, -128.0, ["nothing to round"], ["overflow"]),
    (-8.0, "int4", {}, -8.0, ["nothing to round"], ["overflow"]),
    (-127.6, "int8", {}, -128.0, ["nearer neighbour is -128"], ["overflow", "past the largest"]),
    (-128.3, "int8", {}, -128.0, ["-129  <  x  <  -128", "nearer neighbour is -128"], ["overflow"]),
    (-3.0, "uint8", {}, 0.0, ["below the smallest value 0", "saturates"], ["nothing to round"]),
    (np.float16(2 ** -20), "fp16", {"daz": True}, 0.0, ["daz", "treated as 0"],
     ["nothing to round", "underflow"]),
])
def test_issue_reproducers(x, fmt, kw, want, must, must_not):
    e = ff.explain(x, fmt, **kw)
    t = e.text(colour=False)
    body = "\n".join(ln for ln in t.splitlines()[1:] if not ln.startswith(("code", "value", "two's")))
    assert e.value == want == ff.cast(x, fmt, **kw)
    for w in must:
        assert w in body, (w, body)
    for w in must_not:
        assert w not in body.lower(), (w, body)


def test_stochastic_explanation_matches_cast_draw_for_draw():
    """The same seed gives the same draw in cast and explain, and the text names it."""
    for seed in range(40):
        for x, fmt in ((1 + 2 ** -12, "fp16"), (-2.3, "int8"), (Fraction(1, 3), "fp8_e4m3"),
                       (127.4, "int8"), (300.0, "fp8_e5m2fnuz")):
            kw = dict(rounding="stochastic", rng=seed)
            e = ff.explain(x, fmt, **kw)
            v = ff.cast(x, fmt, **kw)
            assert _same(e.value, v)
            line = _rounding_line(e.text(colour=False))
            if e.direction != "either way":
                assert f"this draw took {_num(v)}" in line
    # a draw that cannot show: -128.3 in int8 is stored as -128 whichever way it goes
    e = ff.explain(-128.3, "int8", rounding="stochastic", rng=0)
    assert e.direction == "either way" and "either way" in _rounding_line(e.text(colour=False))


def test_stored_given_must_be_the_routines_result():
    from floatfmt.core.cast import rounding_decision
    assert rounding_decision(2.5, "int8", stored=2.0).value == 2.0
    with pytest.raises(ValueError):
        rounding_decision(2.5, "int8", stored=3.0)
    with pytest.raises(ValueError):
        rounding_decision(2.5, "int8", "stochastic", stored=5.0)


def test_unsigned_float_tiny_negative_is_nan_like_every_negative():
    """A negative decimal below float64's range (-0.0 plus a sticky part) is negative:
    E8M0 has no value for it, as for -1e-50."""
    for x in ("-1e-400", "-1e-50", -1e-50, "-0.1"):
        assert math.isnan(ff.cast(x, "e8m0")), x
        e = ff.explain(x, "e8m0")
        assert math.isnan(e.value) and e.direction == "invalid"
    assert ff.cast("1e-400", "e8m0") == 2.0 ** -127
