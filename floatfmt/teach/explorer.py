"""The explorer page: click the bits of any small format, round any decimal
string in every format at once, and watch an MX block being quantised.

``write_explorer(path)`` writes one self-contained HTML file (no network: the
styles, the script and the format data are inside it).  ``floatfmt explore``
writes it and opens it in the default browser; the documentation site ships
the same file as ``explorer.html``.

How the page stays exact: its script (``explorer_assets/engine.js``) computes
with BigInt rationals only.  A decimal string is parsed exactly and rounded once
by the rule of ``floatfmt.core.rounding``; every fact about a format (field widths,
bias, emin, emax, the largest value, which codes are Inf and NaN) comes from
the registry through ``explorer_data()``, written into the page when it is
built.  ``tests/test_explorer.py`` runs the page in headless chromium and
compares it with floatfmt on thousands of inputs per format and mode.

    >>> d = explorer_data()
    >>> d["formats"]["fp8_e4m3"]["max_code"], d["formats"]["fp8_e4m3"]["overflows"]
    (126, ['nan', 'saturate'])
    >>> [n for n in d["formats"] if d["formats"][n]["bits"] > 16]
    ['fp32', 'tf32']
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

from .._version import __version__
from ..core.formats import Format, formats, get_format
from ..core.rounding import MODES, STOCHASTIC, resolve_overflow

__all__ = ["EXPLORER_FORMATS", "EXPLORER_MODES", "explorer_data", "explorer_html", "write_explorer"]

_ASSETS = Path(__file__).with_name("explorer_assets")

#: The rounding modes the page offers: every deterministic mode of ``MODES``.
EXPLORER_MODES = tuple(m for m in MODES if m not in STOCHASTIC)  # (deterministic only)


def _explorer_formats() -> list[str]:
    """fp32 and tf32, then every registered format of at most 16 bits."""
    return ["fp32", "tf32"] + [n for n in formats() if get_format(n).bits <= 16]


#: Formats the page offers (computed from the registry when floatfmt is imported).
EXPLORER_FORMATS = tuple(_explorer_formats())


def _dyadic(v: Fraction) -> tuple[str, int]:
    """(t, k) with v = t * 2**k, t as a decimal string (v a dyadic rational >= 0)."""
    den = v.denominator
    k = den.bit_length() - 1
    if den != 1 << k:
        raise ValueError(f"{v} is not a dyadic rational")
    return str(v.numerator), -k


def _format_record(fmt: Format) -> dict:
    overflows = []
    for p in ("saturate", "inf", "nan", "wrap"):
        try:
            resolve_overflow(p, fmt)
        except ValueError:
            continue
        overflows.append(p)
    t, k = _dyadic(fmt.max_exact)
    return {
        "name": fmt.name, "description": fmt.description, "kind": fmt.kind, "bits": fmt.bits,
        "ebits": fmt.ebits, "mbits": fmt.mbits, "bias": fmt.bias, "inf": fmt.inf, "nan": fmt.nan,
        "has_nan": fmt.has_nan, "signed": fmt.signed, "negative_zero": bool(fmt.negative_zero),
        "zero": fmt.zero, "subnormals": fmt.subnormals,
        "emin": fmt.emin if fmt.is_float else 0, "emax": fmt.emax if fmt.is_float else 0,
        "max_code": fmt.max_code, "max_t": t, "max_k": k,
        "default_overflow": fmt.default_overflow,
        "overflows": sorted(overflows, key=lambda p: p != fmt.default_overflow),
    }


def _mx_records() -> dict:
    from ..core.block_formats import get_block_format
    from ..scaling.mx_nvfp4 import MX_FORMATS, SCALE_ROUNDINGS, mx_shared_exponent
    from ..scaling.quantize import quantize

    out = {}
    for name, elem_name in MX_FORMATS.items():
        elem = get_format(elem_name)
        emax = -int(mx_shared_exponent(1.0, name))  # E = floor(log2 1) - emax_elem
        block = get_block_format(name).block_size
        # integer elements hold code / 2**shift (MXINT8: 1.0 is code 64 when E = 0)
        shift = 0
        if elem.kind == "int":
            shift = int(quantize([1.0], name).codes[0]).bit_length() - 1
        t, k = _dyadic(elem.max_exact / 2 ** shift)
        out[name] = {"element": elem_name, "emax": emax, "shift": shift, "block": block,
                     "max_t": t, "max_k": k,
                     "even_format": f"e11m{shift if elem.kind == 'int' else elem.mbits}",
                     "scale_roundings": list(SCALE_ROUNDINGS)}
    return out


def explorer_data() -> dict:
    """Everything the page needs from floatfmt, as JSON-ready data: the format
    records (fields, bias, emin, emax, max as ``t * 2**k``, NaN/Inf layout,
    valid overflow policies, the format's own first), the MX block formats, the deterministic rounding
    modes, and helper formats (fp64 for float64 truncation, ``e11mN`` for the
    "even" MX scale rule)."""
    fmts = {n: _format_record(get_format(n)) for n in EXPLORER_FORMATS}
    mx = _mx_records()
    aux = {"fp64": _format_record(get_format("fp64"))}
    for rec in mx.values():
        aux[rec["even_format"]] = _format_record(get_format(rec["even_format"]))
    return {"version": __version__, "modes": list(EXPLORER_MODES), "formats": fmts, "mx": mx,
            "aux": aux}


def explorer_html() -> str:
    """The explorer page as one self-contained HTML document."""
    page = (_ASSETS / "explorer.html").read_text(encoding="utf-8")
    data = json.dumps(explorer_data(), separators=(",", ":")).replace("</", "<\\/")
    parts = {"{{CSS}}": (_ASSETS / "explorer.css").read_text(encoding="utf-8"),
             "{{DATA}}": data,
             "{{ENGINE}}": (_ASSETS / "engine.js").read_text(encoding="utf-8"),
             "{{UI}}": (_ASSETS / "ui.js").read_text(encoding="utf-8"),
             "{{VERSION}}": __version__}
    for key, value in parts.items():
        page = page.replace(key, value)
    return page


def write_explorer(path) -> Path:
    """Write the explorer page to ``path`` (a file name, or a folder that gets
    ``explorer.html``) and return the file's path."""
    p = Path(path)
    if p.is_dir() or p.suffix.lower() not in (".html", ".htm"):
        p.mkdir(parents=True, exist_ok=True)
        p = p / "explorer.html"
    else:
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(explorer_html(), encoding="utf-8")
    return p
