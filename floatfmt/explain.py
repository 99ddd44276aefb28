"""Bit-level explanations (``explain``) and format comparison tables (``compare``).

``explain(x, fmt)`` rounds ``x`` to ``fmt`` exactly as ``cast`` does and
records every step so that it can be shown: the input's exact value, the two
representable neighbours and where ``x`` falls between them, the rounding
decision and its reason (tie? guard and sticky bits?), the stored value's exact
decimal expansion, the code in hex and binary, the fields, the class and the
errors.  The returned object prints as text (ANSI colours on a terminal: sign
red, exponent blue, mantissa green; plain when not a TTY or when ``NO_COLOR``
is set) and renders as HTML in Jupyter (one box per bit, coloured by field).

    >>> e = explain(0.1, "bf16")
    >>> e.value, hex(e.code), e.exponent, e.significand
    (0.10009765625, '0x3dcd', -4, Fraction(205, 128))
    >>> e.lower, e.upper, e.direction
    (0.099609375, 0.10009765625, 'away from zero')

``compare(formats)`` returns a table object (text, Markdown and HTML reprs) of
the facts that set range and precision.

    >>> print(compare(["fp16", "bf16"]).markdown().splitlines()[2])
    | fp16 | 16 | s1 e5 m10 | 15 | 65504 | 2^-14 ≈ 6.104e-05 | 2^-24 ≈ 5.96e-08 | 2^-10 ≈ 0.0009766 | 3.31 | 12.0 | Inf, NaN |
"""

from __future__ import annotations

import html
import math
import os
import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np

from ._cast import cast, rounding_decision
from .codec import values_to_codes
from .exact import parse_string, floor_log2, to_exact
from ._formats import Format, get_format, hex_code
from ._info import info
from .rounding import resolve_mode, resolve_overflow

__all__ = ["explain", "explain_block", "compare", "Explanation", "ExplanationTable",
           "BlockExplanation", "ComparisonTable", "explorer", "exact_decimal"]

# Colours per field: (ANSI SGR code, HTML background).
_COLOURS = {"sign": ("31", "#f6b8c0"), "exponent": ("34", "#b7d3f2"),
            "mantissa": ("32", "#bfe5b4"), "value": ("33", "#f8df9b")}


def _use_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _paint(text: str, field: str, colour: bool) -> str:
    return f"\033[{_COLOURS[field][0]}m{text}\033[0m" if colour else text


# ----------------------------------------------------------------------------- numbers as text
def exact_decimal(v, max_digits: int | None = None) -> str:
    """Every decimal digit of a finite binary (dyadic) number, or of any rational
    whose expansion terminates; otherwise the first ``max_digits`` (default 60)
    followed by ``…``.

    >>> exact_decimal(0.1)
    '0.1000000000000000055511151231257827021181583404541015625'
    >>> exact_decimal(Fraction(1, 3), 8)
    '0.33333333…'
    """
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    fr = Fraction(v)
    neg = fr < 0 or (isinstance(v, float) and v == 0 and math.copysign(1.0, v) < 0)
    fr = abs(fr)
    den = fr.denominator
    while den % 2 == 0:
        den //= 2
    while den % 5 == 0:
        den //= 5
    terminating = den == 1
    limit = None if terminating else (60 if max_digits is None else max_digits)
    whole, rest = divmod(fr.numerator, fr.denominator)
    digits = []
    while rest and (limit is None or len(digits) < limit):
        rest *= 10
        d, rest = divmod(rest, fr.denominator)
        digits.append(str(d))
    out = ("-" if neg else "") + str(whole) + ("." + "".join(digits) if digits else "")
    return out + ("…" if rest else "")


def _num(v) -> str:
    """Short text for a value: Python's shortest repr, ``-0.0`` kept, ints plain."""
    if v is None:
        return "none"
    if isinstance(v, Fraction):
        try:
            v = float(v)
        except OverflowError:  # past float64: 2^1024 (fp64's virtual neighbour), 10**400 ...
            p2 = pow2_text(v)
            return (("-" if v < 0 else "") + p2 if p2 else
                    f"{Decimal(v.numerator) / Decimal(v.denominator):.17g}".lower())
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 1e16:
        return f"{int(v)}" if v != 0 or math.copysign(1, v) > 0 else "-0"
    return repr(float(v))


def pow2_text(v) -> str | None:
    """``2^k`` when |v| (a float, int or Fraction) is a power of two, else None."""
    if not v or isinstance(v, float) and not math.isfinite(v):
        return None
    a = abs(v if isinstance(v, (int, Fraction)) else Fraction(float(v)))
    k = floor_log2(a)
    return f"2^{k}" if a == Fraction(2) ** k else None


def _sci(v, digits=4) -> str:
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    return f"{float(v):.{digits}g}" if 1e-3 <= abs(v) < 1e6 else f"{float(v):.{digits - 1}e}"


def _signed_sci(v, digits=4) -> str:
    if v is None:
        return "n/a"
    return ("+" if v > 0 else "-" if v < 0 else "") + _sci(abs(v), digits)


def _field_bits(fields, colour=False) -> str:
    """The code's bits, one group per field separated by spaces (painted when ``colour``)."""
    return " ".join(_paint(b, name, colour) for name, b, _ in fields)


_BOX = ("display:inline-block;min-width:1.3em;padding:2px 1px;margin:0 1px;text-align:center;"
        "font-family:monospace;font-size:1.1em;border:1px solid #555;border-radius:3px;")


def _bit_boxes(fields, describe=True) -> str:
    """HTML: one box per bit coloured by field, with each field's name and
    description underneath (``describe=False``: the boxes only, for tables)."""
    parts = []
    for name, b, desc in fields:
        cells = "".join(f'<span style="{_BOX}background:{_COLOURS[name][1]}">{c}</span>'
                        for c in b)
        under = (f'<div style="font-size:0.85em;text-align:center;max-width:{max(len(b) * 1.7, 6)}em">'
                 f'<b>{name}</b><br>{html.escape(desc)}</div>') if describe else ""
        parts.append(f'<div style="display:inline-block;vertical-align:top;margin-right:6px">'
                     f'<div>{cells}</div>{under}</div>')
    return "".join(parts)


# ----------------------------------------------------------------------------- exact input
def _as_exact(x):
    """(Fraction, None) for a finite input, or (None, float) for +-Inf / NaN.

    Decimal strings and ``Decimal`` keep their decimal value; floats their binary value."""
    if isinstance(x, Fraction):
        return x, None
    if isinstance(x, (bool, np.bool_)):
        return Fraction(int(x)), None
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x)), None
    if isinstance(x, (str, np.str_)):
        x = parse_string(str(x))
    if isinstance(x, Decimal):
        return (Fraction(x), None) if x.is_finite() else (None, float(x))
    if isinstance(x, float):
        return (Fraction(x), None) if math.isfinite(x) else (None, x)
    ex = to_exact(x)
    if not ex.scalar:
        raise TypeError("expected a scalar")
    v = float(ex.values)
    if not math.isfinite(v):
        return None, v
    if ex.sticky is not None and int(ex.sticky) != 0:  # wider than float64 (long double)
        return Fraction(*x.as_integer_ratio()), None
    return Fraction(v), None


def _input_text(x, short=False) -> str:
    if short and isinstance(x, np.floating) and x.dtype.itemsize <= 8:
        return repr(float(x))
    if short and isinstance(x, np.integer):
        return str(int(x))
    if isinstance(x, (str, np.str_)):
        return str(x)
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, np.generic):
        return f"{x!r}"
    return repr(x)


def _to_float(v: Fraction) -> float:
    """A Fraction as a float, +-Inf past float64's range (fp64's virtual neighbour
    2**1024, the error of a huge input)."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _binary_fraction(t: Fraction, nbits: int = 24) -> str:
    """Binary digits of t in [0, 1) after the point, ``…`` when more follow."""
    out = []
    while t and len(out) < nbits:
        t *= 2
        out.append("1" if t >= 1 else "0")
        t -= int(t >= 1)
    return "".join(out) + ("…" if t else "") if out else "0"


# ----------------------------------------------------------------------------- explanation
class Explanation:
    """How one value is stored in a format; see ``explain``.

    Every statement is worded from ``decision`` (a ``rounding.Decision``: what
    the one rounding routine did with this value, the stored value included),
    so the explanation cannot drift from ``cast``.

    Attributes (read-only by convention): ``input``, ``exact`` (Fraction of the
    input, None for Inf/NaN), ``format``, ``rounding``, ``overflow``,
    ``decision``, ``value`` (stored, Python float, equal to ``cast``), ``code``
    (int, None when the format has no code for the result), ``bits`` (binary
    string), ``lower`` / ``upper`` (the neighbours on the format's grid that
    bracket the rounded value, floats; equal when nothing is rounded; one or
    both may lie outside the format's range, see ``decision.outside``; None
    for Inf/NaN, invalid inputs and inputs far past the range), ``nearer``
    (the nearer neighbour, None when exact or a tie), ``position`` (Fraction
    in [0, 1]: where the rounded value lies from lower to upper), ``tie``,
    ``guard``, ``sticky``, ``direction`` ("exact", "toward zero", "away from
    zero" (the magnitude of the chosen neighbour against the input's),
    "overflow", "invalid", "nan", "flushed" (a subnormal value of the format
    flushed by ftz), or "either way" for a stochastic draw the result cannot
    reveal), ``overflowed``, ``saturated``, ``flushed`` (bools),
    ``reason`` (sentences), ``notes``, ``cls``, ``sign``, ``exponent``
    (unbiased), ``significand`` (Fraction), ``gap`` (spacing around the
    input), ``abs_error``, ``rel_error`` (both signed: stored minus exact, the
    relative one divided by |exact|), ``ulp_error`` (floats, None when undefined).
    """

    def __init__(self, x, fmt, rounding="nearest_even", overflow=None, ftz=False, daz=False,
                 rng=None, sr_bits=None, stored=None):
        f = get_format(fmt)
        self.input = x
        self.format = f
        self.rounding = resolve_mode(rounding)
        self.overflow = resolve_overflow(overflow, f)
        self.overflow_given = overflow
        self.ftz, self.daz = bool(ftz), bool(daz)
        self.sr_bits = sr_bits
        self.exact, special = _as_exact(x)
        self.decision = rounding_decision(x, f, rounding, overflow, ftz, daz, rng, sr_bits=sr_bits,
                                          stored=stored)
        self.value = self.decision.value
        self.notes: list[str] = []
        self._classify()
        self._neighbours(special)
        self._errors()

    # -- the pieces ------------------------------------------------------------------
    def _classify(self):
        f, v = self.format, self.value
        try:
            self.code = int(values_to_codes(np.asarray(v), f))
        except ValueError:
            self.code = None
        self.bits = None if self.code is None else format(self.code, f"0{f.bits}b")
        self.sign = 1 if (f.signed and math.copysign(1.0, v) < 0) else 0
        if math.isnan(v):
            self.cls = "nan"
        elif math.isinf(v):
            self.cls = "inf"
        elif v == 0:
            self.cls = "zero"
        elif f.kind == "float" and abs(v) < f.smallest_normal:
            self.cls = "subnormal"
        else:
            self.cls = "normal"
        self.exponent = self.significand = None
        if f.kind == "float" and self.cls in ("normal", "subnormal", "zero") and self.code is not None:
            efield = (self.code >> f.mbits) & ((1 << f.ebits) - 1)
            mfield = self.code & ((1 << f.mbits) - 1)
            sub = efield == 0 and f.subnormals
            self.exponent = f.emin if sub else efield - f.bias
            self.significand = Fraction(mfield if sub else mfield + (1 << f.mbits), 1 << f.mbits)
        elif f.kind == "int" and self.cls in ("normal", "zero"):
            self.exponent, self.significand = 0, Fraction(abs(int(v)))

    def _rounded_exact(self):
        """The exact value the routine rounded: the input, or 0 after daz, or the input
        reduced modulo 2**bits for overflow='wrap'."""
        d, X = self.decision, self.exact
        if d.daz:
            return Fraction(0)
        if X is not None and self.overflow == "wrap":
            red = abs(X) % (1 << self.format.bits)
            return -red if X < 0 else red
        return X

    def _range_text(self) -> str:
        f = self.format
        if f.kind == "int":
            return f"{_num(f.min)}..{_num(f.max)}"
        return f"{_num(-f.max) if f.signed else _num(f.min)}..{_num(f.max)}"

    def _outside_text(self, v) -> str:
        """Why the grid value v is not a value of the format."""
        f = self.format
        if v > f.max_exact:
            what = f"past the largest finite value {_num(f.max)}"
            if f.kind == "float" and f.nan == "all_ones" and Fraction(v) == self._top_code_value():
                what += f" (that code is NaN in {f.name})"
            return what
        if f.kind == "int" or not f.signed:
            return f"below the smallest value {_num(f.min)} of {f.name}"
        return f"past the most negative finite value {_num(-f.max)}"

    def _top_code_value(self) -> Fraction:
        f = self.format
        return (Fraction(2) - Fraction(1, 1 << f.mbits)) * Fraction(2) ** f.emax if f.mbits else \
            Fraction(2) ** (f.emax + 1)

    def _neighbours(self, special):
        f, d = self.format, self.decision
        self.lower = self.upper = self.nearer = self.position = self.gap = None
        self.tie, self.guard = d.tie, None
        self.sticky = self.dropped = None
        self.overflowed = d.out_of_range is not None and d.action is not None
        self.saturated = d.action == "saturate"
        self.flushed = d.action == "flush"
        parts = []
        if d.daz:
            src = to_exact(self.input).src.name
            parts.append(f"daz: the input {_num(self.exact)} is subnormal in its own format ({src}), "
                         f"so it is treated as {'-' if d.input == 0 and math.copysign(1, d.input) < 0 else ''}0 "
                         "before rounding.")
        if d.special == "nan":
            self.direction = "nan"
            self.reason = ("NaN stays NaN." if f.has_nan else
                           f"{f.name} has no NaN code: cast returns NaN, encode refuses it.")
            return
        if d.special == "inf":
            s = "+" if special > 0 else "-"
            self.direction = "exact" if d.action is None else "overflow"
            if d.action is None:
                self.reason = f"{s}Inf is a value of {f.name}."
            else:
                have = "" if f.inf else f"{f.name} has no Inf; "
                self.reason = have + self._action_text(d, s + "Inf")
            return
        X = self._rounded_exact()
        if d.invalid:
            self.direction = "invalid"
            why = ("it has no negative values" if (X is not None and X < 0) or d.input < 0
                   or math.copysign(1, d.input) < 0 else "it has no zero")
            self.reason = " ".join(parts + [f"{f.name} has no value for {_num(X if X is not None else special)} "
                                            f"({why}): the result is {_num(self.value)}."])
            return
        if X is not None and self.overflow == "wrap" and X != self.exact:
            parts.append(f"wrap: the input is first reduced modulo 2^{f.bits} = {1 << f.bits}, "
                         f"to {_num(X)}.")
        if d.beyond:
            self.direction = "overflow"
            where = (f"far past the largest finite value {_num(f.max)}" if d.out_of_range == "above"
                     else f"far below the most negative value {self._range_text().split('..')[0]}")
            parts.append(f"x is {where}: every neighbour lies outside {f.name}'s range "
                         f"({self._range_text()}).")
            parts.append(self._action_text(d, None))
            self.reason = " ".join(parts)
            return
        lo, hi = d.lower, d.upper
        self.lower, self.upper = _to_float(lo), _to_float(hi)
        if lo == hi:
            self.position = Fraction(0)
            self.gap = self._ulp_at(lo)
            if d.out_of_range is None:
                self.direction = "flushed" if d.action == "flush" else "exact"
                if d.daz:
                    parts.append(f"0 is a value of {f.name}.")
                elif d.action == "flush":
                    parts.append(f"{_num(X)} is a subnormal value of {f.name}, and ftz flushes "
                                 f"subnormal results to zero: {_num(self.value)}.")
                else:
                    parts.append(f"{_num(X)} is a value of {f.name}: nothing to round.")
                self.reason = " ".join(parts)
            else:
                self.direction = "overflow"
                kind = "an integer" if f.kind == "int" else f"on {f.name}'s grid of significands"
                parts.append(f"{_num(X)} is {kind} but lies {self._outside_text(lo)}.")
                parts.append(self._action_text(d, None))
                self.reason = " ".join(parts)
            self._underflow_note(X)
            return
        self.gap = hi - lo
        self.position = (X - lo) / self.gap
        near, far = (lo, hi) if X > 0 or (X == 0 and d.input >= 0 and math.copysign(1, d.input) > 0) \
            else (hi, lo)
        frac = abs(X - near) / self.gap
        self.dropped = frac
        self.guard = int(frac >= Fraction(1, 2))
        self.sticky = int(frac % Fraction(1, 2) != 0)
        if d.nearer is not None:
            self.nearer = self.lower if d.nearer == "lower" else self.upper
        parts.append(f"The dropped part is 0.{_binary_fraction(frac)} (binary) of a step: guard bit "
                     f"{self.guard}, sticky bit {self.sticky}.")
        parts.append(self._why(d, X, near, far))
        for name in d.outside:
            n = lo if name == "lower" else hi
            if d.chosen != name and d.chosen != "either":
                parts.append(f"({_num(n)} lies {self._outside_text(n)}: it is not a value of "
                             f"{f.name}.)")
        if d.chosen == "either":
            self.direction = "either way"
        elif d.out_of_range is not None:
            self.direction = "overflow"
        else:
            self.direction = "toward zero" if abs(d.rounded) < abs(X) else "away from zero"
        if d.out_of_range is not None:
            parts.append(f"{_num(d.rounded)} lies {self._outside_text(d.rounded)}: overflow.")
            parts.append(self._action_text(d, None))
        elif d.action == "flush":
            parts.append(f"{_num(d.rounded)} is subnormal in {f.name}; ftz flushes it to "
                         f"{_num(self.value)}.")
        elif d.action == "smallest":
            parts.append(f"{f.name} has no zero: a result of 0 is stored as its smallest value "
                         f"{_num(self.value)}" + (f" = {pow2_text(self.value)}" if pow2_text(self.value) else "")
                         + ".")
        if d.chosen == "either" or d.out_of_range is None:
            parts.append(f"Stored: {_num(self.value)}.")
        self.reason = " ".join(parts)
        self._underflow_note(X)

    def _why(self, d, X, near, far) -> str:
        """Why the mode chose the neighbour it chose (read from the decision)."""
        f, mode = self.format, self.rounding
        chosen = None if d.rounded is None else _num(d.rounded)
        last = "value is even" if f.kind == "int" else "last significand bit is 0"
        mid = (d.lower + d.upper) / 2
        if mode in ("nearest_even", "nearest_away"):
            if d.tie:
                if mode == "nearest_even":
                    rule = f"nearest_even takes the neighbour whose {last}, {chosen}."
                else:
                    rule = f"nearest_away takes the neighbour of larger magnitude, {chosen}."
                return f"x is exactly the midpoint {_num(mid)} of the two: a tie, and " + rule
            side = "below" if X < mid else "above"
            return (f"x lies {side} the midpoint {_num(mid)}, so the nearer neighbour is "
                    f"{_num(self.nearer)}, and nearest rounding takes it.")
        if mode == "toward_zero":
            return f"Mode toward_zero: the dropped bits are discarded, which takes the neighbour of smaller magnitude, {chosen}."
        if mode == "up":
            return f"Mode up takes the upper neighbour (toward +Inf), {chosen}."
        if mode == "down":
            return f"Mode down takes the lower neighbour (toward -Inf), {chosen}."
        if mode == "odd":
            return (f"Round to odd takes the neighbour whose "
                    f"{'value is odd' if f.kind == 'int' else 'last significand bit is 1'}, {chosen}, "
                    "so the dropped part leaves a trace.")
        p = self.dropped
        sr = self.sr_bits
        if sr is not None:
            p = Fraction(math.floor(p * (1 << sr)), 1 << sr)
        text = (f"Stochastic rounding takes {_num(far)} (larger magnitude) with probability "
                f"{float(p):.6g}" + (f" (the dropped fraction cut to {sr} bits)" if sr is not None
                                     else " (the dropped fraction of a step)")
                + f", else {_num(near)}")
        if d.chosen == "either":
            return text + (f"; both would be stored as {_num(self.value)}, so this draw cannot be "
                           "seen in the result.")
        return text + f"; this draw took {chosen}."

    def _action_text(self, d, what) -> str:
        """The range handling the decision records, in words."""
        text = self._action_words(d, what)
        return text if text.startswith(self.format.name) else text[:1].upper() + text[1:]

    def _action_words(self, d, what) -> str:
        f, v, mode = self.format, self.value, self.rounding
        s = "" if what is None else f"{what}: "
        if d.action == "inf":
            return s + f"the overflow policy 'inf' gives {_num(v)}."
        if d.action == "nan":
            return s + "the overflow policy 'nan' gives NaN."
        if d.action == "saturate":
            if f.kind == "int":
                return s + f"{f.name} saturates out-of-range values: {_num(v)}."
            return s + f"the overflow policy 'saturate' clips it to {_num(v)}."
        if d.action == "wrap":
            return s + f"two's complement wrap-around (modulo {1 << f.bits}) gives {_num(v)}."
        if d.action == "max":
            return s + (f"rounding {mode} does not round outward on this side, so IEEE 754 gives "
                        f"the largest finite magnitude, {_num(v)}, not {'-' if v < 0 else '+'}"
                        f"{'Inf' if self.overflow == 'inf' else 'NaN'}.")
        return s + f"the result is {_num(v)}."

    def _ulp_at(self, X) -> Fraction:
        f = self.format
        if f.kind == "int":
            return Fraction(1)
        a = abs(X)
        e = f.emin if a == 0 else max(floor_log2(a), f.emin)
        return Fraction(2) ** (e - f.mbits)

    def _underflow_note(self, X):
        f, d, v = self.format, self.decision, self.value
        if f.kind != "float" or d.daz or X is None or X == 0 or not math.isfinite(v):
            return
        if d.rounded == 0 and d.chosen in ("lower", "upper") and f.zero:
            self.notes.append(f"Underflow: |x| is below the smallest positive value "
                              f"{_num(f.smallest_subnormal)}, and the chosen neighbour is 0.")
        elif v != 0 and abs(v) < f.smallest_normal:
            self.notes.append(f"Subnormal range: below {_num(f.smallest_normal)} the spacing stays "
                              f"{_num(f.smallest_subnormal)}, so precision is lost.")

    def _errors(self):
        X, v = self.exact, self.value
        self.abs_error = self.rel_error = self.ulp_error = None
        if X is None or not math.isfinite(v):
            return
        err = Fraction(v) - X
        self.abs_error = _to_float(err)  # +-Inf when past float64 (10**400 saturated)
        self.rel_error = _to_float(err / abs(X)) if X != 0 else None
        gap = self.gap if self.gap else self._ulp_at(X)
        self.ulp_error = _to_float(err / gap)

    # -- field view ------------------------------------------------------------------
    def fields(self):
        """[(field, bit string, description)] in storage order; [] when there is no code."""
        f, b = self.format, self.bits
        if b is None:
            return []
        if f.kind == "int":
            return [("sign", b[0], f"weight -{1 << (f.bits - 1)}" if f.signed else f"weight {1 << (f.bits - 1)}"),
                    ("value", b[1:], f"= {int(b[1:], 2)}")] if f.signed else [("value", b, f"= {int(b, 2)}")]
        out = []
        i = 0
        if f.signed:
            out.append(("sign", b[0], "+" if b[0] == "0" else "-"))
            i = 1
        ebits, mbits = b[i:i + f.ebits], b[i + f.ebits:]
        E = int(ebits, 2)
        if self.cls in ("inf", "nan"):
            edesc = f"E = {E}: all ones"
            mdesc = "0: Inf" if self.cls == "inf" else "NaN"
        elif self.exponent is not None:
            if E == 0 and f.subnormals:
                edesc = (f"E = 0: {'zero' if self.cls == 'zero' else 'subnormal'}, scale "
                         f"2^(1-{f.bias}) = 2^{self.exponent}")
                lead = "0"
            else:
                edesc = f"E = {E}: 2^({E}-{f.bias}) = 2^{self.exponent}"
                lead = "1"
            mdesc = f"{lead}.{mbits or '0'} (binary) = {exact_decimal(self.significand)}"
        else:
            edesc, mdesc = f"E = {E}", ""
        out.append(("exponent", ebits, edesc))
        if f.mbits:
            out.append(("mantissa", mbits, mdesc))
        elif self.exponent is not None:
            out[-1] = ("exponent", ebits, edesc + " (no mantissa: significand 1)")
        return out

    def _formula(self) -> str:
        f, v = self.format, self.value
        if self.exponent is None or self.bits is None:
            return ""
        if f.kind == "int":
            b = self.bits
            terms = []
            for i, bit in enumerate(b):
                w = 1 << (f.bits - 1 - i)
                if bit == "1":
                    terms.append(f"-{w}" if (i == 0 and f.signed) else f"{w}")
            if len(terms) < 2:
                return f"{int(v)}"
            return f"{' + '.join(terms).replace('+ -', '- ')} = {int(v)}"
        sgn = "-" if self.sign else "+"
        return f"{sgn}{exact_decimal(self.significand)} × 2^{self.exponent} = {exact_decimal(v)}"

    def _twos_complement(self) -> str | None:
        f, v = self.format, self.value
        if f.kind != "int" or not f.signed or not math.isfinite(v) or v >= 0:
            return None
        mag = format(int(-v), f"0{f.bits}b")
        inv = "".join("1" if c == "0" else "0" for c in mag)
        return f"|{int(v)}| = {mag}, invert -> {inv}, add 1 -> {self.bits}"

    def _code_text(self, colour=False) -> str:
        f = self.format
        if self.code is None:
            return f"none ({f.name} has no code for {_num(self.value)})"
        parts = _field_bits(self.fields(), colour)
        what = "two's complement" if f.kind == "int" else \
            " ".join(n for n, _, _ in self.fields())
        s = f"{hex_code(self.code, f)} = {parts}  ({what})"
        if f.name == "tf32":
            word = int(values_to_codes(np.asarray(self.value), get_format("fp32")))
            s += f"\n{'':13}{f.bits}-bit tf32 code; in memory an fp32 word 0x{word:08x} (low 13 bits zero)"
        return s

    def _line(self, width=41) -> str | None:
        if self.position is None or self.lower is None or self.lower == self.upper:
            return None
        k = int(round(float(self.position) * (width - 1)))
        mid = (width - 1) // 2
        cells = ["-"] * width
        cells[0], cells[-1], cells[mid] = "|", "|", "+"
        cells[k] = "x"
        return "".join(cells)

    # -- renderings --------------------------------------------------------------------
    def summary(self) -> str:
        """A short label for the rounding line: what happened, in words that are not
        the name of another rounding mode."""
        d, mode = self.decision, self.rounding
        if d.special == "nan":
            return "NaN"
        if d.special == "inf":
            return "Inf kept" if d.action is None else "overflow"
        if d.invalid:
            return "invalid"
        if d.beyond or d.out_of_range is not None:
            return "overflow"
        if d.chosen == "exact":
            return "zero (daz)" if d.daz else "exact" + (", flushed (ftz)" if d.action == "flush" else "")
        if d.chosen == "either":
            return f"random draw, stored {_num(self.value)} either way"
        chosen = _num(d.rounded)
        if mode in ("nearest_even", "nearest_away"):
            what = (f"tie, to {'the even' if mode == 'nearest_even' else 'the larger-magnitude'} "
                    f"neighbour {chosen}" if d.tie else f"to the nearer neighbour {chosen}")
        elif mode == "stochastic":
            what = f"random draw, to {chosen}"
        else:
            what = f"{mode}, to {chosen}"
        if d.action == "flush":
            what += ", flushed (ftz)"
        elif d.action == "smallest":
            what += f", stored as {_num(self.value)}"
        return what

    def _neighbour_text(self) -> str | None:
        """The neighbours line (None when there is none to show)."""
        d, f = self.decision, self.format
        if d.beyond:
            return (f"none in range: |x| is far outside {f.name}'s range {self._range_text()}")
        if d.lower is None:
            return None
        if d.lower == d.upper:
            if d.daz:
                return "x is treated as 0 (daz), a value of " + f.name
            if d.out_of_range is None:
                return f"x is itself a value of {f.name}"
            return f"x needs no rounding, but lies outside {f.name}'s range {self._range_text()}"
        p2 = pow2_text(self.gap)
        text = (f"{_num(d.lower)}  <  x  <  {_num(d.upper)}   (step {_num(self.gap)}"
                + (f" = {p2}" if p2 else "") + ")")
        bad = [_num(d.lower if n == "lower" else d.upper) for n in d.outside]
        if bad:
            text += f"   [{' and '.join(bad)} outside {f.name}'s range {self._range_text()}]"
        return text

    def _error_text(self) -> str:
        rel = "n/a" if self.rel_error is None else _signed_sci(self.rel_error, 4)
        return (f"absolute {_signed_sci(self.abs_error, 6)}, relative {rel}, "
                f"{self.ulp_error:+.4g} ulp")

    def text(self, colour: bool | None = None) -> str:
        """The explanation as text; ``colour=None`` colours when stdout is a terminal
        and ``NO_COLOR`` is not set."""
        if colour is None:
            colour = _use_colour()
        f = self.format
        L = []
        pol = self.overflow + ("" if self.overflow_given is not None else " (format default)")
        L.append(f"explain {_input_text(self.input)} as {f.name}   rounding={self.rounding}  "
                 f"overflow={pol}" + ("  ftz" if self.ftz else "") + ("  daz" if self.daz else ""))
        L.append("")
        if self.exact is not None:
            ex = exact_decimal(self.exact)
            shown = _input_text(self.input)
            L.append(f"{'input':<13}{shown}" + (f"  (exactly {ex})" if ex != shown else "  (exact value)"))
        else:
            L.append(f"{'input':<13}{_input_text(self.input)}")
        nb = self._neighbour_text()
        if nb:
            L.append(f"{'neighbours':<13}{nb}")
            line = self._line()
            if line:
                L.append(f"{'':13}{line}   x is {float(self.position):.4g} of the way up; + is the midpoint")
        L.append(f"{'rounding':<13}{self.summary()}: {self.reason}".rstrip())
        for n in self.notes:
            L.append(f"{'':13}{n}")
        L.append(f"{'stored':<13}{_num(self.value)}" +
                 (f"  (exact decimal {exact_decimal(self.value)})" if math.isfinite(self.value) else ""))
        L.append(f"{'code':<13}{self._code_text(colour)}")
        for name, b, desc in self.fields():
            L.append(f"{'':13}{_paint(f'{name:<9}', name, colour)}{_paint(b, name, colour)}  {desc}")
        formula = self._formula()
        if formula:
            L.append(f"{'value':<13}{formula}")
        tc = self._twos_complement()
        if tc:
            L.append("two's compl. " + tc)
        L.append(f"{'class':<13}{self.cls}")
        if self.abs_error is not None:
            L.append(f"{'error':<13}{self._error_text()}")
        else:
            L.append(f"{'error':<13}n/a")
        return "\n".join(L)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        f = self.format
        esc = html.escape
        bits = _bit_boxes(self.fields()) or f"<i>{esc(self._code_text())}</i>"
        rows = [("input", _input_text(self.input) + (
            f" (exactly {exact_decimal(self.exact)})" if self.exact is not None
            and exact_decimal(self.exact) != _input_text(self.input) else ""))]
        nb = self._neighbour_text()
        if nb:
            rows.append(("neighbours", nb))
        rows.append(("rounding", " ".join([f"{self.summary()}: {self.reason}"] + self.notes)))
        rows.append(("stored", exact_decimal(self.value) if math.isfinite(self.value) else _num(self.value)))
        if self.code is not None:
            rows.append(("code", f"{hex_code(self.code, f)} = {self.bits}"))
        if self._formula():
            rows.append(("value", self._formula()))
        if self._twos_complement():
            rows.append(("two's complement", self._twos_complement()))
        rows.append(("class", self.cls))
        if self.abs_error is not None:
            rows.append(("error", self._error_text()))
        table = "".join(f'<tr><th style="text-align:left;padding-right:1em">{esc(k)}</th>'
                        f'<td style="text-align:left;font-family:monospace;word-break:break-all">'
                        f'{esc(str(v))}</td></tr>' for k, v in rows)
        svg = self._svg()
        return (f'<div class="floatfmt-explain"><div><b>{esc(_input_text(self.input))}</b> as '
                f'<b>{esc(f.name)}</b> ({esc(self.rounding)})</div><div style="margin:6px 0">{bits}</div>'
                f'{svg}<table>{table}</table></div>')

    def _svg(self) -> str:
        if self.position is None or self.lower is None or self.lower == self.upper:
            return ""
        w, pad = 420, 40
        xpos = pad + float(self.position) * (w - 2 * pad)
        stored_left = self.value == self.lower
        spos = pad if stored_left else w - pad
        lab = lambda x, t, y: (f'<text x="{x:.1f}" y="{y}" font-size="11" text-anchor="middle" '  # noqa: E731
                               f'font-family="monospace">{html.escape(t)}</text>')
        return (f'<svg width="{w}" height="62" xmlns="http://www.w3.org/2000/svg">'
                f'<line x1="{pad}" y1="25" x2="{w - pad}" y2="25" stroke="#333"/>'
                f'<line x1="{pad}" y1="18" x2="{pad}" y2="32" stroke="#333"/>'
                f'<line x1="{w - pad}" y1="18" x2="{w - pad}" y2="32" stroke="#333"/>'
                f'<line x1="{w / 2}" y1="21" x2="{w / 2}" y2="29" stroke="#999"/>'
                f'<circle cx="{spos}" cy="25" r="7" fill="none" stroke="#2a7" stroke-width="2"/>'
                f'<circle cx="{xpos:.1f}" cy="25" r="4" fill="#d33"/>'
                + lab(pad, _num(self.lower), 50) + lab(w - pad, _num(self.upper), 50)
                + lab(xpos, "x", 12) + lab(w / 2, "midpoint", 44) + '</svg>')


# ----------------------------------------------------------------------------- arrays
class ExplanationTable:
    """Compact table for an array input: one row per element (the first
    ``max_rows`` shown), with a class count for the whole array.  ``t[i]`` is
    the full ``Explanation`` of element i (flat index)."""

    _COLS = ("#", "input", "stored", "code", "bits", "class", "abs error", "rel error", "ulp error")

    def __init__(self, x, fmt, rounding, overflow, ftz, daz, rng, sr_bits, max_rows):
        self.format = get_format(fmt)
        self._args = (rounding, overflow, ftz, daz)
        arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
        if arr.dtype.kind in "fiub":
            elements = list(arr.reshape(-1))
        else:
            elements = list(np.asarray(x, dtype=object).reshape(-1))
        self.shape = arr.shape
        self.stored = np.asarray(cast(x, self.format, rounding, overflow, ftz, daz, rng,
                                      sr_bits=sr_bits), np.float64)
        self._elements = elements
        self.max_rows = max_rows
        flat = self.stored.reshape(-1)
        a = np.abs(flat)
        self.counts = {"nan": int(np.isnan(flat).sum()), "inf": int(np.isinf(flat).sum()),
                       "zero": int((flat == 0).sum())}
        if self.format.kind == "float":
            self.counts["subnormal"] = int(((a > 0) & (a < self.format.smallest_normal)).sum())
        self.counts["normal"] = flat.size - sum(self.counts.values())
        self._rows = {}

    def __len__(self):
        return len(self._elements)

    def __getitem__(self, i) -> Explanation:
        if i not in self._rows:
            r, o, ftz, daz = self._args
            self._rows[i] = Explanation(self._elements[i], self.format, r, o, ftz, daz,
                                        stored=self.stored.reshape(-1)[i])
        return self._rows[i]

    def rows(self):
        """Display rows (lists of strings) for the first ``max_rows`` elements."""
        out = []
        for i in range(min(len(self), self.max_rows)):
            e = self[i]
            out.append([str(i), _input_text(e.input, short=True), _num(e.value),
                        "-" if e.code is None else hex_code(e.code, self.format),
                        "-" if e.bits is None else _field_bits(e.fields()),
                        e.cls, _signed_sci(e.abs_error), _signed_sci(e.rel_error),
                        "n/a" if e.ulp_error is None else f"{e.ulp_error:+.3f}"])
        return out

    def _summary(self):
        more = len(self) - min(len(self), self.max_rows)
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items() if v)
        return (f"{len(self)} values (shape {self.shape}) as {self.format.name}, "
                f"rounding={resolve_mode(self._args[0])}: {counts}"
                + (f"; first {self.max_rows} shown, {more} more" if more else ""))

    def text(self, colour=None) -> str:
        rows = [list(self._COLS)] + self.rows()
        widths = [max(len(r[j]) for r in rows) for j in range(len(self._COLS))]
        lines = [self._summary()]
        for k, r in enumerate(rows):
            lines.append("  ".join(c.rjust(w) if j not in (4, 5) else c.ljust(w)
                                   for j, (c, w) in enumerate(zip(r, widths))).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self):
        return self.text()

    __repr__ = __str__

    def _repr_html_(self):
        esc = html.escape
        head = "".join(f"<th>{esc(c)}</th>" for c in self._COLS)
        body = "".join("<tr>" + "".join(f'<td style="font-family:monospace">{esc(c)}</td>' for c in r)
                       + "</tr>" for r in self.rows())
        return f"<div><p>{esc(self._summary())}</p><table><tr>{head}</tr>{body}</table></div>"


def explain(x, fmt=None, rounding="nearest_even", overflow=None, ftz=False, daz=False, rng=None, *,
            sr_bits=None, max_rows=20, block=0):
    """Round ``x`` to ``fmt`` (as ``cast`` does) and explain every step.

    A scalar gives an ``Explanation``: print it (coloured on a terminal) or let
    Jupyter render it (one box per bit).  An array or list gives an
    ``ExplanationTable`` (one row per element, the first ``max_rows`` shown).
    The options are those of ``cast``.

    Block formats: ``explain(q)`` with a block-scaled ``QuantizedTensor`` (MX or
    NVFP4) is ``explain_block(q, block)``; ``explain(x, "mxfp4_e2m1")`` (any MX
    name or ``"nvfp4"``) quantises ``x`` along its last axis first and explains
    block ``block`` with the original values.

    >>> e = explain(1.0 + 2**-11, "fp16")
    >>> e.tie, e.direction, e.value
    (True, 'toward zero', 1.0)
    >>> explain(-3, "int8").bits
    '11111101'
    """
    scaling = sys.modules.get("floatfmt.quantized")  # no QuantizedTensor exists before it loads
    if scaling is not None and isinstance(x, scaling.QuantizedTensor):
        if fmt is not None:
            raise TypeError("explain(q) takes the format from the QuantizedTensor; do not pass fmt")
        return explain_block(x, block, rounding=rounding)
    if fmt is None:
        raise TypeError("explain(x, fmt) needs a format (or a QuantizedTensor as x)")
    if isinstance(fmt, str) and _block_format_name(fmt):
        from .quantization import quantize
        return explain_block(quantize(x, fmt, rounding=rounding, rng=rng), block, x=x,
                             rounding=rounding)
    fmt = get_format(fmt)
    if isinstance(x, (list, tuple)) or (isinstance(x, np.ndarray) and x.ndim > 0):
        return ExplanationTable(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits, max_rows)
    return Explanation(x, fmt, rounding, overflow, ftz, daz, rng, sr_bits)


# ----------------------------------------------------------------------------- MX / NVFP4 blocks
def _block_format_name(fmt: str) -> bool:
    """Whether ``fmt`` names a block-scaled format (MX or NVFP4)."""
    if not fmt.strip().lower().startswith(("mx", "nvfp")):
        return False  # not a block format: do not load the quantisation modules
    from .quantized import resolve_kind
    return resolve_kind(fmt)[0] in ("mx", "nvfp4")  # unknown: ValueError naming block formats too


def _binary_sci(a: Fraction) -> str:
    """``a`` (positive) as ``m × 2^e`` with 1 <= m < 2."""
    e = floor_log2(a)
    return f"{_num(a / Fraction(2) ** e)} × 2^{e}"


class BlockExplanation:
    """One block of a block-scaled ``QuantizedTensor`` (OCP MX or NVFP4): the
    shared scale, how it was chosen, and every element's code.  See
    ``explain_block``.

    Attributes: ``fmt`` (``"mxfp4_e2m1"`` ...), ``element_format``, ``block``,
    ``n_blocks``, ``size`` (elements in this block), ``positions`` (their indices
    along the blocked axis), ``scale`` (block scale value), ``scale_code``,
    ``scale_format`` (E8M0 or E4M3), ``tensor_scale`` (NVFP4's fp32 scale, else
    None), ``shared_exponent`` (MX; None for a NaN scale), ``emax``, ``amax``
    (Fraction, None without the originals), ``amax_exponent`` (floor(log2 amax)),
    ``rule`` (a sentence), ``elements`` (element values), ``codes``,
    ``dequantized``, ``originals`` / ``quotients`` / ``errors`` (None entries
    without the originals), ``saturated`` / ``flushed`` (lists of bools),
    ``explanations`` (one ``Explanation`` of each element's rounding; also
    ``b[i]``).
    """

    _COLS = ("#", "x", "x / scale", "code", "bits", "element", "dequantised", "error", "note")

    def __init__(self, q, block=0, x=None, rounding="nearest_even"):
        from .blockscale import mx_emax
        from .quantized import split_blocks

        if q.granularity != "block":
            raise ValueError(f"explain_block needs a block-scaled QuantizedTensor (MX or nvfp4), "
                             f"not {q.fmt} per {q.granularity}")
        bs, axis = q.block_size, q.axis
        rows, (lead, n, nb) = split_blocks(q.elements, axis, bs)
        if isinstance(block, bool) or not isinstance(block, (int, np.integer)):
            raise TypeError(f"block must be an integer, not {type(block).__name__}")
        if not -rows.shape[0] <= block < rows.shape[0]:
            raise IndexError(f"block {block} out of range: this tensor has {rows.shape[0]} blocks")
        block = int(block) % rows.shape[0]
        self.fmt, self.block, self.n_blocks, self.axis = q.fmt, block, rows.shape[0], axis
        self.block_size = bs
        j = block % nb
        self.size = min(bs, n - j * bs)
        self.positions = list(range(j * bs, j * bs + self.size))
        f = self.element_format = q.element_format
        self.mxint = q.fmt == "mxint8"
        unit = 64 if self.mxint else 1  # MXINT8 elements are int8 codes / 64
        per_block = lambda a: np.moveaxis(np.asarray(a), axis, -1).reshape(-1)[block]  # noqa: E731
        self.scale = float(per_block(np.asarray(q.scale, np.float64)))
        self.scale_code = int(per_block(q.scale_codes))
        self.tensor_scale = q.tensor_scale
        total = self.scale * (self.tensor_scale if self.tensor_scale is not None else 1.0)
        self.nvfp4 = q.fmt == "nvfp4"
        self.scale_format = get_format("fp8_e4m3" if self.nvfp4 else "e8m0")
        self.emax = None if self.nvfp4 else mx_emax(q.fmt, f)
        self.elem_max = Fraction(f.max) / unit
        self.elements = [float(v) for v in rows[block][:self.size]]
        self.dequantized = [v * total for v in self.elements]  # exact: element × 2^k or × e4m3 × fp32
        if math.isnan(total):
            self.dequantized = [math.nan] * self.size
        self.codes = [int(c) for c in np.asarray(values_to_codes(np.asarray(self.elements) * unit, f))]
        # the originals, exactly
        self.originals = [None] * self.size
        specials = [None] * self.size
        if x is not None:
            arr = np.asarray(x)
            if arr.shape != q.shape:
                raise ValueError(f"x has shape {arr.shape}, the QuantizedTensor {q.shape}")
            if arr.dtype.kind not in "fiub":
                arr = np.asarray(x, dtype=object)
            for i, xi in enumerate(split_blocks(arr, axis, bs)[0][block][:self.size]):
                self.originals[i], specials[i] = _as_exact(xi)
        have = self.have_x = x is not None
        self._specials = specials
        self.quotients = [None if (X is None or not math.isfinite(total) or total == 0)
                          else X / Fraction(total) for X in self.originals]
        self.errors = [None if X is None or not math.isfinite(d) else float(Fraction(d) - X)
                       for X, d in zip(self.originals, self.dequantized)]
        self.saturated = [Q is not None and abs(Q) > self.elem_max for Q in self.quotients]
        self.flushed = [Q is not None and Q != 0 and v == 0 for Q, v in zip(self.quotients, self.elements)]
        self.explanations = [
            Explanation(v * unit if Q is None else Q * unit, f, rounding, "saturate", stored=v * unit)
            for Q, v in zip(self.quotients, self.elements)]
        # the scale and how it was chosen
        finite = [abs(X) for X in self.originals if X is not None]
        self.amax = max(finite) if have and len(finite) == self.size else None
        self.amax_exponent = floor_log2(self.amax) if self.amax else None
        self.shared_exponent = None
        self.scale_explanation = Explanation(self.scale, self.scale_format, stored=self.scale)
        if self.nvfp4:
            self.rule = self._nvfp4_rule(x)
        else:
            self.shared_exponent = None if self.scale_code == 0xFF else self.scale_code - 127
            self.rule = self._mx_rule(specials)

    def _mx_rule(self, specials) -> str:
        f, E = self.element_format, self.shared_exponent
        elem = f"{f.name}" + (" (MXINT8: int8 / 64)" if self.mxint else "")
        if E is None:
            why = ("the block holds Inf or NaN" if any(s is not None for s in specials) else
                   "the block holds Inf or NaN, or floor(log2 amax) - emax is past 127")
            return f"NaN scale (code 0xff): {why}; every element of the block decodes to NaN."
        if self.amax is None:
            return (f"Shared exponent E = floor(log2 amax) - emax, emax = {self.emax} for {elem} "
                    "(OCP MX floor rule); pass the original x to see amax.")
        if self.amax == 0:
            return "All-zero block: amax = 0, so the scale is the smallest, 2^-127 (code 0x00)."
        k = self.amax_exponent
        floor_e = k - self.emax
        text = (f"amax = {_num(self.amax)} = {_binary_sci(self.amax)} (largest |x| of the block): "
                f"floor(log2 amax) = {k}, the unbiased exponent field of amax; minus emax = "
                f"{self.emax} of {elem} gives {floor_e}")
        if floor_e < -127:
            text += ", clamped to E8M0's smallest exponent -127"
        clamped = max(floor_e, -127)
        if clamped != E:
            text += (f". This block's E = {E} differs: its scale was chosen by another rule "
                     "(scale_rounding 'ceil', 'even' or 'rceil')")
        else:
            text += f" = E, stored as E + 127 = {E + 127}"
        return text + "."

    def _nvfp4_rule(self, x) -> str:
        ts, bs = self.tensor_scale, self.scale
        text = (f"Block scale = round_e4m3(amax / (6 × tensor scale)), saturating; the tensor scale "
                f"{_num(ts)} (fp32) is amax(tensor) / (6 × 448) rounded to fp32 unless given")
        if self.amax is not None:
            text = (f"amax = {_num(self.amax)} (largest |x| of the block); amax / (6 × {_num(ts)}) = "
                    f"{_sci(float(self.amax / (6 * Fraction(ts))), 7)}, rounded to E4M3: {_num(bs)}")
            if x is not None:
                tot = float(np.max(np.abs(np.asarray(x, np.float64)))) if np.size(x) else 0.0
                if tot > 0 and float(cast(tot / 2688.0, "fp32")) == ts:
                    text += (f". Tensor scale {_num(ts)} = amax(tensor) {_num(tot)} / (6 × 448) "
                             "rounded to fp32")
                else:
                    text += f". Tensor scale {_num(ts)} (fp32, given)"
        return text + f"; each element is x / ({_num(bs)} × {_num(ts)}) rounded to fp4_e2m1."

    def __len__(self):
        return self.size

    def __getitem__(self, i) -> Explanation:
        return self.explanations[i]

    # -- renderings --------------------------------------------------------------------
    def _title(self) -> str:
        f = self.element_format
        if self.nvfp4:
            what = (f"{self.block_size} {f.name} elements share one E4M3 block scale; one fp32 "
                    "tensor scale")
        else:
            what = f"{self.block_size} {f.name} elements share one E8M0 scale"
        part = f", {self.size} used" if self.size != self.block_size else ""
        return (f"{'NVFP4' if self.nvfp4 else 'MX'} block {self.block} of {self.n_blocks} along axis "
                f"{self.axis} ({self.fmt}: {what}{part})")

    def _scale_lines(self, colour=False):
        """[(label, text)] describing the scale; ``colour`` paints the bits."""
        e = self.scale_explanation
        code = f"0x{self.scale_code:02x} = " + (_field_bits(e.fields(), colour) if e.code is not None
                                                 else format(self.scale_code, "08b"))
        if self.nvfp4:
            out = [("block scale", f"{code}  (E4M3) = {_num(self.scale)}"),
                   ("tensor scale", f"{_num(self.tensor_scale)} (fp32)"),
                   ("scale", f"{_num(self.scale)} × {_num(self.tensor_scale)} = "
                             f"{_num(self.scale * self.tensor_scale)}")]
        elif self.shared_exponent is None:
            out = [("scale", f"{code}  (E8M0 NaN)")]
        else:
            E = self.shared_exponent
            out = [("scale", f"{code}  (E8M0: 2^({self.scale_code}-127) = 2^{E} = {_num(self.scale)})"),
                   ("exponent", f"shared exponent E = {E}")]
        out.append(("how chosen", self.rule))
        unit = " (int8 code / 64)" if self.mxint else ""
        out.append(("elements", f"dequantised = element{unit} × scale; element = x / scale rounded to "
                                f"{self.element_format.name}, saturating at ±{_num(self.elem_max)}"))
        return out

    def _row(self, i, colour=False):
        e, Q = self.explanations[i], self.quotients[i]
        note = ("saturated (clipped to ±max)" if self.saturated[i] else
                "flushed to zero" if self.flushed[i] else "")
        return [str(self.positions[i]),
                _num(self.originals[i]) if self.originals[i] is not None else
                _num(self._specials[i]) if self._specials[i] is not None else "?",
                "?" if Q is None else _num(float(Q)),
                hex_code(self.codes[i], self.element_format),
                _field_bits(e.fields(), colour), _num(self.elements[i]),
                _num(self.dequantized[i]),
                "?" if self.errors[i] is None else _signed_sci(self.errors[i], 6), note]

    def text(self, colour: bool | None = None) -> str:
        """The block as text; ``colour=None`` colours when stdout is a terminal and
        ``NO_COLOR`` is not set."""
        if colour is None:
            colour = _use_colour()
        L = [self._title(), ""]
        L += [f"{k:<13}{v}" for k, v in self._scale_lines(colour)]
        L.append("")
        plain = [list(self._COLS)] + [self._row(i) for i in range(self.size)]
        painted = [list(self._COLS)] + [self._row(i, colour) for i in range(self.size)]
        w = [max(len(r[j]) for r in plain) for j in range(len(self._COLS))]
        for k, (pr, cr) in enumerate(zip(plain, painted)):
            cells = [c + " " * (w[j] - len(p)) if j in (4, 8) else c.rjust(w[j])
                     for j, (p, c) in enumerate(zip(pr, cr))]
            L.append("  ".join(cells).rstrip())
            if k == 0:
                L.append("  ".join("-" * x for x in w))
        if not self.have_x:
            L.append("(x unknown: pass the original tensor, explain_block(q, block, x=x), "
                     "for x / scale, errors and flags)")
        return "\n".join(L)

    def __str__(self):
        return self.text()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        esc = html.escape
        e = self.scale_explanation
        head = (f'<div><b>{esc(self._title())}</b></div><div style="margin:6px 0">'
                f'{_bit_boxes(e.fields()) if e.code is not None else ""}</div>')
        info_rows = "".join(f'<tr><th style="text-align:left;padding-right:1em">{esc(k)}</th>'
                            f'<td style="text-align:left;font-family:monospace">{esc(v)}</td></tr>'
                            for k, v in self._scale_lines())
        th = "".join(f"<th>{esc(c)}</th>" for c in self._COLS)
        body = []
        for i in range(self.size):
            r = self._row(i)
            flag = ' style="background:#fde2c8"' if r[-1] else ""
            cells = [f'<td style="font-family:monospace">{esc(c)}</td>' if j != 4 else
                     f"<td>{_bit_boxes(self.explanations[i].fields(), describe=False)}</td>"
                     for j, c in enumerate(r)]
            body.append(f"<tr{flag}>{''.join(cells)}</tr>")
        return (f'<div class="floatfmt-explain-block">{head}<table>{info_rows}</table>'
                f'<table><tr>{th}</tr>{"".join(body)}</table></div>')


def explain_block(q, block=0, x=None, rounding="nearest_even") -> BlockExplanation:
    """Explain one block of a block-scaled ``QuantizedTensor`` (MX or NVFP4).

    Shows the shared scale (the E8M0 code in hex and bits and the exponent it
    encodes; for NVFP4 the E4M3 block scale and the fp32 tensor scale) and how it
    was chosen (OCP MX: ``E = floor(log2 amax) - emax_elem``, floor(log2 amax)
    being amax's unbiased exponent field, clamped to -127), then one row per
    element: x, x / scale, the element code's bits by field, the element value,
    the dequantised value and the error, flagging saturated elements
    (|x / scale| > the element format's max, stored as ±max) and elements flushed
    to zero.  ``block`` counts blocks in storage order (along ``q.axis``, then the
    other axes); ``x`` is the original tensor (a QuantizedTensor does not keep
    it: without it, x, x / scale, errors and flags are unknown); ``rounding`` is
    the element rounding mode used, for the per-element explanations ``b[i]``.

    >>> import floatfmt as ff
    >>> x = [7.0, 0.2, -2.6] + [0.0] * 29
    >>> b = explain_block(ff.quantize(x, "mxfp4_e2m1"), x=x)
    >>> hex(b.scale_code), b.shared_exponent, b.elements[:3]
    ('0x7f', 0, [6.0, 0.0, -3.0])
    >>> b.saturated[:3], b.flushed[:3]
    ([True, False, False], [False, True, False])
    """
    return BlockExplanation(q, block, x, rounding)


# ----------------------------------------------------------------------------- compare
def _pow2_text(v: float) -> str:
    p = pow2_text(v)
    return f"{p} ≈ {v:.4g}" if p and not (1 <= v <= 65536) else _num(v) if v == int(v) and v < 1e16 \
        else f"{v:.4g}"


class ComparisonTable:
    """Facts of several formats side by side; ``text()``, ``markdown()``,
    ``html()`` (also the Jupyter and ``print`` reprs), ``rows`` (dicts)."""

    COLUMNS = ("format", "bits", "layout", "bias", "max", "smallest normal", "smallest subnormal",
               "eps", "decimal digits", "dynamic range (decades)", "Inf/NaN")

    def __init__(self, names):
        self.rows = [self._row(get_format(n)) for n in names]

    @staticmethod
    def _row(f: Format) -> dict:
        i = info(f)
        if f.kind == "int":
            return {"format": f.name, "bits": f.bits,
                    "layout": f"two's complement {f.bits}" if f.signed else f"unsigned {f.bits}",
                    "bias": "-", "max": _num(f.max), "smallest normal": "-",
                    "smallest subnormal": "-", "eps": "1 (step)",
                    "decimal digits": f"{f.bits * math.log10(2):.2f}",
                    "dynamic range (decades)": f"{math.log10(f.max):.1f}", "Inf/NaN": "none"}
        layout = " ".join(p for p in (("s1" if f.signed else ""), f"e{f.ebits}",
                                      f"m{f.mbits}" if f.mbits else "") if p)
        special = ", ".join(p for p in ("Inf" if f.inf else "", "NaN" if f.has_nan else "") if p)
        sub = "-" if not f.subnormals else _pow2_text(f.smallest_subnormal)
        return {"format": f.name, "bits": f.bits, "layout": layout, "bias": f.bias,
                "max": _pow2_text(f.max) if f.max > 1e6 else _num(f.max) if f.max == int(f.max)
                else f"{f.max:g}",
                "smallest normal": _pow2_text(f.smallest_normal), "smallest subnormal": sub,
                "eps": _pow2_text(i.eps) if f.mbits else "2^0 = 1",
                "decimal digits": f"{f.precision_bits * math.log10(2):.2f}",
                "dynamic range (decades)": f"{math.log10(f.max) - math.log10(f.smallest_subnormal):.1f}",
                "Inf/NaN": special or "none"}

    def _cells(self):
        return [list(self.COLUMNS)] + [[str(r[c]) for c in self.COLUMNS] for r in self.rows]

    def text(self) -> str:
        cells = self._cells()
        w = [max(len(r[j]) for r in cells) for j in range(len(self.COLUMNS))]
        out = []
        for k, r in enumerate(cells):
            out.append("  ".join(c.ljust(w[j]) if j in (0, 2, 10) else c.rjust(w[j])
                                 for j, c in enumerate(r)).rstrip())
            if k == 0:
                out.append("  ".join("-" * x for x in w))
        return "\n".join(out)

    def markdown(self) -> str:
        cells = self._cells()
        out = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(self.COLUMNS)]
        out += ["| " + " | ".join(r) + " |" for r in cells[1:]]
        return "\n".join(out)

    def html(self) -> str:
        cells = self._cells()
        esc = html.escape
        head = "".join(f"<th>{esc(c)}</th>" for c in cells[0])
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in cells[1:])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    __str__ = text
    __repr__ = text
    _repr_markdown_ = markdown
    _repr_html_ = html


DEFAULT_COMPARE = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8")


def compare(formats=DEFAULT_COMPARE) -> ComparisonTable:
    """Table of range and precision facts for ``formats`` (names or ``Format``).

    Columns: bits, layout (sign, exponent, mantissa widths), bias, max,
    smallest normal, smallest subnormal, eps (gap after 1), decimal digits
    (``p * log10(2)`` with p the significand bits), dynamic range in decades
    (``log10(max / smallest positive)``), Inf/NaN.

    >>> t = compare(["bf16", "fp8_e4m3"]); t.rows[1]["max"], t.rows[0]["decimal digits"]
    ('448', '2.41')
    """
    if isinstance(formats, (str, Format)):
        formats = [formats]
    return ComparisonTable(list(formats))


# ----------------------------------------------------------------------------- explorer
def explorer(fmt="bf16", value=0.1):
    """An ipywidgets explorer: pick a format, a rounding mode and a value, or
    slide through the codes (for formats wider than 16 bits the slider sets
    the top 16 bits), and see ``explain``.  Without ipywidgets it returns the
    static ``Explanation`` of ``value``."""
    try:
        import ipywidgets as w
        from IPython.display import display
    except ImportError:
        return explain(value, fmt)
    names = ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
             "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0", "int8", "uint8", "int4"]
    start = get_format(fmt).name
    if start not in names:
        names.append(start)
    fsel = w.Dropdown(options=names, value=start, description="format")
    text = w.Text(value=str(value), description="value", continuous_update=False)
    mode = w.Dropdown(options=["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"],
                      value="nearest_even", description="rounding")
    code = w.IntSlider(min=0, max=(1 << min(get_format(fmt).bits, 16)) - 1, description="code",
                       continuous_update=False)
    out = w.Output()

    def show(*_):
        out.clear_output(wait=True)
        with out:
            try:
                display(explain(text.value, fsel.value, mode.value))
            except (ValueError, TypeError) as err:
                print(f"error: {err}")

    def from_code(change):
        from .codec import decode
        f = get_format(fsel.value)
        v = decode(int(change["new"]) << max(f.bits - 16, 0), f)
        text.value = repr(v) if v == v else "nan"

    def new_format(change):
        code.max = (1 << min(get_format(change["new"]).bits, 16)) - 1
        show()

    text.observe(show, names="value")
    mode.observe(show, names="value")
    fsel.observe(new_format, names="value")
    code.observe(from_code, names="value")
    show()
    return w.VBox([w.HBox([fsel, mode]), w.HBox([text, code]), out])
