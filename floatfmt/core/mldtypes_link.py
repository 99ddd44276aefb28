"""ml_dtypes, reached only when one of its dtypes is involved.

Importing ml_dtypes costs most of a second (its C extension registers a dozen
numpy dtypes), so ``import floatfmt`` does not do it, and neither does casting
Python floats or numpy float16 / float32 / float64 arrays.  The package asks this
module instead:

* ``scalar_types()``: the ml_dtypes scalar types (``ml_dtypes.bfloat16`` ...)
  *if ml_dtypes is already imported*, else an empty set.  No ml_dtypes value can
  exist before ml_dtypes is imported, so an empty answer is exact, not a guess.
* ``module()``: ml_dtypes itself, imported on this first call (for the places
  that build ml_dtypes arrays, such as viewing a torch bfloat16 tensor).
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["SCALAR_NAMES", "scalar_types", "module"]

# The ml_dtypes scalar types whose every value float64 holds exactly (the names of
# every release from 0.5 on; those a release lacks are skipped).
SCALAR_NAMES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                "float8_e4m3b11fnuz", "float8_e4m3", "float8_e3m4", "float8_e8m0fnu", "float8_e5m3fnu",
                "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int4", "uint4", "int2", "uint2",
                "int1", "uint1")

_cache: frozenset = frozenset()


def scalar_types() -> frozenset:
    """The ml_dtypes scalar types of ``SCALAR_NAMES`` when ml_dtypes is imported
    (by anyone), else the empty set; never imports ml_dtypes."""
    global _cache
    if _cache:
        return _cache
    ml = sys.modules.get("ml_dtypes")
    if ml is None or not hasattr(ml, "bfloat16"):  # not imported (or still importing)
        return frozenset()
    _cache = frozenset(getattr(ml, n) for n in SCALAR_NAMES if hasattr(ml, n))
    return _cache


def module() -> ModuleType:
    """ml_dtypes, imported on first use (a runtime dependency of floatfmt)."""
    import ml_dtypes
    return ml_dtypes
