"""HTML renderings of the explanations (what Jupyter shows for ``ff.explain``).

One box per bit, coloured by field (sign, exponent, mantissa), with each
field's meaning underneath; a number line from the lower to the upper
neighbour with the input and the stored value marked; a table of the
explanation's lines.  Functions here only lay out what an explanation object
already worded (``Explanation``, ``ExplanationTable``, ``BlockExplanation``:
passed in, not imported, so this module sits below them).
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

from ...core.formats import hex_code
from ..numtext import FIELD_COLOURS, exact_decimal, input_text, num_text

__all__ = ["nobreak", "bit_boxes", "number_line_svg", "explanation_html", "table_html", "block_html"]

# Colours are explicit wherever the background is: the pastel bit boxes and shaded rows
# carry their own dark text, so they read the same in a light or a dark notebook theme.
# Everything else (text, SVG strokes and labels) follows the theme's text colour
# (``currentColor``) on the theme's background.
_INK = "#1a1a1a"
_BOX = ("display:inline-block;min-width:1.3em;padding:2px 1px;margin:0 1px;text-align:center;"
        f"font-family:monospace;font-size:1.1em;border:1px solid #555;border-radius:3px;color:{_INK};")
_FLAG_ROW = f' style="color:{_INK};background:#fde2c8"'  # a saturated / flushed element
_SCROLL = "overflow-x:auto;max-width:100%"  # long numbers and bit rows scroll inside this box
_TH = "text-align:left;vertical-align:top;padding-right:1em"


def nobreak(text: str) -> str:
    """``text`` HTML-escaped, with every word that holds a hyphen (``9.18e-41``,
    ``-448..448``) kept on one line (``<nobr>``, which every browser renders as
    ``white-space:nowrap``; not a ``span``, which marks a bit box): browsers may break
    after a hyphen, which would split a number.  Words never break inside otherwise
    (no ``break-all``)."""
    parts = []
    for word in re.split(r"(\s+)", text):
        w = html.escape(word)
        parts.append(f"<nobr>{w}</nobr>" if "-" in word else w)
    return "".join(parts)


def bit_boxes(fields: list[tuple[str, str, str]], describe: bool = True) -> str:
    """One box per bit coloured by field, with each field's name and description
    underneath (``describe=False``: the boxes only, for tables).  A field's bits stay
    on one line."""
    parts = []
    for name, b, desc in fields:
        cells = "".join(f'<span style="{_BOX}background:{FIELD_COLOURS[name][1]}">{c}</span>'
                        for c in b)
        under = (f'<div style="font-size:0.85em;text-align:center;max-width:{max(len(b) * 1.7, 6)}em">'
                 f'<b>{name}</b><br>{nobreak(desc)}</div>') if describe else ""
        parts.append(f'<div style="display:inline-block;vertical-align:top;margin-right:6px">'
                     f'<div style="white-space:nowrap">{cells}</div>{under}</div>')
    return "".join(parts)


def _rows(e: Any) -> list[tuple[str, str]]:
    """(label, text) for each line of an ``Explanation``'s table."""
    shown = input_text(e.input)
    rows = [("input", shown + (f" (exactly {exact_decimal(e.exact)})" if e.exact is not None
                               and exact_decimal(e.exact) != shown else ""))]
    nb = e.neighbour_text()
    if nb:
        rows.append(("neighbours", nb))
    rows.append(("rounding", " ".join([f"{e.summary()}: {e.reason}"] + e.notes)))
    rows.append(("stored", exact_decimal(e.value) if math.isfinite(e.value) else num_text(e.value)))
    if e.code is not None:
        rows.append(("code", f"{hex_code(e.code, e.format)} = {e.bits}"))
    if e.formula():
        rows.append(("value", e.formula()))
    if e.twos_complement():
        rows.append(("two's complement", e.twos_complement()))
    rows.append(("class", e.cls))
    if e.abs_error is not None:
        rows.append(("error", e.error_text()))
    return rows


def explanation_html(e: Any) -> str:
    """An ``Explanation`` as HTML: title, bit boxes, number line, then one row per line.

    The table has a fixed layout as wide as its container; each value sits in its own
    horizontal scroll box, so an exact decimal of hundreds of digits scrolls instead of
    widening the page, and prose wraps between words only."""
    esc = html.escape
    bits = bit_boxes(e.fields()) or f"<i>{nobreak(e.code_text())}</i>"
    table = "".join(f'<tr><th style="{_TH};width:8em">{esc(k)}</th>'
                    f'<td style="text-align:left;font-family:monospace">'
                    f'<div style="{_SCROLL}">{nobreak(str(v))}</div></td></tr>' for k, v in _rows(e))
    return (f'<div class="floatfmt-explain" style="max-width:100%">'
            f'<div style="{_SCROLL}"><b>{esc(input_text(e.input))}</b> as '
            f'<b>{esc(e.format.name)}</b> ({esc(e.rounding)})</div>'
            f'<div style="margin:6px 0;{_SCROLL}">{bits}</div>{number_line_svg(e)}'
            f'<table style="table-layout:fixed;width:100%">{table}</table></div>')


def number_line_svg(e: Any) -> str:
    """An SVG number line from ``e.lower`` to ``e.upper``: the input (red dot), the
    stored neighbour (green ring) and the midpoint; empty when nothing is rounded.

    The margins grow with the neighbours' labels so that no label is cut off; lines
    and labels use the theme's text colour (``currentColor``); the drawing scales down
    to a narrow container (``viewBox``)."""
    if e.position is None or e.lower is None or e.lower == e.upper:
        return ""
    lo, hi = num_text(e.lower), num_text(e.upper)
    char = 7.0  # px per character of 11px monospace, rounded up
    left, right = max(40.0, len(lo) * char / 2 + 4), max(40.0, len(hi) * char / 2 + 4)
    inner, h = 340.0, 70
    w = left + inner + right
    xpos = left + float(e.position) * inner
    spos = left if e.value == e.lower else left + inner

    def lab(x: float, t: str, y: int) -> str:
        return (f'<text x="{x:.1f}" y="{y}" font-size="11" text-anchor="middle" '
                f'font-family="monospace" fill="currentColor">{html.escape(t)}</text>')

    return (f'<svg width="{w:.0f}" height="{h}" viewBox="0 0 {w:.0f} {h}" '
            f'style="display:block;max-width:100%;height:auto" xmlns="http://www.w3.org/2000/svg">'
            f'<line x1="{left:.1f}" y1="25" x2="{left + inner:.1f}" y2="25" stroke="currentColor"/>'
            f'<line x1="{left:.1f}" y1="18" x2="{left:.1f}" y2="32" stroke="currentColor"/>'
            f'<line x1="{left + inner:.1f}" y1="18" x2="{left + inner:.1f}" y2="32" stroke="currentColor"/>'
            f'<line x1="{left + inner / 2:.1f}" y1="21" x2="{left + inner / 2:.1f}" y2="29" stroke="#888"/>'
            f'<circle cx="{spos:.1f}" cy="25" r="7" fill="none" stroke="#2a7" stroke-width="2"/>'
            f'<circle cx="{xpos:.1f}" cy="25" r="4" fill="#d33"/>'
            + lab(left, lo, 46) + lab(left + inner, hi, 46)
            + lab(xpos, "x", 12) + lab(left + inner / 2, "midpoint", 63) + '</svg>')


def table_html(t: Any) -> str:
    """An ``ExplanationTable`` as HTML: the summary line, then one row per element (the
    table scrolls inside its box; no cell breaks a number)."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in t.COLUMNS)
    body = "".join("<tr>" + "".join(f'<td style="font-family:monospace">{esc(c)}</td>' for c in r)
                   + "</tr>" for r in t.rows())
    return (f'<div style="max-width:100%"><p>{nobreak(t.summary())}</p>'
            f'<div style="{_SCROLL};white-space:nowrap"><table><tr>{head}</tr>{body}</table></div></div>')


def block_html(b: Any) -> str:
    """A ``BlockExplanation`` as HTML: the title, the scale's bit boxes and facts, then
    one row per element (saturated or flushed rows shaded, with their own text colour)."""
    esc = html.escape
    e = b.scale_explanation
    head = (f'<div><b>{nobreak(b.title())}</b></div><div style="margin:6px 0;{_SCROLL}">'
            f'{bit_boxes(e.fields()) if e.code is not None else ""}</div>')
    info_rows = "".join(f'<tr><th style="{_TH}">{esc(k)}</th>'
                        f'<td style="text-align:left;font-family:monospace">{nobreak(v)}</td></tr>'
                        for k, v in b.scale_lines())
    th = "".join(f"<th>{esc(c)}</th>" for c in b.COLUMNS)
    body = []
    for i in range(b.size):
        r = b.row(i)
        flag = _FLAG_ROW if r[-1] else ""
        cells = [f'<td style="font-family:monospace">{esc(c)}</td>' if j != 4 else
                 f"<td>{bit_boxes(b.explanations[i].fields(), describe=False)}</td>"
                 for j, c in enumerate(r)]
        body.append(f"<tr{flag}>{''.join(cells)}</tr>")
    return (f'<div class="floatfmt-explain-block" style="max-width:100%">{head}'
            f'<div style="{_SCROLL}"><table>{info_rows}</table></div>'
            f'<div style="{_SCROLL};white-space:nowrap"><table><tr>{th}</tr>{"".join(body)}</table></div></div>')
