"""Format comparison tables (``ff.compare``): the facts that set range and precision.

    >>> print(compare(["fp16", "bf16"]).markdown().splitlines()[2])
    | fp16 | 16 | s1 e5 m10 | 15 | 65504 | 2^-14 ≈ 6.104e-05 | 2^-24 ≈ 5.96e-08 | 2^-10 ≈ 0.0009766 | 3.31 | 12.0 | Inf, NaN |
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable

import numpy as np

from ..backend.fpu import ieee_entry
from ..core.block_formats import (BlockFormat, element_format, get_block_format,
                             is_block_format)
from ..core.formats import Format, FormatLike
from ..core.info import FormatInfo, info
from .numtext import num_text, pow2_text

__all__ = ["ComparisonTable", "compare", "DEFAULT_COMPARE"]


def _pow2_text(v: float) -> str:
    p = pow2_text(v)
    return f"{p} ≈ {v:.4g}" if p and not (1 <= v <= 65536) else num_text(v) if v == int(v) and v < 1e16 \
        else f"{v:.4g}"


class ComparisonTable:
    """Facts of several formats side by side; ``text()``, ``markdown()``,
    ``html()`` (also the Jupyter and ``print`` reprs), ``rows`` (dicts)."""

    COLUMNS = ("format", "bits", "layout", "bias", "max", "smallest normal", "smallest subnormal",
               "eps", "decimal digits", "dynamic range (decades)", "Inf/NaN")

    def __init__(self, names: list[FormatLike | BlockFormat]) -> None:
        self.rows = [self._row_of(n) for n in names]

    @classmethod
    def _row_of(cls, name) -> dict:
        """The row of a format or block format; an unknown name's ValueError lists both kinds."""
        if is_block_format(name):
            return cls._block_row(get_block_format(name))
        return cls._row(element_format(name))

    @staticmethod
    def _row(f: Format) -> dict:
        i = info(f)
        eps = i.eps if isinstance(i, FormatInfo) else 1.0  # a Format's info is a FormatInfo
        bits = f.bits or 0  # always set once the Format is built
        if f.kind == "int":
            return {"format": f.name, "bits": f.bits,
                    "layout": f"two's complement {f.bits}" if f.signed else f"unsigned {f.bits}",
                    "bias": "-", "max": num_text(f.max), "smallest normal": "-",
                    "smallest subnormal": "-", "eps": "1 (step)",
                    "decimal digits": f"{bits * math.log10(2):.2f}",
                    "dynamic range (decades)": f"{math.log10(f.max):.1f}", "Inf/NaN": "none"}
        layout = " ".join(p for p in (("s1" if f.signed else ""), f"e{f.ebits}",
                                      f"m{f.mbits}" if f.mbits else "") if p)
        special = ", ".join(p for p in ("Inf" if f.inf else "", "NaN" if f.has_nan else "") if p)
        sub = "-" if not f.subnormals else _pow2_text(f.smallest_subnormal)
        return {"format": f.name, "bits": f.bits, "layout": layout, "bias": f.bias,
                "max": _pow2_text(f.max) if f.max > 1e6 else num_text(f.max) if f.max == int(f.max)
                else f"{f.max:g}",
                "smallest normal": _pow2_text(f.smallest_normal), "smallest subnormal": sub,
                "eps": _pow2_text(eps) if f.mbits else "2^0 = 1",
                "decimal digits": f"{f.precision_bits * math.log10(2):.2f}",
                "dynamic range (decades)": f"{math.log10(f.max) - math.log10(f.smallest_subnormal):.1f}",
                "Inf/NaN": special or "none"}

    @staticmethod
    def _block_row(b: BlockFormat) -> dict:
        """A block format as its element format's row with the block facts: bits per
        element (scale share included), the layout of a block, the magnitudes as
        multiples of the block's scale, and the dynamic range within one block."""
        row = ComparisonTable._row(b.element_format)
        scale = f"{b.scale} scale" + (f" + {b.tensor_scale} tensor scale" if b.tensor_scale else "")
        row["format"] = b.name
        row["bits"] = f"{b.bits_per_element:g}"
        row["layout"] = f"{b.element} ×{b.block_size} + {scale}"
        if b.element_shift:  # MXINT8: int8 codes × 2^-6
            row["max"] = num_text(b.element_max)
            row["eps"] = f"2^-{b.element_shift} (step)"
        for col in ("max", "smallest normal", "smallest subnormal"):
            if row[col] != "-":
                row[col] = f"({row[col]}) × scale" if "≈" in row[col] else f"{row[col]} × scale"
        row["dynamic range (decades)"] = f"{row['dynamic range (decades)']} per block"
        if b.scale_format.nan == "all_ones" and b.scale_format.kind == "float" and not b.scale_format.signed:
            row["Inf/NaN"] = (row["Inf/NaN"] if row["Inf/NaN"] != "none" else "") + \
                (", " if row["Inf/NaN"] != "none" else "") + f"NaN scale (0x{(1 << b.scale_bits) - 1:x})"
        return row

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


@ieee_entry
def compare(formats: FormatLike | BlockFormat | Iterable[FormatLike | BlockFormat] = DEFAULT_COMPARE
            ) -> ComparisonTable:
    """Table of range and precision facts for ``formats`` (names or ``Format``; block
    formats such as ``"mxfp4_e2m1"`` or ``"nvfp4"`` give their element format's facts
    with the block's: bits per element including the scale's share, the layout of a
    block, magnitudes as multiples of the scale, dynamic range within a block).

    Columns: bits, layout (sign, exponent, mantissa widths), bias, max,
    smallest normal, smallest subnormal, eps (gap after 1), decimal digits
    (``p * log10(2)`` with p the significand bits), dynamic range in decades
    (``log10(max / smallest positive)``), Inf/NaN.

    >>> t = compare(["bf16", "fp8_e4m3"]); t.rows[1]["max"], t.rows[0]["decimal digits"]
    ('448', '2.41')
    >>> r = compare("mxfp4").rows[0]; r["bits"], r["layout"], r["max"]
    ('4.25', 'fp4_e2m1 ×32 + e8m0 scale', '6 × scale')
    """
    if isinstance(formats, (str, Format, BlockFormat, np.dtype, type)):
        return ComparisonTable([formats])
    return ComparisonTable(list(formats))
