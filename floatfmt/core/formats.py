"""Number formats as data: the ``Format`` record, the registry and name parsing.

Every behaviour of floatfmt is derived from the handful of fields below; adding
a format means adding one line to ``_REGISTRY``.

A float format with ``ebits`` exponent bits, ``mbits`` mantissa bits and bias
``b`` stores a code ``s | e | m``.  When ``e > 0`` (or always, for formats
without subnormals) the value is ``(-1)**s * (1 + m / 2**mbits) * 2**(e - b)``;
when ``e == 0`` it is ``(-1)**s * (m / 2**mbits) * 2**(1 - b)``.  Which codes
are Inf and NaN is given by ``inf`` and ``nan``:

``nan="ieee"``
    exponent all ones: mantissa zero is Inf (when ``inf``), anything else NaN.
``nan="all_ones"``
    only the code whose exponent and mantissa are all ones is NaN (OCP E4M3FN,
    and E8M0 whose only NaN is 0xFF); the rest of the top binade is finite.
``nan="negative_zero"``
    the code of -0 (sign bit alone) is the only NaN (the "fnuz" formats).
``nan="none"``
    no NaN code at all (OCP FP6 / FP4, integers).

Inf: with ``nan="ieee"`` the Inf codes are the exponent-all-ones, mantissa-zero
codes.  With ``inf=True`` and ``nan="negative_zero"`` or ``"all_ones"`` (the
IEEE P3109 formats) +Inf is the largest magnitude code that is not NaN and -Inf
is that code with the sign bit: 0x7F / 0xFF in a signed 8-bit format whose NaN
is 0x80, 0xFE in an unsigned one whose NaN is 0xFF (P3109 v4.0 section 4.7.2).

``rules="p3109"`` marks the IEEE P3109 family (``binary{K}p{P}{s|u}{e|f}``, see
``p3109``), whose conventions differ from IEEE 754 in four places:

* "even" means an even *code* (P3109 section 4.7.4): for P = 1 (no mantissa
  bits) the code of 2**e is its biased exponent, so ties and round-to-odd look
  at e + bias, not at the significand (always 1);
* unsigned formats have MinFinite = 0: a negative value is out of range below
  and the overflow policy decides (``saturate`` gives 0, ``satnone`` NaN), where
  IEEE-rules unsigned formats (E8M0) give NaN for every negative input;
* the default overflow policy is ``satnone`` (P3109 SatNone, section 4.7.5);
* ``next_up(+Inf)`` and ``next_down(-Inf)`` are NaN (section 4.16).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Union

from ..backend.fpu import pow2 as _pow2
from .names import unknown_name

if TYPE_CHECKING:  # numpy is imported lazily here; the name is for annotations
    import numpy as np

__all__ = ["Format", "get_format", "formats", "register", "p3109", "p3109_formats"]  # (and FormatLike, a type name for annotations)

_NAN_KINDS = ("ieee", "all_ones", "negative_zero", "none")
_RULES = ("ieee", "p3109")


@dataclass(frozen=True, init=False)
class Format:
    """A binary number format.

    Floats: ``Format("e5m10", ebits=5, mbits=10, bias=15)`` is IEEE binary16.
    Integers: ``Format("int8", kind="int", bits=8)``.

    Fields
    ------
    name : canonical name.
    ebits, mbits : exponent and mantissa (fraction) field widths.
    bias : exponent bias (default ``2**(ebits-1) - 1``).
    kind : ``"float"`` or ``"int"``.
    inf : whether the format has +-Inf codes.
    nan : which codes are NaN (see the module docstring).
    signed : whether there is a sign bit (or, for integers, two's complement).
    negative_zero : whether -0 exists (False for fnuz and unsigned formats).
    zero : whether 0 exists (False for E8M0, whose code 0 is 2**-127).
    bits : total width; derived for floats, required for integers.
    rules : ``"ieee"`` (IEEE 754 conventions, also used for OCP and fnuz formats)
        or ``"p3109"`` (see the module docstring).
    """

    # After construction every field holds its final value (``bias``, ``negative_zero``
    # and ``bits`` are derived when given as None), so readers see plain ints and bools.
    name: str
    ebits: int
    mbits: int
    bias: int
    kind: str
    inf: bool
    nan: str
    signed: bool
    negative_zero: bool
    zero: bool
    bits: int
    description: str = field(default="", compare=False)
    rules: str = "ieee"

    def __init__(self, name: str, ebits: int = 0, mbits: int = 0, bias: int | None = None, kind: str = "float",
                 inf: bool = True, nan: str = "ieee", signed: bool = True, negative_zero: bool | None = None,
                 zero: bool = True, bits: int | None = None, description: str = "",
                 rules: str = "ieee") -> None:
        put = object.__setattr__  # frozen: set once here, as the generated __init__ would
        put(self, "name", name)
        put(self, "ebits", ebits)
        put(self, "mbits", mbits)
        put(self, "bias", bias)
        put(self, "kind", kind)
        put(self, "inf", inf)
        put(self, "nan", nan)
        put(self, "signed", signed)
        put(self, "negative_zero", negative_zero)
        put(self, "zero", zero)
        put(self, "bits", bits)
        put(self, "description", description)
        put(self, "rules", rules)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.kind not in ("float", "int"):
            raise ValueError(f"Format.kind must be 'float' or 'int', not {self.kind!r}")
        if self.nan not in _NAN_KINDS:
            raise ValueError(f"Format.nan must be one of {_NAN_KINDS}, not {self.nan!r}")
        if self.rules not in _RULES:
            raise ValueError(f"Format.rules must be one of {_RULES}, not {self.rules!r}")
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if self.kind == "int":
            if not self.bits or not 1 <= self.bits <= 63:
                raise ValueError("an integer Format needs bits between 1 and 63")
            put("inf", False)
            put("nan", "none")
            put("negative_zero", False)
            put("ebits", 0)
            put("mbits", 0)
            put("bias", 0)
            return
        if not 1 <= self.ebits <= 11:
            raise ValueError(f"ebits must be in 1..11, not {self.ebits}")
        if not 0 <= self.mbits <= 52:
            raise ValueError(f"mbits must be in 0..52, not {self.mbits}")
        if self.bias is None:
            put("bias", (1 << (self.ebits - 1)) - 1)
        if self.negative_zero is None:
            put("negative_zero", self.signed and self.nan != "negative_zero" and self.zero)
        width = int(self.signed) + self.ebits + self.mbits
        if self.bits is None:
            put("bits", width)
        elif self.bits != width:
            raise ValueError(f"bits={self.bits} but sign+exponent+mantissa is {width}")
        if self.inf and self.nan == "none":
            raise ValueError("a format with Inf codes needs a NaN code (nan='ieee', "
                             "'negative_zero' or 'all_ones')")
        if self.nan == "negative_zero" and not self.signed:
            raise ValueError("nan='negative_zero' needs a sign bit")
        if self.emax < self.emin:
            raise ValueError("this exponent width leaves no finite binade")
        if self.emax > 1023 or self.emin < -1022:
            # floatfmt holds every value of a format as a float64 number, and rounds in
            # float64's normal binades (a step below float64's is then a float64 step)
            raise ValueError(
                f"{self.name}: binades 2**{self.emin} to 2**{self.emax}; a Format's normal "
                "binades must be float64's (2**-1022 to 2**1023), so that its values are "
                "float64 numbers: change ebits or bias")

    # ----- derived facts (exact) -------------------------------------------------
    @property
    def _bias(self) -> int:
        """``bias`` as an int (always set once the Format is built)."""
        assert self.bias is not None
        return self.bias

    @property
    def _bits(self) -> int:
        """``bits`` as an int (always set once the Format is built)."""
        assert self.bits is not None
        return self.bits

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def has_nan(self) -> bool:
        """Whether some code is NaN (an IEEE-like format with no mantissa bits has none:
        its all-ones exponent holds only +-Inf)."""
        return self.nan != "none" and not (self.nan == "ieee" and self.mbits == 0)

    @property
    def subnormals(self) -> bool:
        """Whether exponent field 0 holds subnormals (False when there is no zero)."""
        return self.is_float and self.zero

    @property
    def precision_bits(self) -> int:
        """Significand precision p, implicit bit included (mbits + 1)."""
        return self.mbits + 1

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal binade."""
        return (1 if self.subnormals else 0) - self._bias

    @property
    def emax(self) -> int:
        """Exponent of the largest binade holding a finite value."""
        return (self.max_code >> self.mbits) - self._bias

    @property
    def _top_specials(self) -> int:
        """How many magnitude codes at the top are NaN or Inf (ieee: the whole top binade)."""
        if self.nan == "ieee":
            return 1 << self.mbits
        return int(self.nan == "all_ones") + int(self.inf)

    @cached_property
    def max_code(self) -> int:
        """Code (sign bit clear) of the largest finite value."""
        if self.kind == "int":
            return (1 << (self._bits - 1)) - 1 if self.signed else (1 << self._bits) - 1
        return (1 << (self.ebits + self.mbits)) - 1 - self._top_specials

    @property
    def inf_code(self) -> int | None:
        """Code (sign bit clear) of +Inf, or None: the exponent-all-ones code for
        nan='ieee', else the code just above max_code (P3109 section 4.7.2)."""
        if not self.inf:
            return None
        if self.nan == "ieee":
            return ((1 << self.ebits) - 1) << self.mbits
        return self.max_code + 1

    @cached_property
    def max_exact(self) -> Fraction:
        if self.kind == "int":
            return Fraction(self.max_code)
        m = self.max_code & ((1 << self.mbits) - 1)
        return Fraction((1 << self.mbits) + m, 1 << self.mbits) * Fraction(2) ** self.emax

    @property
    def max(self) -> float:
        """Largest finite value."""
        return float(self.max_exact)

    @property
    def min(self) -> float:
        """Most negative finite value: ``-max`` for signed floats, -2**(n-1) or 0 for
        integers, and for unsigned floats 0, or the smallest value when there is no
        zero (E8M0: 2**-127)."""
        if self.kind == "int":
            return float(-(1 << (self._bits - 1))) if self.signed else 0.0
        if self.signed:
            return -self.max
        return 0.0 if self.zero else self.smallest_normal

    @property
    def smallest_normal(self) -> float:
        return _pow2(self.emin) if self.is_float else 1.0

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value (equals smallest_normal when there are no subnormals)."""
        if not self.is_float:
            return 1.0
        return _pow2(self.emin - self.mbits) if self.subnormals else _pow2(self.emin)

    @property
    def default_overflow(self) -> str:
        """The non-saturating behaviour of the format itself (P3109: SatNone)."""
        if self.rules == "p3109":
            return "satnone"
        if self.inf:
            return "inf"
        if self.is_float and self.has_nan:
            return "nan"
        return "saturate"

    def __repr__(self) -> str:
        if self.kind == "int":
            return f"Format({self.name!r}, int{'' if self.signed else ' unsigned'}, bits={self.bits})"
        extras = []
        if not self.inf:
            extras.append("no inf")
        extras.append(f"nan={self.nan}")
        if not self.signed:
            extras.append("unsigned")
        if self.rules != "ieee":
            extras.append(f"rules={self.rules}")
        return (f"Format({self.name!r}, e{self.ebits}m{self.mbits}, bias={self.bias}, "
                f"{', '.join(extras)})")

    def __str__(self) -> str:
        return self.name


def _f(name, ebits, mbits, bias=None, desc="", **kw):
    return Format(name, ebits, mbits, bias, description=desc, **kw)


# The registry: every format on one screen.  Aliases map to canonical names.
_REGISTRY: dict[str, Format] = {f.name: f for f in [
    _f("fp64", 11, 52, 1023, "IEEE binary64"),
    _f("fp32", 8, 23, 127, "IEEE binary32"),
    _f("tf32", 8, 10, 127, "NVIDIA TensorFloat-32 (19 bits used of an fp32 word)"),
    _f("fp16", 5, 10, 15, "IEEE binary16"),
    _f("bf16", 8, 7, 127, "bfloat16 (Google Brain)"),
    _f("fp8_e4m3", 4, 3, 7, "OCP E4M3FN: no Inf, NaN only S.1111.111, max 448",
       inf=False, nan="all_ones"),
    _f("fp8_e5m2", 5, 2, 15, "OCP E5M2, IEEE-like"),
    _f("fp8_e4m3fnuz", 4, 3, 8, "E4M3 FNUZ (AMD MI300, Graphcore): no Inf, no -0, NaN is 0x80",
       inf=False, nan="negative_zero"),
    _f("fp8_e5m2fnuz", 5, 2, 16, "E5M2 FNUZ: no Inf, no -0, NaN is 0x80",
       inf=False, nan="negative_zero"),
    _f("fp8_e4m3b11fnuz", 4, 3, 11, "E4M3 FNUZ with bias 11 (ml_dtypes float8_e4m3b11fnuz): "
       "no Inf, no -0, NaN is 0x80, max 30", inf=False, nan="negative_zero"),
    _f("fp8_e4m3_ieee", 4, 3, 7, "IEEE-like E4M3 with Inf (ml_dtypes float8_e4m3), max 240"),
    _f("fp8_e3m4", 3, 4, 3, "IEEE-like E3M4"),
    _f("fp8_e5m3fnu", 5, 3, 15, "unsigned E5M3 (ml_dtypes float8_e5m3fnu): no sign, no Inf, NaN 0xFF, "
       "max 114688", inf=False, nan="all_ones", signed=False),
    _f("fp6_e2m3", 2, 3, 1, "OCP MX FP6 E2M3: no Inf, no NaN", inf=False, nan="none"),
    _f("fp6_e3m2", 3, 2, 3, "OCP MX FP6 E3M2: no Inf, no NaN", inf=False, nan="none"),
    _f("fp4_e2m1", 2, 1, 1, "OCP MX FP4 E2M1 (NVFP4 element): no Inf, no NaN",
       inf=False, nan="none"),
    _f("e8m0", 8, 0, 127, "OCP MX scale: unsigned powers of two 2**-127..2**127, NaN 0xFF, no zero",
       inf=False, nan="all_ones", signed=False, zero=False),
    Format("int8", kind="int", bits=8, description="two's complement -128..127"),
    Format("uint8", kind="int", bits=8, signed=False, description="0..255"),
    Format("int4", kind="int", bits=4, description="two's complement -8..7"),
    Format("uint4", kind="int", bits=4, signed=False, description="0..15"),
]}

_ALIASES: dict[str, str] = {
    "binary64": "fp64", "float64": "fp64", "double": "fp64", "f64": "fp64",
    "binary32": "fp32", "float32": "fp32", "single": "fp32", "float": "fp32", "f32": "fp32",
    "tensorfloat32": "tf32", "tensorfloat-32": "tf32",
    "binary16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "e4m3": "fp8_e4m3", "e4m3fn": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "ocp_e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "e5m2": "fp8_e5m2", "float8_e5m2": "fp8_e5m2", "ocp_e5m2": "fp8_e5m2",
    "e4m3fnuz": "fp8_e4m3fnuz", "float8_e4m3fnuz": "fp8_e4m3fnuz",
    "e5m2fnuz": "fp8_e5m2fnuz", "float8_e5m2fnuz": "fp8_e5m2fnuz",
    "float8_e4m3": "fp8_e4m3_ieee",
    "e3m4": "fp8_e3m4", "float8_e3m4": "fp8_e3m4",
    "float8_e4m3b11fnuz": "fp8_e4m3b11fnuz", "e4m3b11fnuz": "fp8_e4m3b11fnuz",
    "float8_e5m3fnu": "fp8_e5m3fnu", "e5m3fnu": "fp8_e5m3fnu",
    # ml_dtypes' "fn" (finite) FP6 / FP4 types have no NaN at all: their short names
    # must not fall through to the "eXmYfn" pattern (whose all-ones code is NaN).
    "e2m3": "fp6_e2m3", "float6_e2m3fn": "fp6_e2m3", "fp6": "fp6_e2m3",
    "e2m3fn": "fp6_e2m3", "fp6_e2m3fn": "fp6_e2m3",
    "e3m2": "fp6_e3m2", "float6_e3m2fn": "fp6_e3m2", "e3m2fn": "fp6_e3m2", "fp6_e3m2fn": "fp6_e3m2",
    "e2m1": "fp4_e2m1", "float4_e2m1fn": "fp4_e2m1", "fp4": "fp4_e2m1", "nvfp4_element": "fp4_e2m1",
    "e2m1fn": "fp4_e2m1", "fp4_e2m1fn": "fp4_e2m1",
    "float8_e8m0fnu": "e8m0", "e8m0fnu": "e8m0", "ue8m0": "e8m0", "fp8_e8m0fnu": "e8m0",
    "int8_t": "int8", "uint8_t": "uint8",
}

# "e5m2", "fp8_e4m3fn", "e4m3fnuzb11" and the ml_dtypes spelling "float8_e4m3b11fnuz"
# (a bias may come before or after the variant, not both).
_PATTERN = re.compile(r"^(?:(?:fp|float)(\d+)_)?e(\d+)m(\d+)(?:b(\d+))?(fnuz|fn)?(?:b(\d+))?$")
# "int2", "uint16": two's complement / unsigned integers of the widths numpy and ml_dtypes
# name (other widths, such as "int9", stay unknown names: usually a typo).
_INT_PATTERN = re.compile(r"^(u?)int(1|2|4|8|16|32|64)$")


# What names a format: a registered name or alias ("bf16", "e4m3", "e5m10"), a Format,
# or a numpy / ml_dtypes dtype or scalar type of a registered format.
FormatLike = Union[str, Format, "np.dtype", type]


def formats() -> list[str]:
    """Canonical names of every registered format, in registry order."""
    return list(_REGISTRY)


def register(fmt: Format, *aliases: str) -> Format:
    """Add a format (and optional aliases) to the registry so names resolve to it."""
    if not isinstance(fmt, Format):
        raise TypeError(f"register() needs a Format, not {type(fmt).__name__}")
    _REGISTRY[fmt.name] = fmt
    for a in aliases:
        _ALIASES[a.lower()] = fmt.name
    return fmt


# IEEE P3109 names (section 3.2): "binary8p3se", and gfloat's spelling "p3109_k8p3se".
_P3109_PATTERN = re.compile(r"^(?:binary|p3109_k)(\d+)p(\d+)([a-z]*)$")
_SIGNEDNESS = {"s": True, "u": False}
_DOMAIN = {"e": True, "f": False}


def p3109(k: int, p: int, signed: bool = True, extended: bool = True) -> Format:
    """The IEEE P3109 format ``Binary{k}p{p}{s|u}{e|f}`` (P3109 v4.0, sections 3.1-3.2, 4.7).

    Bitwidth ``k`` > 2, precision ``p`` (1 <= p < k signed, 1 <= p <= k unsigned),
    exponent bias 2**(k-p-1) (signed) or 2**(k-p) (unsigned), subnormals, one NaN,
    no -0; ``extended`` adds +-Inf.  Codes (section 4.7.2): signed NaN 2**(k-1),
    +Inf 2**(k-1)-1, -Inf 2**k-1, negatives 2**(k-1) + the code of ``|x|``; unsigned
    NaN 2**k-1, +Inf 2**k-2.  floatfmt holds values in float64, so the exponent
    field (k-p signed, k-p+1 unsigned) can have at most 10 bits and p at most 53
    (``p3109_precisions``: an 11-bit field has P3109's bias 1024, one more than
    float64's, so its smallest normal 2**-1023 is below float64's normal range).

    >>> f = p3109(8, 3); f.name, f.bias, f.max, hex(f.inf_code)
    ('binary8p3se', 16, 49152.0, '0x7f')
    >>> p3109(8, 4, signed=False, extended=False).max
    57344.0
    """
    for opt, v in (("K (bitwidth)", k), ("P (precision)", p)):
        if not isinstance(v, (int,)) or isinstance(v, bool):
            raise TypeError(f"P3109 {opt} must be an int, not {type(v).__name__}")
    if k < 3 or k > 64:
        raise ValueError(f"P3109 K (bitwidth) {k} is out of range: valid K are 3..64 "
                         "(P3109 requires K > 2; floatfmt codes have at most 64 bits)")
    width = k - p if signed else k - p + 1  # exponent field
    p_lo, p_hi = p3109_precisions(k, signed)
    if not p_lo <= p <= p_hi:
        rule = "0 < P < K for signed formats" if signed else "0 < P <= K for unsigned formats"
        extra = "" if p_lo == 1 and p_hi == (k - 1 if signed else k) else (
            f"; floatfmt holds values in float64, so the exponent field has at most "
            f"{_P3109_MAX_EBITS} bits and P is at most 53")
        raise ValueError(f"P3109 P (precision) {p} is out of range for K={k} "
                         f"{'signed' if signed else 'unsigned'}: valid P are "
                         f"{f'{p_lo}..{p_hi}' if p_lo <= p_hi else 'none'} "
                         f"(P3109 section 3.1: {rule}{extra})")
    bias = 1 << (k - p - 1) if signed else 1 << (k - p)
    name = f"binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'}"
    desc = (f"IEEE P3109 Binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'}: "
            f"{'signed' if signed else 'unsigned'}, {'extended (+-Inf)' if extended else 'finite'}, "
            f"bias {bias}, one NaN, no -0")
    return Format(name, width, p - 1, bias, inf=extended,
                  nan="negative_zero" if signed else "all_ones", signed=signed,
                  rules="p3109", description=desc)


#: The widest P3109 exponent field floatfmt holds: with w bits P3109's bias is 2**(w-1)
#: (section 3.2), so the smallest normal is 2**(2 - 2**(w-1)): 2**-510 for w = 10, but
#: 2**-1023 for w = 11, below float64's normals (2**-1022), which a Format must keep to.
_P3109_MAX_EBITS = 10


def p3109_precisions(k: int, signed: bool = True) -> tuple[int, int]:
    """(lowest, highest) precision P of a P3109 format of bitwidth ``k`` that floatfmt
    holds: P3109 allows 1 <= P < K (signed) or 1 <= P <= K (unsigned); floatfmt also needs
    an exponent field of at most 10 bits and P <= 53.  ``p3109`` and ``p3109_formats``
    both follow it.

    >>> p3109_precisions(8), p3109_precisions(64), p3109_precisions(64, signed=False)
    ((1, 7), (54, 53), (55, 53))
    """
    p_lo = max(1, k - _P3109_MAX_EBITS if signed else k - _P3109_MAX_EBITS + 1)
    p_hi = min(k - 1 if signed else k, 53)
    return p_lo, p_hi


def p3109_formats(k: int = 8) -> list[str]:
    """Names of every P3109 format of bitwidth ``k`` that floatfmt can hold, signed
    before unsigned, extended before finite, by precision.

    >>> len(p3109_formats(8)), p3109_formats(8)[:2]
    (30, ['binary8p1se', 'binary8p1sf'])
    """
    out = []
    for signed in (True, False):
        p_lo, p_hi = p3109_precisions(k, signed)
        for p in range(p_lo, p_hi + 1):
            out += [f"binary{k}p{p}{'s' if signed else 'u'}{d}" for d in "ef"]
    return out


def _parse_p3109(key: str) -> Format | None:
    m = _P3109_PATTERN.match(key)
    if not m:
        return None
    k, p, tail = int(m[1]), int(m[2]), m[3]
    sign, dom = tail[:1], tail[1:]
    if sign not in _SIGNEDNESS:
        raise ValueError(f"format {key!r}: P3109 signedness letter {sign!r} is not valid: "
                         "valid are 's' (signed) and 'u' (unsigned), as in 'binary8p3se'")
    if dom not in _DOMAIN:
        raise ValueError(f"format {key!r}: P3109 domain letter {dom!r} is not valid: "
                         "valid are 'e' (extended, with Inf) and 'f' (finite), as in 'binary8p3se'")
    try:
        return p3109(k, p, _SIGNEDNESS[sign], _DOMAIN[dom])
    except ValueError as e:
        raise ValueError(f"format {key!r}: {e}") from None


def _parse_pattern(key: str) -> Format | None:
    fp = _parse_p3109(key)
    if fp is not None:
        return fp
    mi = _INT_PATTERN.match(key)
    if mi:
        bits = int(mi[2])
        if bits > 63:
            raise _unknown_format(key, "integer formats have 1 to 63 bits.")
        return Format(key, kind="int", bits=bits, signed=not mi[1])
    m = _PATTERN.match(key)
    if not m or (m[4] is not None and m[6] is not None):
        return None
    width, e, mb, variant = m[1], int(m[2]), int(m[3]), m[5]
    bias = m[4] if m[4] is not None else m[6]
    bias = int(bias) if bias is not None else None
    if not 2 <= e <= 11 or not 0 <= mb <= 52:
        raise ValueError(f"format {key!r}: exponent width must be 2..11 and mantissa 0..52")
    if width is not None and int(width) != 1 + e + mb:
        raise _unknown_format(key, f"e{e}m{mb} has {1 + e + mb} bits, not {width}.")
    if variant == "fnuz":
        fmt = Format(key, e, mb, bias if bias is not None else 1 << (e - 1), inf=False,
                     nan="negative_zero")
    elif variant == "fn":
        if mb == 0:
            raise ValueError(f"format {key!r}: an fn variant needs at least one mantissa bit")
        fmt = Format(key, e, mb, bias, inf=False, nan="all_ones")
    else:
        fmt = Format(key, e, mb, bias)
    # A pattern equal to a registered format returns the registered one.
    for known in _REGISTRY.values():
        if known == Format(known.name, fmt.ebits, fmt.mbits, fmt.bias, inf=fmt.inf, nan=fmt.nan):
            return known
    return fmt


def _dtype_name(obj) -> str | None:
    """Name of a numpy / ml_dtypes / torch dtype (or scalar type), else None."""
    mod = type(obj).__module__ or ""
    if mod.startswith("torch"):
        s = str(obj)
        return s[len("torch."):] if s.startswith("torch.") else None
    try:
        import numpy as np
        if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)):
            return np.dtype(obj).name
    except TypeError:
        return None
    return None


def get_format(fmt: FormatLike) -> Format:
    """Resolve a format given as a ``Format``, a name, an alias or a dtype.

    Names are case-insensitive; ``"e5m10"``-style strings build IEEE-like formats
    (``"e4m3fn"``/``"e4m3fnuz"`` the fn / fnuz variants, ``"e5m2b11"`` a bias),
    ``"int2"``/``"uint16"`` integer formats (the widths 1, 2, 4, 8, 16, 32 that
    ml_dtypes and numpy name; ``Format(kind="int", bits=n)`` for others).

    A name that is an ml_dtypes type name, with or without its ``floatN_``
    prefix, means ml_dtypes' value set: ``"e2m1fn"`` and ``"float4_e2m1fn"`` are
    both the OCP FP4 (max 6, no NaN), ``"e4m3b11fnuz"`` is ml_dtypes'
    ``float8_e4m3b11fnuz``.  One deliberate exception: ``"e4m3"`` is OCP E4M3FN
    (max 448, as in the OCP and NVIDIA documents); ml_dtypes' IEEE-like
    ``float8_e4m3`` (max 240) is ``"float8_e4m3"`` or ``"fp8_e4m3_ieee"``.

    >>> get_format("half").name
    'fp16'
    >>> get_format("e4m3").max
    448.0
    >>> get_format("e2m1fn").max, get_format("float8_e4m3").max, get_format("e4m3b11fnuz").max
    (6.0, 240.0, 30.0)
    """
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):  # a registered name as written (every emulated cast asks)
        hit = _REGISTRY.get(fmt)
        if hit is not None:
            return hit
    name = fmt if isinstance(fmt, str) else _dtype_name(fmt)
    if name is None:
        raise TypeError(f"a format must be a name, a Format or a dtype, not {type(fmt).__name__}")
    key = name.strip().lower().replace("-", "_") if name.strip().lower() not in _ALIASES else name.strip().lower()
    if key in _REGISTRY:
        return _REGISTRY[key]
    if key in _ALIASES:
        return _REGISTRY[_ALIASES[key]]
    parsed = _parse_pattern(key)
    if parsed is not None:
        return parsed
    raise _unknown_format(name)


def _unknown_format(name: str, reason: str = "") -> ValueError:
    return unknown_name("format", name, _REGISTRY, also=_ALIASES, cutoff=0.5, listed_as="Valid formats",
                        note=" (or 'eXmY', 'eXmYfn', 'eXmYfnuz', and the IEEE P3109 "
                             "'binaryKpP' + 's'/'u' + 'e'/'f', e.g. 'binary8p3se')", reason=reason)


def hex_code(code: int, fmt: FormatLike) -> str:
    """A code as ``0x`` hex, zero-padded to the format's width in nibbles.

    >>> hex_code(0x1D, "fp8_e4m3"), hex_code(1, "fp16"), hex_code(3, "fp4_e2m1")
    ('0x1d', '0x0001', '0x3')
    """
    return f"0x{int(code):0{(get_format(fmt)._bits + 3) // 4}x}"
