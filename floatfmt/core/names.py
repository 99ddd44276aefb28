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


def _suggest(given, valid, also, n, cutoff) -> str:
    """The "Did you mean" part: listed names that start with ``given`` (in list order), then
    close matches among listed names and aliases, aliases replaced by the listed name they
    stand for when ``also`` is a mapping; at most ``n``, each named once."""
    key = str(given).strip().lower()
    canon = dict(also) if isinstance(also, dict) else {a: a for a in also}
    prefix = [v for v in valid if key and str(v).lower().startswith(key) and str(v).lower() != key]
    close = [canon.get(c, c) for c in close_matches(given, [*valid, *canon], n + len(prefix), cutoff)]
    out = list(dict.fromkeys([*prefix, *close]))[:n]
    return f" Did you mean {', '.join(repr(c) for c in out)}?" if out else ""


def unknown_name(kind: str, given: object, valid: Iterable[str], *, also: Iterable[str] = (), n: int = 3,
                 cutoff: float = 0.4, listed_as: str = "Valid", note: str = "", match: object = None,
                 reason: str = "") -> ValueError:
    """The ValueError for an unknown name (the caller raises it):
    ``"unknown {kind} {given!r}.{did_you_mean} {listed_as}: {valid, comma-separated}{note}."``

    Close matches are looked for among ``valid`` and ``also`` (aliases that are accepted
    but not listed; when ``also`` maps each alias to its listed name, a matching alias is
    suggested as that listed name, so a suggestion is always a name of the printed list),
    listed names that start with the given text first (``'fp8'`` suggests the fp8
    formats), for ``match`` when given (the part of ``given`` that names the thing,
    e.g. ``"h100"`` of ``"h100/bf16"``), else for ``given``. With a ``reason`` the message
    starts ``"{kind} {given!r}: {reason}"`` instead (a name that parses but is not valid).

    >>> print(unknown_name("order", "kahn", ["sequential", "pairwise", "kahan"]))
    unknown order 'kahn'. Did you mean 'kahan'? Valid: sequential, pairwise, kahan.
    >>> print(unknown_name("model", "x100", ["h100"], note=" (or a TensorCoreModel)"))
    unknown model 'x100'. Did you mean 'h100'? Valid: h100 (or a TensorCoreModel).
    >>> print(unknown_name("format", "fp8", ["fp6_e2m3", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]))
    unknown format 'fp8'. Did you mean 'fp8_e4m3', 'fp8_e5m2'? Valid: fp6_e2m3, fp8_e4m3, fp8_e5m2, fp4_e2m1.
    >>> print(unknown_name("mode", "rne_", ["nearest_even"], also={"rne": "nearest_even"}))
    unknown mode 'rne_'. Did you mean 'nearest_even'? Valid: nearest_even.
    """
    valid = list(valid)
    hint = _suggest(given if match is None else match, valid, also, n, cutoff)
    head = f"{kind} {given!r}: {reason}" if reason else f"unknown {kind} {given!r}."
    return ValueError(f"{head}{hint} {listed_as}: {', '.join(valid)}{note}.")
