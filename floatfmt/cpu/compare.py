"""Replay a CPU capture (``tests/data/cpu/<cpu>/*.npz`` or the output of
``python -m floatfmt.cpu.capture``) against floatfmt's CPU presets: one row per section
with its output count and mismatches (per input kind where the capture records kinds).

============  ==============================================================================
section       floatfmt's prediction
============  ==============================================================================
amx_bf16      ``ff.mma(a, b, c, "bf16", "amx/bf16")`` (TDPBF16PS)
dp_bf16       ``ff.mma`` with ``"avx512/bf16"``, one pair per lane (VDPBF16PS)
cvt_bf16      ``cpuunits.vcvtneps2bf16`` (codes, NaN payloads included)
fp16_<op>     ``ff.add`` / ``mul`` / ``div`` / ``sqrt`` / ``fma`` in fp16
amx_int8      ``ff.mma(a, b, c, "int8", "amx/int8")`` (TDPBSSD, int32 wrap-around)
torch_mm      ``ff.matmul(a, b, "bf16", model="amx", out_fmt="bf16")``
============  ==============================================================================

A NaN output matches a NaN (values are compared; zeros by sign).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..arith.matrixunit import cpuunits
from ..core.cast import cast
from ..arith.ops import add, div, fma, mul, sqrt
from ..arith.matrixunit.tensorcore import mma
from ..arith.accumulate import matmul

__all__ = ["SectionResult", "replay", "format_results", "cpu_fixtures", "report_main"]


@dataclass
class SectionResult:
    section: str
    outputs: int
    mismatches: int
    per_kind: dict = field(default_factory=dict)


def _bf16(c):
    return (np.asarray(c).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _fp32(c):
    return np.asarray(c).astype(np.uint32).view(np.float32).astype(np.float64)


def _fp16(c):
    return np.asarray(c).astype(np.uint16).view(np.float16).astype(np.float64)


def _differ(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    return ~(both_nan | ((got == want) & (np.signbit(got) == np.signbit(want))))


def _row(name, bad, kinds=None) -> SectionResult:
    per = {}
    if kinds is not None:
        flat = bad.reshape(len(kinds), -1).any(-1)
        per = {str(k): int(flat[kinds == k].sum()) for k in np.unique(kinds)}
    return SectionResult(name, int(bad.size), int(bad.sum()), per)


# size: one table of sections, each a few lines
def replay(path) -> list:
    """Every section present in the capture ``path`` replayed (list of SectionResult)."""
    d = np.load(path)
    out = []
    if "amx_bf16_d" in d.files:
        got = mma(_bf16(d["amx_bf16_a"]), _bf16(d["amx_bf16_b"]), _fp32(d["amx_bf16_c"]),
                  "bf16", "amx/bf16")
        out.append(_row("amx_bf16", _differ(got, _fp32(d["amx_bf16_d"])), d["amx_bf16_kind"]))
    if "dp_bf16_d" in d.files:
        a, b = _bf16(d["dp_bf16_a"]).reshape(-1, 1, 2), _bf16(d["dp_bf16_b"]).reshape(-1, 2, 1)
        got = mma(a, b, _fp32(d["dp_bf16_c"])[:, None, None], "bf16", "avx512/bf16")[:, 0, 0]
        out.append(_row("dp_bf16", _differ(got, _fp32(d["dp_bf16_d"])), d["dp_bf16_kind"]))
    if "cvt_bf16_y" in d.files:
        codes = cpuunits.vcvtneps2bf16(d["cvt_bf16_x"])
        out.append(_row("cvt_bf16", codes != d["cvt_bf16_y"]))
        values = cast(d["cvt_bf16_x"].view(np.float32), "bf16", daz=True, dtype=np.float64)
        out.append(_row("cvt_bf16 (values, daz)", _differ(values, _bf16(d["cvt_bf16_y"]))))
    if "fp16_add" in d.files:
        a, b, c = (_fp16(d[f"fp16_{k}"]) for k in "abc")
        with np.errstate(all="ignore"):
            for op, got in (("add", add(a, b, "fp16")), ("mul", mul(a, b, "fp16")),
                            ("div", div(a, b, "fp16")), ("sqrt", sqrt(a, "fp16")),
                            ("fma", fma(a, b, c, "fp16"))):
                out.append(_row(f"fp16_{op}", _differ(got, _fp16(d[f"fp16_{op}"]))))
    if "amx_int8_d" in d.files:
        got = mma(d["amx_int8_a"], d["amx_int8_b"], d["amx_int8_c"], "int8", "amx/int8")
        out.append(_row("amx_int8", _differ(got, d["amx_int8_d"].astype(np.float64))))
    if "torch_mm_shapes" in d.files:
        for i, (M, N, K) in enumerate(d["torch_mm_shapes"]):
            got = matmul(_bf16(d[f"torch_mm_{i}_a"]), _bf16(d[f"torch_mm_{i}_b"]), "bf16",
                         model="amx/bf16", out_fmt="bf16")
            out.append(_row(f"torch_mm {M}x{N}x{K}",
                            _differ(got, _bf16(d[f"torch_mm_{i}_d"]))))
    return out


def format_results(name: str, results: list) -> str:
    lines = [f"{name}:"]
    for r in results:
        kinds = ", ".join(f"{k} {v}" for k, v in r.per_kind.items())
        lines.append(f"  {r.section:<24} {r.outputs:>8} outputs  {r.mismatches:>6} differ"
                     + (f"  ({kinds})" if kinds else ""))
    return "\n".join(lines)


def cpu_fixtures() -> list:
    """The committed CPU captures (``tests/data/cpu/*/*.npz`` of the source tree)."""
    root = Path(__file__).resolve().parents[2] / "tests" / "data" / "cpu"
    return sorted(root.glob("*/*.npz"))


def report_main(paths=None) -> int:
    """``floatfmt hw-report``: replay the given captures (files or folders; default: the
    committed ones); exit status 1 if any output differs."""
    files = []
    for p in paths or []:
        p = Path(p)
        files += sorted(p.glob("*.npz")) if p.is_dir() else [p]
    if not paths:
        files = cpu_fixtures()
    if not files:
        print("no CPU captures found")
        return 1
    bad = 0
    for f in files:
        res = replay(f)
        bad += sum(r.mismatches for r in res)
        print(format_results(str(f), res))
    print("every output reproduced" if not bad else f"{bad} outputs differ")
    return 1 if bad else 0
