"""The ``floatfmt`` command.

Subcommands: ``show``, ``info``, ``formats``, ``tour``, ``explore``, ``figures``, ``train``,
``gpu-report``, ``course``.  Each subcommand's work lives in the module that owns it; this
file only parses arguments.
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction

from .core import codec, intake as exact
from .core.cast import cast
from .teach.numtext import exact_decimal
from .core.block_formats import block_formats, get_block_format
from .core.formats import formats, get_format, hex_code
from .core.info import info
from .core.rounding import MODES


def _fields(code: int, fmt) -> str:
    b = format(code, f"0{fmt.bits}b")
    if fmt.kind == "int":
        return b
    s = b[: int(fmt.signed)]
    e = b[int(fmt.signed): int(fmt.signed) + fmt.ebits]
    m = b[int(fmt.signed) + fmt.ebits:]
    return " ".join(p for p in (s, e, m) if p)


def show(value: str, fmt_name: str, rounding: str = "nearest_even", overflow=None) -> str:
    """Text for ``floatfmt show``: value, code, exact stored value, error."""
    fmt = get_format(fmt_name)
    stored = cast(value, fmt, rounding, overflow)
    lines = [f"input      {value}", f"format     {fmt.name}  ({fmt!r})",
             f"rounding   {rounding}"]
    try:
        code = codec.encode(value, fmt, rounding, overflow)
        names = [n for n, w in (("sign", int(fmt.signed)), ("exponent", fmt.ebits),
                                ("mantissa", fmt.mbits)) if w]
        lines.append(f"code       {hex_code(code, fmt)}  = {_fields(code, fmt)}"
                     + (f"  ({' '.join(names)})" if fmt.kind == "float" else "  (two's complement)"))
    except ValueError as err:
        lines.append(f"code       none ({err})")
    lines.append(f"stored     {exact_decimal(stored)}")
    lines.append(f"class      {codec.classify(stored, fmt)}")
    src = exact.parse_string(value)
    finite = lambda v: v == v and abs(v) != float("inf")  # noqa: E731
    if finite(stored) and (isinstance(src, float) and finite(src) or not isinstance(src, float)
                           and src.is_finite()):
        src = Fraction(src)
        diff = Fraction(stored) - src
        rel = f"{float(abs(diff) / abs(src)):.3e}" if src != 0 else "n/a"
        lines.append(f"error      {float(diff):+.6e} absolute, {rel} relative, "
                     f"{float(diff / Fraction(codec.ulp(stored, fmt))):+.4f} ulp")
    return "\n".join(lines)


def formats_table() -> str:
    """Text table of every registered format's facts, then the block-scaled formats'."""
    head = f"{'name':<14}{'bits':>5}{'exp':>4}{'man':>4}{'bias':>6}  {'max':>12} {'min normal':>12} " \
           f"{'min subnorm':>12} {'eps':>10}  inf  nan"
    rows = [head, "-" * len(head)]
    for name in formats():
        i = info(get_format(name))
        if i.kind == "int":
            rows.append(f"{name:<14}{i.bits:>5}{'-':>4}{'-':>4}{'-':>6}  {i.max:>12g} {'-':>12} {'-':>12} "
                        f"{'1':>10}  {'no':>3}  {'no':>3}   (min {i.min:g})")
            continue
        rows.append(f"{name:<14}{i.bits:>5}{i.nexp:>4}{i.nmant:>4}{i.bias:>6}  {i.max:>12.5g} "
                    f"{i.smallest_normal:>12.5g} {i.smallest_subnormal:>12.5g} {i.eps:>10.4g}  "
                    f"{'yes' if i.has_inf else 'no':>3}  {'yes' if i.nan_codes else 'no':>3}")
    rows += ["", f"{'block format':<14}{'element':>10}{'block':>7}{'scale':>10}{'tensor scale':>14}"
                 f"{'bits/element':>14}"]
    for name in block_formats():
        b = info(get_block_format(name))
        rows.append(f"{name:<14}{b.element:>10}{b.block_size:>7}{b.scale:>10}"
                    f"{b.tensor_scale or '-':>14}{b.bits_per_element:>14g}")
    return "\n".join(rows)


def explore(out=None, open_browser=True):
    """``floatfmt explore``: write the explorer page, print its path, open it."""
    import tempfile
    import webbrowser
    from pathlib import Path

    from .teach.explorer import write_explorer
    path = write_explorer(out if out is not None else Path(tempfile.gettempdir()) / "floatfmt-explorer.html")
    print(path)
    if open_browser:
        webbrowser.open(path.resolve().as_uri())
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="floatfmt", description="Bit-exact number formats of deep learning.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    s = sub.add_parser("show", help="show a value's bits and rounding in a format",
                       description="Round VALUE to FORMAT and show its code, exact stored value and error.")
    s.add_argument("value", help="a number: 0.1, -1e-5, 0x1.8p3, inf, nan (decimals are exact)")
    s.add_argument("format", help="a format name, e.g. bf16, fp8_e4m3, e5m10")
    s.add_argument("--rounding", "-r", default="nearest_even", help=f"one of {', '.join(MODES)}")
    s.add_argument("--overflow", default=None, help="inf, saturate or nan (default: the format's own)")
    i = sub.add_parser("info", help="the facts of one format (block formats too: mxfp4, nvfp4)",
                       description="Print the facts of FORMAT: numpy.finfo-style fields, or for a "
                                   "block-scaled format (OCP MX, NVFP4) its element format, block "
                                   "size, scale format and bits per element.")
    i.add_argument("format", help="a format name, e.g. bf16, fp8_e4m3, mxfp4, nvfp4")
    sub.add_parser("formats", help="table of every format's facts",
                   description="Print a table of every registered format.")
    t = sub.add_parser("tour", help="a narrated walk through the key facts (the main example)",
                       description="Print a guided tour of floatfmt with numbers computed on the spot.")
    t.add_argument("--figures", action="store_true", help="also write the figures")
    t.add_argument("--out", default="figures", help="folder for --figures (default figures/)")
    x = sub.add_parser("explore", help="write the explorer page and open it in a browser (offline)",
                       description="Write the explorer page (bits, rounding in every format, MX blocks) "
                                   "as one self-contained HTML file and open it in the default browser.")
    x.add_argument("--out", default=None,
                   help="file or folder to write (default: floatfmt-explorer.html in the temp folder)")
    x.add_argument("--no-open", action="store_true", help="only write the file and print its path")
    f = sub.add_parser("figures", help="write every figure as PNG",
                       description="Write the lesson figures as PNG files.")
    f.add_argument("--out", default="figures", help="output folder (default figures/)")
    tr = sub.add_parser("train", help="train the tiny MLP under a precision policy",
                        description="Train the tiny MLP under a precision policy and summarise.")
    tr.add_argument("--policy", default="bf16")
    tr.add_argument("--steps", type=int, default=None)
    g = sub.add_parser("gpu-report", help="compare recorded GPU fixtures with the emulator",
                       description="Compare recorded GPU outputs with floatfmt's predictions.")
    g.add_argument("dir", nargs="?", default=None, help="fixture folder (default: all committed)")
    g.add_argument("--show", type=int, default=5, help="mismatches to print per check")
    g.add_argument("--measured", action=argparse.BooleanOptionalAction, default=None,
                   help="also replay the published measured tensor-core data of "
                        "tests/data/hardware (default: only when no DIR is given)")
    c = sub.add_parser("course", help="teacher tools: release student copies, grade submissions",
                       description="Release student copies of the notebooks, or grade submitted ones.")
    csub = c.add_subparsers(dest="course_cmd", metavar="ACTION", required=True)
    cr = csub.add_parser("release", help="copy notebooks without solutions or answer keys")
    cr.add_argument("src")
    cr.add_argument("dest")
    cg = csub.add_parser("grade", help="run SUBMISSIONS/<student>/*.ipynb and grade the tagged answers")
    cg.add_argument("submissions")
    cg.add_argument("--out", default="scores.csv", help="scores file, .csv or .json (default scores.csv)")
    cg.add_argument("--timeout", type=float, default=60, help="seconds per cell (default 60)")
    cg.add_argument("--source", default=None, help="the assignment folder: which exercises each notebook has")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "show":
            print(show(args.value, args.format, args.rounding, args.overflow))
        elif args.cmd == "info":
            print(repr(info(args.format)))
        elif args.cmd == "formats":
            print(formats_table())
        elif args.cmd == "tour":
            from .teach.tour import run_tour
            run_tour(figures_out=args.out if args.figures else None)
        elif args.cmd == "explore":
            explore(args.out, not args.no_open)
        elif args.cmd == "figures":
            from .teach.plot import write_figures
            for path in write_figures(args.out):
                print(path)
        elif args.cmd == "train":
            from .training.loop import cli_train
            cli_train(args.policy, args.steps)
        elif args.cmd == "course":
            from .course.grading import cli_course
            return cli_course(args)
        elif args.cmd == "gpu-report":
            from .gpu.compare import report_main
            return report_main(args.dir, args.show, args.measured)
        else:
            _parser().print_help()
            return 2
    except (ValueError, TypeError) as err:
        print(f"floatfmt: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
