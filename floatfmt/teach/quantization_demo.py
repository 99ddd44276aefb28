"""Teaching helpers for quantisation: error metrics, comparison tables, master weights.

``quantization_error`` measures one quantisation, ``compare_quantization`` prints a
table over many formats (``format_table``), ``master_weights_demo`` shows why training
keeps an fp32 master copy.  They use the public quantisation API only.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Iterable

import numpy as np

from ..backend.fpu import ieee_entry
from ..core.cast import cast
from ..core.formats import Format, FormatLike, get_format
from ..core.types import Values
from ..core.intake import to_exact
from ..scaling.quantize import quantize
from ..scaling.quantized_tensor import QuantizedTensor

__all__ = ["quantization_error", "compare_quantization", "format_table", "master_weights_demo"]


@ieee_entry
def quantization_error(x: Values, q: Any, **options: Any) -> dict:
    """Error of a quantisation of ``x``: ``q`` is a ``QuantizedTensor``, an array of
    dequantised values, or a format name (quantised here with ``options``).

    Returns a dict: ``mse``, ``sqnr_db`` (10 log10 of mean(x**2) / mse), ``max_abs_err``,
    ``max_rel_err`` (over nonzero x), ``frac_clipped`` (x that saturated: beyond the
    largest code by more than half a step, see ``QuantizedTensor.limits``; NaN when
    ``q`` is a plain array), ``frac_flushed`` (nonzero x that became 0),
    ``bits_per_element``.

    >>> e = quantization_error([0.001, 0.5, 1.0], "int8")
    >>> e["frac_flushed"], round(e["sqnr_db"], 1)
    (0.3333333333333333, 48.8)
    """
    xv = np.asarray(to_exact(x).values, np.float64)
    if isinstance(q, (str, Format)):
        q = quantize(x, q, **options)
    elif options:
        raise TypeError("options apply only when q is a format name")
    if isinstance(q, QuantizedTensor):
        xh = q.dequantize()
        lo, hi = q.limits()
        clipped = float(np.mean((xv < lo) | (xv > hi))) if xv.size else 0.0
        bits = q.bits_per_element
    else:
        xh = np.asarray(q, np.float64)
        clipped, bits = float("nan"), float("nan")
    if xh.shape != xv.shape:
        raise ValueError(f"shapes differ: x {xv.shape}, quantised {xh.shape}")
    fin = np.isfinite(xv)
    err = xh[fin] - xv[fin]
    xs = xv[fin]
    mse = float(np.mean(err ** 2)) if err.size else 0.0
    sig = float(np.mean(xs ** 2)) if xs.size else 0.0
    sqnr = float("inf") if mse == 0 else (10 * math.log10(sig / mse) if sig > 0 else float("-inf"))
    nz = xs != 0
    rel = float(np.max(np.abs(err[nz]) / np.abs(xs[nz]))) if nz.any() else 0.0
    return {"mse": mse, "sqnr_db": sqnr,
            "max_abs_err": float(np.max(np.abs(err))) if err.size else 0.0,
            "max_rel_err": rel, "frac_clipped": clipped,
            "frac_flushed": float(np.mean((xh[fin] == 0) & nz)) if xs.size else 0.0,
            "bits_per_element": bits}


_DEFAULT_COMPARE = ("int8", ("int8 per-channel", "int8", {"granularity": "channel"}),
                    "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8",
                    "nvfp4", "int4")


@ieee_entry
def compare_quantization(x: Values, formats: Iterable[Any] = _DEFAULT_COMPARE, show: bool = True,
                         **options: Any) -> list[dict]:
    """Quantise ``x`` in each format and print a table of the errors; returns the rows.

    Entries of ``formats``: a name (``"int8"``, ``"fp8_e4m3"``, ``"mxfp4"``, ``"nvfp4"``),
    or ``(label, name, {options})``.  ``options`` apply to every entry.

    >>> rows = compare_quantization(np.linspace(-1, 1, 64), ["int8", "mxfp4"], show=False)
    >>> [r["format"] for r in rows], rows[0]["sqnr_db"] > rows[1]["sqnr_db"]
    (['int8', 'mxfp4'], True)
    """
    rows = []
    for entry in formats:
        if isinstance(entry, str):
            label, name, opts = entry, entry, dict[str, object]()
        elif isinstance(entry, tuple) and len(entry) == 3:
            label, name, opts = entry
        elif isinstance(entry, tuple) and len(entry) == 2:
            name, opts = entry
            label = name
        else:
            raise TypeError(f"a format entry is a name or (label, name, options), not {entry!r}")
        e = quantization_error(x, quantize(x, name, **{**options, **opts}))
        rows.append({"format": label, **e})
    if show:
        print(format_table(rows))
    return rows


def format_table(rows: Iterable[dict]) -> str:
    """Text table of ``compare_quantization`` rows."""
    head = (f"{'format':<18}{'bits/el':>8}{'MSE':>11}{'SQNR dB':>9}{'max abs':>11}"
            f"{'max rel':>10}{'clipped':>9}{'flushed':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        pct = lambda v: "n/a" if v != v else f"{100 * v:.2f}%"  # noqa: E731
        lines.append(f"{r['format']:<18}{r['bits_per_element']:>8.3g}{r['mse']:>11.3e}"
                     f"{r['sqnr_db']:>9.2f}{r['max_abs_err']:>11.3e}{r['max_rel_err']:>10.3g}"
                     f"{pct(r['frac_clipped']):>9}{pct(r['frac_flushed']):>9}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# master weights

@ieee_entry
def master_weights_demo(w0: float = 1.0, update: float = 1e-4, steps: int = 10,
                        fmt: FormatLike = "fp16", master: FormatLike = "fp32",
                        show: bool = True) -> dict[str, list[float]]:
    """Add ``update`` to a weight ``steps`` times, three ways, each sum rounded once:

    * ``low``: the weight lives in ``fmt`` (``w = fmt(w + update)``);
    * ``master``: an fp32 master copy takes the update (``m = fp32(m + update)``);
    * ``from_master``: the ``fmt`` copy used by the next forward pass, ``fmt(m)``.

    With the defaults, ``1 + 0.0001`` is 1 in FP16 (half the gap above 1 is 2**-11,
    about 0.00049), so the FP16 weight never moves, while the master copy
    accumulates the updates and its FP16 copy steps up once it passes the midpoint.
    Returns a dict of lists (step 0 = the start).

    >>> d = master_weights_demo(show=False)
    >>> d["low"][-1], round(d["master"][-1], 6), d["from_master"][-1]
    (1.0, 1.001, 1.0009765625)
    """
    f, mf = get_format(fmt), get_format(master)
    u = Fraction(update)
    w = m = float(cast(w0, f))
    m = float(cast(w0, mf))
    low, mas, fm = [w], [m], [float(cast(m, f))]
    for _ in range(int(steps)):
        w = float(cast(Fraction(w) + u, f))
        m = float(cast(Fraction(m) + u, mf))
        low.append(w)
        mas.append(m)
        fm.append(float(cast(m, f)))
    if show:
        print(f"adding {update:g} to {w0:g}, {steps} times (exact sum: {float(Fraction(w0) + steps * u):.10g})")
        print(f"{'step':>5} {f.name + ' only':>16} {mf.name + ' master':>18} {f.name + '(master)':>16}")
        for i in range(len(low)):
            print(f"{i:>5} {low[i]:>16.10g} {mas[i]:>18.10g} {fm[i]:>16.10g}")
    return {"low": low, "master": mas, "from_master": fm}
