"""Errors that teach for names: an unknown name gives a ValueError that lists the valid
names and the closest matches.

Every place that looks a name up (formats, rounding modes, overflow policies, orders,
tensor-core models, exercises ...) raises through ``unknown_name`` so the messages read
alike::

    unknown rounding mode 'nearest_evn'. Did you mean 'nearest_even'? Valid: nearest_even, ...
"""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["close_matches", "did_you_mean", "unknown_name"]


def close_matches(given: object, candidates: Iterable[str], n: int = 3, cutoff: float = 0.4) -> list[str]:
    """The at most ``n`` candidates closest to ``given`` (compared stripped and lower-cased),
    best first, with ``difflib`` similarity at least ``cutoff``.

    >>> close_matches("BF61", ["bf16", "fp16", "fp32"])
    ['bf16', 'fp16']
    """
    return difflib.get_close_matches(str(given).strip().lower(), list(candidates), n=n, cutoff=cutoff)


def did_you_mean(given: object, candidates: Iterable[str], n: int = 3, cutoff: float = 0.4) -> str:
    """``" Did you mean 'a', 'b'?"`` for the close matches, or ``""`` when there is none.

    >>> did_you_mean("sequentail", ["sequential", "pairwise"])
    " Did you mean 'sequential'?"
    >>> did_you_mean("xyz", ["sequential"])
    ''
    """
    close = close_matches(given, candidates, n, cutoff)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def unknown_name(kind: str, given: object, valid: Iterable[str], *, also: Iterable[str] = (), n: int = 3,
                 cutoff: float = 0.4, listed_as: str = "Valid", note: str = "", match: object = None,
                 reason: str = "") -> ValueError:
    """The ValueError for an unknown name (the caller raises it):
    ``"unknown {kind} {given!r}.{did_you_mean} {listed_as}: {valid, comma-separated}{note}."``

    Close matches are looked for among ``valid`` and ``also`` (aliases that are accepted
    but not listed), for ``match`` when given (the part of ``given`` that names the thing,
    e.g. ``"h100"`` of ``"h100/bf16"``), else for ``given``. With a ``reason`` the message
    starts ``"{kind} {given!r}: {reason}"`` instead (a name that parses but is not valid).

    >>> print(unknown_name("order", "kahn", ["sequential", "pairwise", "kahan"]))
    unknown order 'kahn'. Did you mean 'kahan'? Valid: sequential, pairwise, kahan.
    >>> print(unknown_name("model", "x100", ["h100"], note=" (or a TensorCoreModel)"))
    unknown model 'x100'. Did you mean 'h100'? Valid: h100 (or a TensorCoreModel).
    """
    valid = list(valid)
    hint = did_you_mean(given if match is None else match, [*valid, *also], n, cutoff)
    head = f"{kind} {given!r}: {reason}" if reason else f"unknown {kind} {given!r}."
    return ValueError(f"{head}{hint} {listed_as}: {', '.join(valid)}{note}.")
