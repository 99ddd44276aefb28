"""An interactive explorer widget for Jupyter (ipywidgets): format, mode, value, code.

The static, self-contained page (``floatfmt explore``) is ``floatfmt.teach.explorer``;
this is its notebook cousin, built from ``explain``.
"""

from __future__ import annotations

from typing import Any

from ..core.formats import get_format
from .explain.entry import explain

__all__ = ["explorer"]


def _slider_bits(fmt: Any) -> int:
    """How many of the format's top bits the code slider sets (at most 16)."""
    return min(get_format(fmt).bits or 0, 16)


def explorer(fmt: Any = "bf16", value: Any = 0.1) -> Any:
    """An ipywidgets explorer: pick a format, a rounding mode and a value, or
    slide through the codes (for formats wider than 16 bits the slider sets
    the top 16 bits), and see ``explain``.  Without ipywidgets it returns the
    static ``Explanation`` of ``value``."""
    try:
        import ipywidgets as w
        from IPython.display import display
    except ImportError:
        return explain(value, fmt)
    names = ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
             "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0", "int8", "uint8", "int4"]
    start = get_format(fmt).name
    if start not in names:
        names.append(start)
    fsel = w.Dropdown(options=names, value=start, description="format")
    text = w.Text(value=str(value), description="value", continuous_update=False)
    mode = w.Dropdown(options=["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"],
                      value="nearest_even", description="rounding")
    code = w.IntSlider(min=0, max=(1 << _slider_bits(fmt)) - 1, description="code",
                       continuous_update=False)
    out = w.Output()

    def show(*_):
        out.clear_output(wait=True)
        with out:
            try:
                display(explain(text.value, fsel.value, mode.value))
            except (ValueError, TypeError) as err:
                print(f"error: {err}")

    def from_code(change):
        from ..core.codec import decode
        f = get_format(fsel.value)
        v = decode(int(change["new"]) << max((f.bits or 0) - 16, 0), f)
        text.value = repr(v) if v == v else "nan"

    def new_format(change):
        code.max = (1 << _slider_bits(change["new"])) - 1
        show()

    text.observe(show, names="value")
    mode.observe(show, names="value")
    fsel.observe(new_format, names="value")
    code.observe(from_code, names="value")
    show()
    return w.VBox([w.HBox([fsel, mode]), w.HBox([text, code]), out])
