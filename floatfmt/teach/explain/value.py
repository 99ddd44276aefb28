"""The explanation of one value: how ``cast`` stores it in a format, and why.

``Explanation`` asks the one rounding routine what it did with the value
(``_cast.rounding_decision``, a ``rounding.Decision``) and words that
decision: the input's exact value, the two neighbours on the format's grid
and where the input falls between them, the guard and sticky bits, which
neighbour the mode chose and why, the range handling (overflow, saturation,
ftz, no zero), the stored value's exact decimal expansion, the code by field,
the class and the errors.  Nothing here restates a rounding or overflow rule:
every choice is read from the decision, so the explanation cannot drift from
``cast``.  The text rendering lives here (``text()``); the HTML rendering is
``explanation_html``.

    >>> e = Explanation(0.1, "bf16")
    >>> e.value, hex(e.code), e.exponent, e.significand
    (0.10009765625, '0x3dcd', -4, Fraction(205, 128))
    >>> e.lower, e.upper, e.direction
    (0.099609375, 0.10009765625, 'away from zero')
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from ...core.cast import rounding_decision
from ...core.codec import values_to_codes
from ...core.intake import parse_string, floor_log2, to_exact
from ...core.formats import get_format, hex_code
from .html import explanation_html
from ..numtext import (binary_fraction, exact_decimal, field_bits, input_text, num_text, paint,
                      pow2_text, signed_sci_text, to_float, use_colour)
from ...core.rounding import resolve_mode, resolve_overflow

__all__ = ["Explanation", "exact_or_special"]


def exact_or_special(x):
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
                 rng=None, sr_bits=None, stored=None) -> None:
        f = get_format(fmt)
        self.input = x
        self.format = f
        self.rounding = resolve_mode(rounding)
        self.overflow = resolve_overflow(overflow, f)
        self.overflow_given = overflow
        self.ftz, self.daz = bool(ftz), bool(daz)
        self.sr_bits = sr_bits
        self.exact, special = exact_or_special(x)
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

    def range_text(self) -> str:
        """The format's finite range as ``lowest..max``."""
        f = self.format
        if f.kind == "int":
            return f"{num_text(f.min)}..{num_text(f.max)}"
        return f"{num_text(-f.max) if f.signed else num_text(f.min)}..{num_text(f.max)}"

    def _outside_text(self, v) -> str:
        """Why the grid value v, which the decision reports outside the format's range
        (``outside``, ``out_of_range``), is not a value of the format: every range
        holds 0 or starts at it, so a positive v lies past the top, a negative one
        below the bottom."""
        f = self.format
        if v > 0:
            what = f"past the largest finite value {num_text(f.max)}"
            if f.kind == "float" and f.nan == "all_ones" and Fraction(v) == self._top_code_value():
                what += f" (that code is NaN in {f.name})"
            return what
        if f.kind == "int" or not f.signed:
            return f"below the smallest value {num_text(f.min)} of {f.name}"
        return f"past the most negative finite value {num_text(-f.max)}"

    def _top_code_value(self) -> Fraction:
        f = self.format
        return (Fraction(2) - Fraction(1, 1 << f.mbits)) * Fraction(2) ** f.emax if f.mbits else \
            Fraction(2) ** (f.emax + 1)

    def _neighbours(self, special):
        """Fill the neighbour facts and ``reason`` from the decision (one case each)."""
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
            parts.append(f"daz: the input {num_text(self.exact)} is subnormal in its own format ({src}), "
                         f"so it is treated as {'-' if d.input == 0 and math.copysign(1, d.input) < 0 else ''}0 "
                         "before rounding.")
        if d.special is not None:
            self._special_reason(special)
            return
        X = self._rounded_exact()
        if d.invalid:
            self.direction = "invalid"
            why = ("it has no negative values" if (X is not None and X < 0) or d.input < 0
                   or math.copysign(1, d.input) < 0 else "it has no zero")
            self.reason = " ".join(parts + [f"{f.name} has no value for {num_text(X if X is not None else special)} "
                                            f"({why}): the result is {num_text(self.value)}."])
            return
        if X is not None and self.overflow == "wrap" and X != self.exact:
            parts.append(f"wrap: the input is first reduced modulo 2^{f.bits} = {1 << f.bits}, "
                         f"to {num_text(X)}.")
        if d.beyond:
            self.direction = "overflow"
            where = (f"far past the largest finite value {num_text(f.max)}" if d.out_of_range == "above"
                     else f"far below the most negative value {self.range_text().split('..')[0]}")
            parts.append(f"x is {where}: every neighbour lies outside {f.name}'s range "
                         f"({self.range_text()}).")
            parts.append(self._action_text(d, None))
            self.reason = " ".join(parts)
            return
        self.lower, self.upper = to_float(d.lower), to_float(d.upper)
        if d.lower == d.upper:
            self._on_grid_reason(X, parts)
        else:
            self._rounded_reason(X, parts)
        self._underflow_note(X)

    def _special_reason(self, special):
        """``direction`` and ``reason`` for a NaN or infinite input."""
        f, d = self.format, self.decision
        if d.special == "nan":
            self.direction = "nan"
            self.reason = ("NaN stays NaN." if f.has_nan else
                           f"{f.name} has no NaN code: cast returns NaN, encode refuses it.")
            return
        s = "+" if special > 0 else "-"
        self.direction = "exact" if d.action is None else "overflow"
        if d.action is None:
            self.reason = f"{s}Inf is a value of {f.name}."
        else:
            have = "" if f.inf else f"{f.name} has no Inf; "
            self.reason = have + self._action_text(d, s + "Inf")

    def _on_grid_reason(self, X, parts):
        """``reason`` when the value the routine rounded is on the format's grid."""
        f, d = self.format, self.decision
        self.position = Fraction(0)
        self.gap = self._ulp_at(d.lower)
        if d.out_of_range is None:
            self.direction = "flushed" if d.action == "flush" else "exact"
            if d.daz:
                parts.append(f"0 is a value of {f.name}.")
            elif d.action == "flush":
                parts.append(f"{num_text(X)} is a subnormal value of {f.name}, and ftz flushes "
                             f"subnormal results to zero: {num_text(self.value)}.")
            else:
                parts.append(f"{num_text(X)} is a value of {f.name}: nothing to round.")
        else:
            self.direction = "overflow"
            kind = "an integer" if f.kind == "int" else f"on {f.name}'s grid of significands"
            parts.append(f"{num_text(X)} is {kind} but lies {self._outside_text(d.lower)}.")
            parts.append(self._action_text(d, None))
        self.reason = " ".join(parts)

    def _rounded_reason(self, X, parts):
        """The guard / sticky facts, ``direction`` and ``reason`` when x lies between
        two neighbours: the choice and the range handling are the decision's."""
        f, d = self.format, self.decision
        lo, hi = d.lower, d.upper
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
        parts.append(f"The dropped part is 0.{binary_fraction(frac)} (binary) of a step: guard bit "
                     f"{self.guard}, sticky bit {self.sticky}.")
        parts.append(self._why(d, X, near, far))
        for name in d.outside:
            n = lo if name == "lower" else hi
            if d.chosen != name and d.chosen != "either":
                parts.append(f"({num_text(n)} lies {self._outside_text(n)}: it is not a value of "
                             f"{f.name}.)")
        if d.chosen == "either":
            self.direction = "either way"
        elif d.out_of_range is not None:
            self.direction = "overflow"
        else:
            self.direction = "toward zero" if abs(d.rounded) < abs(X) else "away from zero"
        if d.out_of_range is not None:
            parts.append(f"{num_text(d.rounded)} lies {self._outside_text(d.rounded)}: overflow.")
            parts.append(self._action_text(d, None))
        elif d.action == "flush":
            parts.append(f"{num_text(d.rounded)} is subnormal in {f.name}; ftz flushes it to "
                         f"{num_text(self.value)}.")
        elif d.action == "smallest":
            p2 = pow2_text(self.value)
            parts.append(f"{f.name} has no zero: a result of 0 is stored as its smallest value "
                         f"{num_text(self.value)}" + (f" = {p2}" if p2 else "") + ".")
        if d.chosen == "either" or d.out_of_range is None:
            parts.append(f"Stored: {num_text(self.value)}.")
        self.reason = " ".join(parts)

    def _why(self, d, X, near, far) -> str:
        """Why the mode chose the neighbour it chose (read from the decision)."""
        f, mode = self.format, self.rounding
        chosen = None if d.rounded is None else num_text(d.rounded)
        last = "value is even" if f.kind == "int" else "last significand bit is 0"
        mid = (d.lower + d.upper) / 2
        if mode in ("nearest_even", "nearest_away"):
            if d.tie:
                if mode == "nearest_even":
                    rule = f"nearest_even takes the neighbour whose {last}, {chosen}."
                else:
                    rule = f"nearest_away takes the neighbour of larger magnitude, {chosen}."
                return f"x is exactly the midpoint {num_text(mid)} of the two: a tie, and " + rule
            side = "below" if X < mid else "above"
            return (f"x lies {side} the midpoint {num_text(mid)}, so the nearer neighbour is "
                    f"{num_text(self.nearer)}, and nearest rounding takes it.")
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
        text = (f"Stochastic rounding takes {num_text(far)} (larger magnitude) with probability "
                f"{float(p):.6g}" + (f" (the dropped fraction cut to {sr} bits)" if sr is not None
                                     else " (the dropped fraction of a step)")
                + f", else {num_text(near)}")
        if d.chosen == "either":
            return text + (f"; both would be stored as {num_text(self.value)}, so this draw cannot be "
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
            return s + f"the overflow policy 'inf' gives {num_text(v)}."
        if d.action == "nan":
            return s + "the overflow policy 'nan' gives NaN."
        if d.action == "saturate":
            if f.kind == "int":
                return s + f"{f.name} saturates out-of-range values: {num_text(v)}."
            return s + f"the overflow policy 'saturate' clips it to {num_text(v)}."
        if d.action == "wrap":
            return s + f"two's complement wrap-around (modulo {1 << (f.bits or 0)}) gives {num_text(v)}."
        if d.action == "max":
            return s + (f"rounding {mode} does not round outward on this side, so IEEE 754 gives "
                        f"the largest finite magnitude, {num_text(v)}, not {'-' if v < 0 else '+'}"
                        f"{'Inf' if self.overflow == 'inf' else 'NaN'}.")
        return s + f"the result is {num_text(v)}."

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
                              f"{num_text(f.smallest_subnormal)}, and the chosen neighbour is 0.")
        elif v != 0 and abs(v) < f.smallest_normal:
            self.notes.append(f"Subnormal range: below {num_text(f.smallest_normal)} the spacing stays "
                              f"{num_text(f.smallest_subnormal)}, so precision is lost.")

    def _errors(self):
        X, v = self.exact, self.value
        self.abs_error = self.rel_error = self.ulp_error = None
        if X is None or not math.isfinite(v):
            return
        err = Fraction(v) - X
        self.abs_error = to_float(err)  # +-Inf when past float64 (10**400 saturated)
        self.rel_error = to_float(err / abs(X)) if X != 0 else None
        gap = self.gap if self.gap else self._ulp_at(X)
        self.ulp_error = to_float(err / gap)

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

    def formula(self) -> str:
        """The stored value as sign × significand × 2^exponent (integers: the sum of
        the set bits' weights); empty when there is no code."""
        f, v = self.format, self.value
        if self.exponent is None or self.bits is None:
            return ""
        if f.kind == "int":
            b = self.bits
            terms = []
            for i, bit in enumerate(b):
                w = 1 << (len(b) - 1 - i)
                if bit == "1":
                    terms.append(f"-{w}" if (i == 0 and f.signed) else f"{w}")
            if len(terms) < 2:
                return f"{int(v)}"
            return f"{' + '.join(terms).replace('+ -', '- ')} = {int(v)}"
        sgn = "-" if self.sign else "+"
        return f"{sgn}{exact_decimal(self.significand)} × 2^{self.exponent} = {exact_decimal(v)}"

    def twos_complement(self) -> str | None:
        """How a negative integer's two's complement code is formed, else None."""
        f, v = self.format, self.value
        if f.kind != "int" or not f.signed or not math.isfinite(v) or v >= 0:
            return None
        mag = format(int(-v), f"0{f.bits}b")
        inv = "".join("1" if c == "0" else "0" for c in mag)
        return f"|{int(v)}| = {mag}, invert -> {inv}, add 1 -> {self.bits}"

    def code_text(self, colour: bool = False) -> str:
        """The code in hex and its bits by field (painted when ``colour``)."""
        f = self.format
        if self.code is None:
            return f"none ({f.name} has no code for {num_text(self.value)})"
        parts = field_bits(self.fields(), colour)
        what = "two's complement" if f.kind == "int" else \
            " ".join(n for n, _, _ in self.fields())
        s = f"{hex_code(self.code, f)} = {parts}  ({what})"
        if f.name == "tf32":
            word = int(values_to_codes(np.asarray(self.value), get_format("fp32")))
            s += f"\n{'':13}{f.bits}-bit tf32 code; in memory an fp32 word 0x{word:08x} (low 13 bits zero)"
        return s

    def number_line(self, width: int = 41) -> str | None:
        """An ASCII number line from lower (left) to upper (right): ``x`` marks the
        rounded value, ``+`` the midpoint; None when nothing is rounded."""
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
            return f"random draw, stored {num_text(self.value)} either way"
        chosen = num_text(d.rounded)
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
            what += f", stored as {num_text(self.value)}"
        return what

    def neighbour_text(self) -> str | None:
        """The neighbours line (None when there is none to show)."""
        d, f = self.decision, self.format
        if d.beyond:
            return (f"none in range: |x| is far outside {f.name}'s range {self.range_text()}")
        if d.lower is None:
            return None
        if d.lower == d.upper:
            if d.daz:
                return "x is treated as 0 (daz), a value of " + f.name
            if d.out_of_range is None:
                return f"x is itself a value of {f.name}"
            return f"x needs no rounding, but lies outside {f.name}'s range {self.range_text()}"
        p2 = pow2_text(self.gap)
        text = (f"{num_text(d.lower)}  <  x  <  {num_text(d.upper)}   (step {num_text(self.gap)}"
                + (f" = {p2}" if p2 else "") + ")")
        bad = [num_text(d.lower if n == "lower" else d.upper) for n in d.outside]
        if bad:
            text += f"   [{' and '.join(bad)} outside {f.name}'s range {self.range_text()}]"
        return text

    def error_text(self) -> str:
        """The absolute, relative (both signed) and ulp errors in one line."""
        rel = "n/a" if self.rel_error is None else signed_sci_text(self.rel_error, 4)
        return (f"absolute {signed_sci_text(self.abs_error, 6)}, relative {rel}, "
                f"{self.ulp_error:+.4g} ulp")

    def text(self, colour: bool | None = None) -> str:
        """The explanation as text; ``colour=None`` colours when stdout is a terminal
        and ``NO_COLOR`` is not set."""
        if colour is None:
            colour = use_colour()
        f = self.format
        L = []
        pol = self.overflow + ("" if self.overflow_given is not None else " (format default)")
        L.append(f"explain {input_text(self.input)} as {f.name}   rounding={self.rounding}  "
                 f"overflow={pol}" + ("  ftz" if self.ftz else "") + ("  daz" if self.daz else ""))
        L.append("")
        if self.exact is not None:
            ex = exact_decimal(self.exact)
            shown = input_text(self.input)
            L.append(f"{'input':<13}{shown}" + (f"  (exactly {ex})" if ex != shown else "  (exact value)"))
        else:
            L.append(f"{'input':<13}{input_text(self.input)}")
        nb = self.neighbour_text()
        if nb:
            L.append(f"{'neighbours':<13}{nb}")
            line = self.number_line()
            if line:
                L.append(f"{'':13}{line}   x is {float(self.position):.4g} of the way up; + is the midpoint")
        L.append(f"{'rounding':<13}{self.summary()}: {self.reason}".rstrip())
        for n in self.notes:
            L.append(f"{'':13}{n}")
        L.append(f"{'stored':<13}{num_text(self.value)}" +
                 (f"  (exact decimal {exact_decimal(self.value)})" if math.isfinite(self.value) else ""))
        L.append(f"{'code':<13}{self.code_text(colour)}")
        for name, b, desc in self.fields():
            L.append(f"{'':13}{paint(f'{name:<9}', name, colour)}{paint(b, name, colour)}  {desc}")
        formula = self.formula()
        if formula:
            L.append(f"{'value':<13}{formula}")
        tc = self.twos_complement()
        if tc:
            L.append("two's compl. " + tc)
        L.append(f"{'class':<13}{self.cls}")
        if self.abs_error is not None:
            L.append(f"{'error':<13}{self.error_text()}")
        else:
            L.append(f"{'error':<13}n/a")
        return "\n".join(L)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return explanation_html(self)
