"""An independent IEEE P3109 (v4.0, 26 June 2026) projection, written from the report's text.

Nothing here calls floatfmt.  A format is given by its four parameters (K, P,
signedness, domain); everything else is derived here from sections 3.1, 4.7.2,
4.7.4, 4.7.5 and 4.14 of the interim report:

* ``decode(code)``: section 4.7.2 (NaN 2**(K-1) signed / 2**K-1 unsigned; +Inf
  2**(K-1)-1 / 2**K-2 and -Inf 2**K-1 in extended formats; T = x mod 2**(P-1),
  E = x div 2**(P-1); (0 + T 2**(1-P)) 2**(1-B) when E = 0, else
  (1 + T 2**(1-P)) 2**(E-B)).
* ``project(x, mode, sat)``: section 4.7.3, i.e. RoundToPrecision (4.7.4) then
  Saturate (4.7.5).  RoundToPrecision: Q = max(floor(log2|X|), 1-B) - P + 1,
  S~ = |X| 2**-Q, nu = S~ - floor(S~); the truncation floor(S~) 2**Q is computed
  by MPFR (precision P, round toward zero, the format's lowest exponent) and
  checked against the exact rational; RoundAway is the report's table, with
  CodeIsEven = IsEven(floor(S~)) for P > 1 and (floor(S~) = 0 or IsEven(Q + B))
  for P = 1.  Saturate is the report's rule list, tried in order.

Modes: ``nearest_even``, ``nearest_away``, ``toward_zero``, ``up`` (TowardPositive),
``down`` (TowardNegative), ``odd`` (ToOdd), ``stochastic_a/b/c`` (need N and R).
Saturation: ``SatFinite``, ``SatPropagate``, ``SatNone``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
from gmpy2 import mpfr, mpq

__all__ = ["P3109", "SATS"]

SATS = ("SatFinite", "SatPropagate", "SatNone")
_NAN = math.nan


def _floor_log2(a: mpq) -> int:
    """floor(log2 a) for a rational a > 0, exactly."""
    n, d = int(a.numerator), int(a.denominator)
    e = n.bit_length() - d.bit_length()
    # 2**e <= n/d < 2**(e+1) after at most one correction
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    return e


class P3109:
    """One format BinaryKpP{s|u}{e|f}."""

    def __init__(self, k: int, p: int, signed: bool, extended: bool):
        self.k, self.p, self.signed, self.extended = k, p, signed, extended
        self.bias = 2 ** (k - p - 1) if signed else 2 ** (k - p)  # section 3.1
        self.nan_code = 2 ** (k - 1) if signed else 2 ** k - 1
        self.inf_code = (2 ** (k - 1) - 1 if signed else 2 ** k - 2) if extended else None
        top = (2 ** (k - 1) - 1) if signed else (2 ** k - 1)  # largest magnitude code
        top -= int(not signed)  # unsigned: 2**K-1 is NaN
        top -= int(extended)  # the Inf code
        self.max_code = top
        self.m_hi = self.decode(top)
        self.m_lo = -self.m_hi if signed else 0.0  # section 4.14 MinFiniteOf
        self.ctx = gmpy2.context(precision=p, round=gmpy2.RoundToZero,
                                 emin=(1 - self.bias) - (p - 1) + 1, emax=4096, subnormalize=True)

    # ----- section 4.7.2
    def decode_exact(self, x: int):
        """The datum of code x: a Fraction, or the floats +-inf / nan."""
        k, p, b = self.k, self.p, self.bias
        if x == self.nan_code:
            return _NAN
        if self.extended and self.signed and x == 2 ** (k - 1) - 1:
            return math.inf
        if self.extended and self.signed and x == 2 ** k - 1:
            return -math.inf
        if self.extended and not self.signed and x == 2 ** k - 2:
            return math.inf
        if self.signed and 2 ** (k - 1) < x < 2 ** k:
            return -self.decode_exact(x - 2 ** (k - 1))
        t, e = x % 2 ** (p - 1), x // 2 ** (p - 1)
        frac = Fraction(t, 2 ** (p - 1))
        if e == 0:
            return frac * Fraction(2) ** (1 - b)
        return (1 + frac) * Fraction(2) ** (e - b)

    def decode(self, x: int) -> float:
        v = self.decode_exact(x)
        return float(v)

    # ----- section 4.7.4
    def round_to_precision(self, x, mode: str, n: int | None = None, r: int | None = None):
        """RoundToPrecision of x (a float or Fraction): an exact mpq (a finite value,
        possibly far past MaxFinite), or a float for 0, +-inf, nan (input -0 gives -0.0)."""
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x) or x == 0):
            return x
        q = mpq(x) if isinstance(x, float) else mpq(Fraction(x))
        if q == 0:
            return 0.0
        neg = q < 0
        a = -q if neg else q
        Q = max(_floor_log2(a), 1 - self.bias) - self.p + 1
        s_tilde = a / mpq(2) ** Q if Q >= 0 else a * mpq(2) ** (-Q)
        fl = int(gmpy2.f_div(s_tilde.numerator, s_tilde.denominator))
        # MPFR's truncation to P bits with the format's lowest exponent is fl * 2**Q
        z = mpfr(a, self.p, self.ctx)
        assert mpq(z) == fl * mpq(2) ** Q, (x, z, fl, Q)
        nu = s_tilde - fl
        if self.p > 1:
            code_even = fl % 2 == 0
        else:
            code_even = fl == 0 or (Q + self.bias) % 2 == 0
        away = self._round_away(mode, nu, neg, code_even, n, r)
        s = fl + int(away)
        v = s * mpq(2) ** Q
        if v == 0:
            return -0.0 if neg else 0.0
        return -v if neg else v

    @staticmethod
    def _round_away(mode, nu, neg, code_even, n, r) -> bool:
        half = mpq(1, 2)
        if mode == "toward_zero":
            return False
        if mode == "up":
            return nu > 0 and not neg
        if mode == "down":
            return nu > 0 and neg
        if mode == "nearest_away":
            return nu >= half
        if mode == "nearest_even":
            return nu > half or (nu == half and not code_even)
        if mode == "odd":
            return nu > 0 and code_even
        def floor(v):  # exact (gmpy2.floor would go through a 53-bit mpfr)
            v = mpq(v)
            return int(gmpy2.f_div(v.numerator, v.denominator))

        if mode == "stochastic_a":
            return floor(nu * 2 ** n) + r >= 2 ** n
        if mode == "stochastic_b":
            return floor(nu * 2 ** (n + 1)) + 2 * r + 1 >= 2 ** (n + 1)
        if mode == "stochastic_c":
            z = nu * 2 ** n
            fz = floor(z)
            rn = fz if (z < fz + half or (z == fz + half and fz % 2 == 0)) else fz + 1
            return rn + r >= 2 ** n
        raise ValueError(mode)

    def stochastic_parts(self, x, n: int):
        """For a finite x: (toward, away, A, B, C) where toward / away are the two values
        RoundToPrecision can give (floor(S~) 2**Q and (floor(S~) + 1) 2**Q with x's sign,
        Fractions) and A = floor(nu 2**N), B = floor(nu 2**(N+1)), C = RNITE(nu 2**N) are
        the integers the report's StochasticA/B/C compare with 2**N - R, 2**(N+1) - 2R - 1
        and 2**N - R (section 4.7.4), so one call serves every R."""
        q = mpq(Fraction(x))
        neg = q < 0
        a = -q if neg else q
        Q = max(_floor_log2(a), 1 - self.bias) - self.p + 1
        s_tilde = a / mpq(2) ** Q if Q >= 0 else a * mpq(2) ** (-Q)
        fl = int(gmpy2.f_div(s_tilde.numerator, s_tilde.denominator))
        nu = s_tilde - fl
        sign = -1 if neg else 1
        parts = []
        for m in (n, n + 1):
            v = nu * 2 ** m
            parts.append(int(gmpy2.f_div(v.numerator, v.denominator)))
        z = nu * 2 ** n
        fz = parts[0]
        half = mpq(1, 2)
        rc = fz if (z < fz + half or (z == fz + half and fz % 2 == 0)) else fz + 1
        two_q = Fraction(2) ** Q
        return sign * fl * two_q, sign * (fl + 1) * two_q, parts[0], parts[1], rc

    # ----- section 4.7.5 (the rules in the report's order; the first that applies wins)
    def saturate(self, sat: str, rnd: str, x: float) -> float:
        lo, hi = self.m_lo, self.m_hi
        sig, ext = self.signed, self.extended
        if isinstance(x, float) and math.isnan(x):
            return _NAN
        if lo <= x <= hi:
            return float(x)
        inf, ninf = x == math.inf, x == -math.inf
        if sat == "SatFinite":
            return hi if (inf or x > hi) else lo
        if sat == "SatPropagate":
            if inf:
                return math.inf if ext else hi
            if ninf:
                return -math.inf if (sig and ext) else lo
            return lo if x < lo else hi
        assert sat == "SatNone", sat
        if inf:
            return math.inf if ext else hi
        if ninf:
            if sig and ext:
                return -math.inf
            return _NAN if not sig else lo
        if rnd == "odd" and not sig and ext and x > hi:
            return hi
        if rnd in ("toward_zero", "down") and x > hi:
            return hi
        if rnd in ("toward_zero", "up") and x < lo:
            return lo
        if x < lo:
            if sig and ext:
                return -math.inf
            return _NAN if not sig else lo
        return math.inf if ext else hi

    # ----- section 4.7.3
    def project(self, x, mode: str, sat: str, n: int | None = None, r: int | None = None) -> float:
        """The datum of Project(x); -0 never appears (section 3.1: one zero)."""
        if isinstance(x, float) and math.isnan(x):
            return _NAN
        z = self.saturate(sat, mode, self.round_to_precision(x, mode, n, r))
        return z + 0.0 if z == 0 else z
