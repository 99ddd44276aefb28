"""Labelled containers (pandas ``Series`` / ``DataFrame``): keep their labels.

floatfmt does not import or depend on pandas.  An object counts as labelled when its
class comes from a ``pandas`` module and has ``index`` and ``to_numpy``; ``cast`` then
rounds its values as an array and returns the same kind of object with the same index
(and name, or columns).
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_labeled", "values_of", "relabel", "not_one_value"]


def is_labeled(x) -> bool:
    """True for a pandas Series or DataFrame (checked by its module, pandas is not imported).

    >>> is_labeled([1.0]), is_labeled(np.zeros(2))
    (False, False)
    """
    mod = type(x).__module__ or ""
    return (mod == "pandas" or mod.startswith("pandas.")) and hasattr(x, "index") and hasattr(x, "to_numpy")


def values_of(x) -> np.ndarray:
    """The values of a Series / DataFrame as a numpy array (object columns are refused by
    the caller's own conversion, with its usual message)."""
    return np.asarray(x.to_numpy())


def relabel(x, values):
    """``values`` (same shape as ``x``) as an object of ``x``'s class with ``x``'s labels."""
    if hasattr(x, "columns"):
        return type(x)(values, index=x.index, columns=x.columns)
    return type(x)(values, index=x.index, name=getattr(x, "name", None))


def not_one_value(x, ex=None) -> TypeError:
    """The TypeError for several values where one is expected (``ex``: the input's
    ``Exact``, None for a Series / DataFrame)."""
    what = (f"a pandas {type(x).__name__} of {len(x)} values" if ex is None
            else f"an array of shape {np.shape(ex.values)}")
    return TypeError(f"expected one value, got {what}: explain one of them (for example x[0], or "
                     "s.iloc[0] for a Series)")
