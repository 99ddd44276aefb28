"""Whether the installed ml_dtypes and torch round float64 once or twice: probed, not assumed.

Converting a float64 to bfloat16 (or an fp8 format) *through float32* rounds twice: the
first rounding can land exactly on a midpoint of the narrow format, and the second then
breaks that tie, sometimes toward the wrong neighbour.  What the peers did when this was
written (each run of the functions below checks again):

* ml_dtypes before 0.7 went through float32 (``np.float64(x).astype(ml_dtypes.bfloat16)``
  was wrong on a few inputs per million); ml_dtypes 0.7 rounds float64 once.
* torch 2.13 still goes through float32:
  ``torch.tensor([x], dtype=torch.float64).to(torch.bfloat16)``.

``probe(library, fmt)`` converts one input for which the two answers differ
(``CASES``) with the installed library and says which it gave; ``report()`` gives the
lines the tour and lesson 02 print; ``python -m floatfmt.teach.peer_rounding`` prints them for
every installed peer (torch included, which the tour leaves out: importing it takes
seconds).

>>> from floatfmt.core.cast import cast
>>> x = CASES["bf16"]
>>> cast(x, "bf16"), cast(cast(x, "fp32"), "bf16")   # once; twice (through float32)
(-0.042236328125, -0.04248046875)
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass

import numpy as np

from ..core.cast import cast

__all__ = ["CASES", "PeerCast", "probe", "report"]

# Inputs whose float32 rounding lies exactly on a midpoint of the target format, on the
# other side of the input: rounding once and rounding through float32 differ.
CASES = {"bf16": float.fromhex("-0x1.5affff36664e1p-5"), "fp8_e4m3": -431.99999999999994}

_ML_DTYPES = {"bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn"}
_TORCH = {"bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn"}


@dataclass(frozen=True)
class PeerCast:
    """One float64 -> ``fmt`` conversion by a peer library, next to both possible answers.

    ``once`` is the correctly rounded value (floatfmt's), ``twice`` the value through
    float32; ``value`` is what the library gave."""

    library: str
    version: str
    fmt: str
    x: float
    expression: str
    value: float
    once: float
    twice: float

    @property
    def rounds_once(self) -> bool:
        return self.value == self.once

    @property
    def rounds_twice(self) -> bool:
        return self.value == self.twice != self.once

    def verdict(self) -> str:
        if self.rounds_once:
            return "rounded once: correct"
        if self.rounds_twice:
            return "rounded twice, through float32: wrong"
        return "neither the once- nor the twice-rounded value"


def installed(library: str) -> bool:
    """Whether ``library`` can be imported (without importing it)."""
    return library in sys.modules or importlib.util.find_spec(library) is not None


def installed_version(library: str) -> str | None:
    """The installed distribution's version (from its metadata, without importing it)."""
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe(library: str, fmt: str = "bf16", x: float | None = None) -> PeerCast | None:
    """Convert ``x`` (default ``CASES[fmt]``) from float64 to ``fmt`` with the installed
    ``library`` ("ml_dtypes" or "torch"); None when it is not installed.  Imports it."""
    if library not in ("ml_dtypes", "torch"):
        raise ValueError(f"library must be 'ml_dtypes' or 'torch', not {library!r}")
    names = _ML_DTYPES if library == "ml_dtypes" else _TORCH
    if fmt not in names:
        raise ValueError(f"fmt must be one of {sorted(names)}, not {fmt!r}")
    if not installed(library):
        return None
    x = CASES[fmt] if x is None else float(x)
    once, twice = cast(x, fmt), cast(cast(x, "fp32"), fmt)
    if library == "ml_dtypes":
        import ml_dtypes
        value = float(np.float64(x).astype(getattr(ml_dtypes, names[fmt])))
        version = ml_dtypes.__version__
        expr = f"np.float64(x).astype(ml_dtypes.{names[fmt]})"
    else:
        import torch
        value = float(torch.tensor([x], dtype=torch.float64).to(getattr(torch, names[fmt])).item())
        version = torch.__version__
        expr = f"torch.tensor([x], dtype=torch.float64).to(torch.{names[fmt]})"
    return PeerCast(library, version, fmt, x, expr, value, once, twice)


def report(libraries=("ml_dtypes", "torch"), fmt: str = "bf16") -> list[str]:
    """One line per library: its version, the expression, its value and the verdict (or
    that it is not installed)."""
    lines = []
    for lib in libraries:
        p = probe(lib, fmt)
        if p is None:
            lines.append(f"{lib}: not installed")
        else:
            lines.append(f"{lib} {p.version}: {p.expression} = {p.value!r}   ({p.verdict()})")
    return lines


if __name__ == "__main__":  # pragma: no cover - a printout
    for f, v in CASES.items():
        print(f"x = float.fromhex('{v.hex()}') -> {f}: once {cast(v, f)!r}, "
              f"through float32 {cast(cast(v, 'fp32'), f)!r}")
        for line in report(fmt=f):
            print("  " + line)
