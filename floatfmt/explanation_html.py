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
from typing import Any

from ._formats import hex_code
from .numtext import FIELD_COLOURS, exact_decimal, input_text, num_text

__all__ = ["bit_boxes", "number_line_svg", "explanation_html", "table_html", "block_html"]

_BOX = ("display:inline-block;min-width:1.3em;padding:2px 1px;margin:0 1px;text-align:center;"
        "font-family:monospace;font-size:1.1em;border:1px solid #555;border-radius:3px;")


def bit_boxes(fields: list[tuple[str, str, str]], describe: bool = True) -> str:
    """One box per bit coloured by field, with each field's name and description
    underneath (``describe=False``: the boxes only, for tables)."""
    parts = []
    for name, b, desc in fields:
        cells = "".join(f'<span style="{_BOX}background:{FIELD_COLOURS[name][1]}">{c}</span>'
                        for c in b)
        under = (f'<div style="font-size:0.85em;text-align:center;max-width:{max(len(b) * 1.7, 6)}em">'
                 f'<b>{name}</b><br>{html.escape(desc)}</div>') if describe else ""
        parts.append(f'<div style="display:inline-block;vertical-align:top;margin-right:6px">'
                     f'<div>{cells}</div>{under}</div>')
    return "".join(parts)


def explanation_html(e: Any) -> str:
    """An ``Explanation`` as HTML: title, bit boxes, number line, then one row per line."""
    f = e.format
    esc = html.escape
    bits = bit_boxes(e.fields()) or f"<i>{esc(e.code_text())}</i>"
    shown = input_text(e.input)
    rows = [("input", shown + (f" (exactly {exact_decimal(e.exact)})" if e.exact is not None
                               and exact_decimal(e.exact) != shown else ""))]
    nb = e.neighbour_text()
    if nb:
        rows.append(("neighbours", nb))
    rows.append(("rounding", " ".join([f"{e.summary()}: {e.reason}"] + e.notes)))
    rows.append(("stored", exact_decimal(e.value) if math.isfinite(e.value) else num_text(e.value)))
    if e.code is not None:
        rows.append(("code", f"{hex_code(e.code, f)} = {e.bits}"))
    if e.formula():
        rows.append(("value", e.formula()))
    if e.twos_complement():
        rows.append(("two's complement", e.twos_complement()))
    rows.append(("class", e.cls))
    if e.abs_error is not None:
        rows.append(("error", e.error_text()))
    table = "".join(f'<tr><th style="text-align:left;padding-right:1em">{esc(k)}</th>'
                    f'<td style="text-align:left;font-family:monospace;word-break:break-all">'
                    f'{esc(str(v))}</td></tr>' for k, v in rows)
    svg = number_line_svg(e)
    return (f'<div class="floatfmt-explain"><div><b>{esc(shown)}</b> as '
            f'<b>{esc(f.name)}</b> ({esc(e.rounding)})</div><div style="margin:6px 0">{bits}</div>'
            f'{svg}<table>{table}</table></div>')


def number_line_svg(e: Any) -> str:
    """An SVG number line from ``e.lower`` to ``e.upper``: the input (red dot), the
    stored neighbour (green ring) and the midpoint; empty when nothing is rounded."""
    if e.position is None or e.lower is None or e.lower == e.upper:
        return ""
    w, pad = 420, 40
    xpos = pad + float(e.position) * (w - 2 * pad)
    stored_left = e.value == e.lower
    spos = pad if stored_left else w - pad

    def lab(x: float, t: str, y: int) -> str:
        return (f'<text x="{x:.1f}" y="{y}" font-size="11" text-anchor="middle" '
                f'font-family="monospace">{html.escape(t)}</text>')

    return (f'<svg width="{w}" height="62" xmlns="http://www.w3.org/2000/svg">'
            f'<line x1="{pad}" y1="25" x2="{w - pad}" y2="25" stroke="#333"/>'
            f'<line x1="{pad}" y1="18" x2="{pad}" y2="32" stroke="#333"/>'
            f'<line x1="{w - pad}" y1="18" x2="{w - pad}" y2="32" stroke="#333"/>'
            f'<line x1="{w / 2}" y1="21" x2="{w / 2}" y2="29" stroke="#999"/>'
            f'<circle cx="{spos}" cy="25" r="7" fill="none" stroke="#2a7" stroke-width="2"/>'
            f'<circle cx="{xpos:.1f}" cy="25" r="4" fill="#d33"/>'
            + lab(pad, num_text(e.lower), 50) + lab(w - pad, num_text(e.upper), 50)
            + lab(xpos, "x", 12) + lab(w / 2, "midpoint", 44) + '</svg>')


def table_html(t: Any) -> str:
    """An ``ExplanationTable`` as HTML: the summary line, then one row per element."""
    esc = html.escape
    head = "".join(f"<th>{esc(c)}</th>" for c in t.COLUMNS)
    body = "".join("<tr>" + "".join(f'<td style="font-family:monospace">{esc(c)}</td>' for c in r)
                   + "</tr>" for r in t.rows())
    return f"<div><p>{esc(t.summary())}</p><table><tr>{head}</tr>{body}</table></div>"


def block_html(b: Any) -> str:
    """A ``BlockExplanation`` as HTML: the title, the scale's bit boxes and facts, then
    one row per element (saturated or flushed rows shaded)."""
    esc = html.escape
    e = b.scale_explanation
    head = (f'<div><b>{esc(b.title())}</b></div><div style="margin:6px 0">'
            f'{bit_boxes(e.fields()) if e.code is not None else ""}</div>')
    info_rows = "".join(f'<tr><th style="text-align:left;padding-right:1em">{esc(k)}</th>'
                        f'<td style="text-align:left;font-family:monospace">{esc(v)}</td></tr>'
                        for k, v in b.scale_lines())
    th = "".join(f"<th>{esc(c)}</th>" for c in b.COLUMNS)
    body = []
    for i in range(b.size):
        r = b.row(i)
        flag = ' style="background:#fde2c8"' if r[-1] else ""
        cells = [f'<td style="font-family:monospace">{esc(c)}</td>' if j != 4 else
                 f"<td>{bit_boxes(b.explanations[i].fields(), describe=False)}</td>"
                 for j, c in enumerate(r)]
        body.append(f"<tr{flag}>{''.join(cells)}</tr>")
    return (f'<div class="floatfmt-explain-block">{head}<table>{info_rows}</table>'
            f'<table><tr>{th}</tr>{"".join(body)}</table></div>')
