"""Pages of the documentation generated from floatfmt itself (run by conf.py).

Nothing here is typed by hand: the format table comes from the registry
(``ff.formats()`` / ``ff.info``), the tensor-core table from
``ff.tensorcore_models()``, the API page from ``floatfmt.__all__``; the
notebooks are copied as committed and the explorer page is written by
``floatfmt.teach.explorer.write_explorer``.
"""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import floatfmt as ff
from floatfmt.teach.explorer import write_explorer


def _pow2(v: float) -> str:
    import math
    if v > 0:
        m, e = math.frexp(v)
        if m == 0.5 and abs(e - 1) > 4:
            return f"2^{e - 1}"
    return f"{v:.6g}"


def format_table() -> str:
    head = ("| name | bits | exp | man | bias | max | min normal | min subnormal | eps | Inf | NaN | "
            "overflow default | description |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for name in ff.formats():
        f, i = ff.get_format(name), ff.info(name)
        if f.kind == "int":
            rows.append(f"| `{name}` | {f.bits} | - | - | - | {i.max:g} | - | - | - | no | no | "
                        f"{f.default_overflow} | {f.description} |")
            continue
        nan = {"ieee": "IEEE", "all_ones": "all-ones code", "negative_zero": "the -0 code", "none": "none"}[f.nan]
        if not f.has_nan:
            nan = "none"
        rows.append(f"| `{name}` | {f.bits} | {f.ebits} | {f.mbits} | {f.bias} | {_pow2(f.max)} | "
                    f"{_pow2(f.smallest_normal)} | {_pow2(f.smallest_subnormal) if f.subnormals else '-'} | "
                    f"{_pow2(i.eps)} | {'yes' if f.inf else 'no'} | {nan} | {f.default_overflow} | "
                    f"{f.description} |")
    return "\n".join(rows) + "\n"


def tensorcore_table() -> str:
    head = ("| preset | GPU | inputs | algorithm | F | L | accumulator | step format | rounding "
            "| overflow |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, m in ff.tensorcore_models().items():
        inputs = f"`{m.block_fmt}`" if m.block_fmt else f"`{m.fmt}`"
        rows.append(f"| `{name}` | {m.description} | {inputs} | `{m.algorithm}` | {m.F} | {m.L} | "
                    f"`{m.acc_fmt}` | "
                    f"{'`' + m.step_fmt + '`' if m.step_fmt else '-'} | {m.rounding} | {m.overflow} |")
    return "\n".join(rows) + "\n"


_GROUPS = [
    ("Casting and codes", ["cast", "encode", "decode", "classify", "next_up", "next_down", "ulp", "values"]),
    ("Formats", ["Format", "FormatInfo", "formats", "get_format", "register", "info", "MODES", "OVERFLOWS",
                 "p3109", "p3109_formats"]),
    ("Seeing the bits", ["explain", "compare"]),
    ("Arithmetic", ["add", "sub", "mul", "div", "fma", "sqrt", "neg", "abs", "minimum", "maximum",
                    "FPArray", "array", "scalar"]),
    ("Accumulation and tensor cores", ["sum", "dot", "matmul", "TensorCoreModel", "tensorcore_models"]),
    ("Quantisation, scaling and training", ["quantize", "dequantize", "fake_quant", "int_matmul",
                                            "QuantizedTensor", "DelayedScaling", "LossScaler",
                                            "compare_quantization", "quantization_error",
                                            "master_weights_demo"]),
    ("Threads", ["get_num_threads", "set_num_threads", "limit_threads"]),
]
_EXTRA = [("Teaching helpers (modules)", ["floatfmt.teach.explain.block.explain_block", "floatfmt.teach.explorer.write_explorer",
                                          "floatfmt.teach.explorer.explorer_data",
                                          "floatfmt.teach.explorer_widget.explorer"])]


def api_page() -> str:
    """One page, every public name (``floatfmt.__all__``), grouped."""
    names = list(ff.__all__)
    grouped = [n for _, g in _GROUPS for n in g]
    rest = [n for n in names if n not in grouped]
    missing = [n for n in grouped if n not in names]
    if missing:
        raise ValueError(f"the API page lists names that floatfmt no longer exports: {missing}")
    groups = _GROUPS + ([("Other", rest)] if rest else [])
    out = ["# API reference", "",
           "Every public name of `floatfmt` (`floatfmt.__all__`), generated from the docstrings. "
           "The examples in them are doctests: `python -m pytest` runs every one.", ""]
    for title, group in groups + [(t, g) for t, g in _EXTRA]:
        out += [f"## {title}", ""]
        for name in group:
            full = name if name.startswith("floatfmt.") else f"floatfmt.{name}"
            obj = _resolve(full)
            kind = ("autoclass" if inspect.isclass(obj) else
                    "autofunction" if callable(obj) else "autodata")
            opts = ["   :members:", "   :undoc-members: False"] if kind == "autoclass" else []
            out += ["```{eval-rst}", f".. {kind}:: {full}", *opts, "```", ""]
    return "\n".join(out)


def _resolve(full: str):
    import importlib
    mod, _, attr = full.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


def copy_notebooks(root: Path, dest: Path) -> list[Path]:
    """The committed notebooks (lessons, assignments, solutions), copied unchanged."""
    src = root / "notebooks"
    out = []
    for nb in sorted(src.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        target = dest / nb.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, target)
        out.append(target)
    return out


def _write(path: Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_generated(out: Path, root: Path):
    """Write every generated page under ``out`` (docs/generated)."""
    _write(out / "format_table.md", format_table())
    _write(out / "tensorcore_table.md", tensorcore_table())
    _write(out / "api.md", api_page())
    copy_notebooks(root, out / "notebooks")
    (out / "extra").mkdir(parents=True, exist_ok=True)
    write_explorer(out / "extra" / "floatfmt-explorer.html")
