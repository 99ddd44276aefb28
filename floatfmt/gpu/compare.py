"""Replay recorded GPU fixtures against the emulator and report, check by check.

``floatfmt gpu-report [DIR] [--show N]`` calls ``report_main``.  For every check
of every fixture it recomputes floatfmt's prediction from the recorded inputs
(with the emulator as it is now, not as it was at capture time) and counts
bit-exact matches.  NaN results match by class (any NaN code matches any NaN
code; the codes seen are recorded in the fixture).  A mismatch listed in the
fixture's ``expected_differences.txt`` is reported as expected, with its reason.

Check kinds (``kind`` in ``summary.json``):

``cast``   inputs (codes of ``src``) -> outputs (codes of ``dst``), under the
           recorded ``overflow`` policy.
``sweep``  the all-2^32 float32 sweep: only the mismatch count and the first
           mismatching inputs are stored; those are replayed.
``gemm``   dot products through the tensor-core model: ``form="dots"`` (row i of
           ``a`` with row i of ``b``), ``form="matmul"`` (``a @ b``) or
           ``form="random"`` (operands regenerated from seeds, see
           ``probes.random_operands``).
``blockscaled``  Blackwell block-scaled MMA probes: element and scale codes per
           probe, replayed through ``tensorcore.block_scaled_mma`` with the
           recorded preset (``params["model"]``); outputs are fp32 codes.

Beside the fixtures the capture makes, ``replay_measured`` replays published
measured tensor-core output: the model-validation data of Khattak and Mikaitis
(``tests/data/hardware/``, BSD 2-Clause), 5,000 single-instruction products
``d = a . b + c`` per GPU, input format and output format, each row through
``ff.mma`` with the GPU's preset.  A set the presets claim must match in every
row; a set listed as open in the data's ``manifest.json`` must give exactly the
mismatch count recorded there (so a change either way is seen and the
documentation updated).
"""

from __future__ import annotations

import json
import textwrap
import time
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

import numpy as np

from ..core.cast import cast
from ..core.codec import code_dtype, codes_to_values, values_to_codes
from ..core.formats import get_format, hex_code
from . import probes as P
from .fixture import Fixture, default_root, find_fixtures

__all__ = ["Mismatch", "CheckResult", "predict_cast", "same_bits", "predict_gemm", "predict_dots",
           "tensorcore_available", "compare_check", "compare_fixture", "format_report",
           "report_main", "FP8_PROMOTION_INTERVAL", "MeasuredResult", "measured_root",
           "replay_measured", "format_measured"]



# ----------------------------------------------------------------------------- predictions
def predict_cast(codes, src, dst, overflow=None) -> np.ndarray:
    """floatfmt's codes for casting codes of ``src`` to ``dst`` (round to nearest even).

    >>> predict_cast(np.array([0x43E80000], np.uint32), "fp32", "fp8_e4m3").tolist()  # 464.0
    [126]
    >>> predict_cast(np.array([0x43E80001], np.uint32), "fp32", "fp8_e4m3", "saturate").tolist()
    [126]
    """
    src, dst = get_format(src), get_format(dst)
    x = codes_to_values(np.asarray(codes, np.int64), src)
    return values_to_codes(cast(x, dst, overflow=overflow, dtype=np.float64), dst)


def same_bits(gpu, pred, fmt) -> np.ndarray:
    """Elementwise: identical codes, or both NaN (NaNs compare by class)."""
    fmt = get_format(fmt)
    gpu = np.asarray(gpu)
    pred = np.asarray(pred)
    eq = gpu.astype(np.int64) == pred.astype(np.int64)
    if fmt.has_nan and not eq.all():
        with np.errstate(invalid="ignore"):
            gv = codes_to_values(gpu.astype(np.int64), fmt)
            pv = codes_to_values(pred.astype(np.int64), fmt)
        eq |= np.isnan(gv) & np.isnan(pv)
    return eq


def nan_codes(codes, fmt) -> list[int]:
    """Distinct NaN codes among ``codes``."""
    fmt = get_format(fmt)
    c = np.asarray(codes).astype(np.int64)
    with np.errstate(invalid="ignore"):
        v = codes_to_values(c, fmt)
    return sorted(int(x) for x in np.unique(c[np.isnan(v)]))


def tensorcore_available() -> bool:
    """True when the tensor-core models (``floatfmt.arith.matrixunit.tensorcore``) are present."""
    try:
        for name in ("arith.accumulate", "arith.matrixunit.tensorcore"):
            import_module(f"..{name}", __package__)
    except ImportError:
        return False
    return True


# cuBLAS does not document when FP8 GEMMs without fast accumulation promote the
# tensor core's partial sums into fp32 registers; DeepSeek-V3 (section 3.3.2) promotes
# every 128 elements.  The promotion probes measure it; a fixture may record the
# measured value as params["promotion_interval"].
FP8_PROMOTION_INTERVAL = 128


def predict_gemm(a, b, params: dict) -> np.ndarray:
    """floatfmt's output codes for ``a @ b`` (float64 operand values) under a check's
    parameters: ``in_fmt``, ``out_fmt``, ``model`` (a tensor-core preset such as
    ``"h100"``), ``tf32`` (False: a plain fp32 GEMM, no tensor core) and, for FP8,
    ``fast_accum``.

    FP8 with ``fast_accum=False`` on a model whose steps keep 13 fraction bits: K is
    cut into intervals of ``promotion_interval`` (default ``FP8_PROMOTION_INTERVAL``);
    each interval is chained through the tensor-core model from zero and its result
    added to an fp32 accumulator with an fp32 add (round to nearest even).  Then the
    epilogue rounds to ``out_fmt`` (nearest even).
    """
    from ..arith.accumulate import matmul
    out_fmt = get_format(params["out_fmt"])
    in_fmt = params["in_fmt"]
    if in_fmt == "fp32" or not params.get("tf32", True):
        r = matmul(a, b, "fp32", acc_fmt="fp32")
    else:
        from ..arith.matrixunit.tensorcore import get_model
        model = get_model(params["model"], in_fmt)
        if in_fmt.startswith("fp8") and params.get("fast_accum") is False and model.step_fmt is not None:
            from ..arith.ops import add
            n = int(params.get("promotion_interval") or FP8_PROMOTION_INTERVAL)
            total = np.zeros((a.shape[0], b.shape[1]))
            for k0 in range(0, a.shape[1], n):
                part = matmul(a[:, k0:k0 + n], b[k0:k0 + n], in_fmt, model=model)
                total = add(total, part, "fp32")
            r = cast(total, out_fmt, dtype=np.float64)
        else:
            r = matmul(a, b, in_fmt, model=model, out_fmt=out_fmt.name)
    return values_to_codes(np.asarray(r, np.float64), out_fmt)


def predict_dots(a, b, params: dict) -> np.ndarray:
    """Codes of the dot products of row i of ``a`` with row i of ``b``."""
    out = np.empty(a.shape[0], code_dtype(get_format(params["out_fmt"])))
    for i in range(a.shape[0]):
        out[i] = predict_gemm(a[i:i + 1], b[i][:, None], params)[0, 0]
    return out


# ----------------------------------------------------------------------------- results
@dataclass
class Mismatch:
    key: str  # what expected_differences.txt names (input code, probe name, part:row,col)
    inputs: str  # human-readable inputs
    gpu: str
    predicted: str
    reason: str | None = None  # from expected_differences.txt


@dataclass
class CheckResult:
    name: str
    kind: str
    cases: int = 0
    matches: int = 0
    mismatches: list = field(default_factory=list)  # Mismatch records (all of them)
    extra_mismatches: int = 0  # mismatches counted but not replayable (sweep beyond the stored ones)
    status: str = "ok"  # ok, expected (every mismatch listed), mismatch, not compared, error
    note: str = ""
    diagnosis: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def n_mismatch(self) -> int:
        return len(self.mismatches) + self.extra_mismatches

    @property
    def n_expected(self) -> int:
        return sum(m.reason is not None for m in self.mismatches)

    @property
    def n_unexplained(self) -> int:
        return self.n_mismatch - self.n_expected

    @property
    def ok(self) -> bool:
        return self.status != "error" and self.n_unexplained == 0


def _fmt_code(code, fmt) -> str:
    fmt = get_format(fmt)
    v = float(codes_to_values(np.int64(code), fmt))
    return f"{hex_code(code, fmt)} ({v!r})"


# ----------------------------------------------------------------------------- per kind
def _compare_cast(fx: Fixture, chk: dict, res: CheckResult):
    p = chk["params"]
    src, dst = get_format(p["src"]), get_format(p["dst"])
    x = fx.array(chk["arrays"]["inputs"])
    gpu = fx.array(chk["arrays"]["outputs"])
    pred = predict_cast(x, src, dst, p.get("overflow"))
    ok = same_bits(gpu, pred, dst)
    res.cases, res.matches = int(x.size), int(ok.sum())
    for i in np.flatnonzero(~ok):
        key = hex_code(x[i], src)
        res.mismatches.append(Mismatch(key, f"{key} = {float(codes_to_values(np.int64(x[i]), src))!r}",
                                       _fmt_code(gpu[i], dst), _fmt_code(pred[i], dst)))
    _nan_diag(p, dst, res)


def _nan_diag(p, dst, res):
    if p.get("nan_codes"):
        more = p.get("nan_codes_distinct", len(p["nan_codes"])) - len(p["nan_codes"])
        res.diagnosis["nan_codes"] = " ".join(hex_code(c, dst) for c in p["nan_codes"]) + (
            f" and {more} more" if more > 0 else "")
    if p.get("nan_payload_kept") is not None:
        res.diagnosis["nan_payloads"] = (f"of {p.get('nan_inputs')} NaN inputs, {p['nan_payload_kept']} kept "
                                         f"their bits, {p.get('nan_payload_quieted', 0)} kept them quieted")
    if p.get("overflow") and p.get("overflow") != dst.default_overflow:
        text = f"{p['overflow']} (device: {p.get('overflow_evidence', '?')}"
        if p.get("mismatches_with_default_overflow") is not None:
            text += (f"; {p['mismatches_with_default_overflow']} mismatches under the format's own "
                     f"'{dst.default_overflow}'")
        res.diagnosis["overflow"] = text + ")"


def _compare_sweep(fx: Fixture, chk: dict, res: CheckResult):
    p = chk["params"]
    src, dst = get_format(p["src"]), get_format(p["dst"])
    res.cases = int(p.get("cases", 0))
    counted = int(p.get("mismatches", 0))
    x = fx.array(chk["arrays"]["inputs"]) if "inputs" in chk.get("arrays", {}) else np.zeros(0, np.uint32)
    gpu = fx.array(chk["arrays"]["outputs"]) if x.size else np.zeros(0, np.uint16)
    if x.size:
        pred = predict_cast(x, src, dst, p.get("overflow"))
        ok = same_bits(gpu, pred, dst)
        for i in np.flatnonzero(~ok):
            key = hex_code(x[i], src)
            res.mismatches.append(Mismatch(key, f"{key} = {float(codes_to_values(np.int64(x[i]), src))!r}",
                                           _fmt_code(gpu[i], dst), _fmt_code(pred[i], dst)))
    res.extra_mismatches = max(0, counted - int(x.size))
    res.matches = res.cases - res.n_mismatch
    done, total = p.get("chunks_done"), p.get("chunks_total")
    res.note = (f"{counted} mismatches at capture (emulator {p.get('emulator', '?')}); "
                f"{x.size} stored and replayed")
    if done is not None and total and done < total:
        res.note += f"; only {done} of {total} chunks were swept"
    if res.extra_mismatches:
        res.note += f"; {res.extra_mismatches} beyond the stored ones cannot be replayed: rerun the capture"
    _nan_diag(p, dst, res)


def _compare_gemm(fx: Fixture, chk: dict, res: CheckResult):
    p = chk["params"]
    if not tensorcore_available() and p.get("tf32", True) is not False:
        res.status = "not compared"
        res.note = "floatfmt.arith.matrixunit.tensorcore is not available"
        return
    in_fmt, out_fmt = p["in_fmt"], get_format(p["out_fmt"])
    form = p.get("form", "dots")
    arr = chk.get("arrays", {})
    if form == "dots":
        a = P.operand_values(fx.array(arr["a"]), in_fmt if p.get("tf32", True) else "fp32")
        b = P.operand_values(fx.array(arr["b"]), in_fmt if p.get("tf32", True) else "fp32")
        gpu = fx.array(arr["out"])
        names = p.get("probes") or [f"row{i}" for i in range(a.shape[0])]
        pred = predict_dots(a, b, p)
        ok = same_bits(gpu, pred, out_fmt)
        res.cases, res.matches = int(gpu.size), int(ok.sum())
        for i in np.flatnonzero(~ok):
            res.mismatches.append(Mismatch(names[i], f"probe {names[i]}", _fmt_code(gpu[i], out_fmt),
                                           _fmt_code(pred[i], out_fmt)))
        if p.get("probe_kinds"):
            vals = lambda c: codes_to_values(np.asarray(c, np.int64), out_fmt)  # noqa: E731
            metas = p.get("probe_meta") or {}
            res.diagnosis = {"gpu": P.diagnose_probes(names, p["probe_kinds"], p["probe_params"],
                                                      vals(gpu), p["k"], metas),
                             "emulator": P.diagnose_probes(names, p["probe_kinds"], p["probe_params"],
                                                           vals(pred), p["k"], metas)}
        if p.get("tf32_modes") is not None:
            n = int(gpu.size)
            every = [m for m, c in p["tf32_modes"].items() if c == n]
            res.diagnosis["tf32_operands"] = (
                "every result is explained by " + " or ".join(
                    "fp32 operands kept unchanged" if m == "unchanged" else f"tf32_operands={m!r}" for m in every)
                if every else "no single operand rounding explains the results: "
                + ", ".join(f"{m} {c}/{n}" for m, c in p["tf32_modes"].items()))
        return
    # matmul / random: parts, each a whole GEMM
    for j, part in enumerate(p["parts"]):
        if form == "random":
            ac, bc = P.random_operands(part["seed"], in_fmt, part["m"], part["k"], part["n"],
                                       part.get("spread", 20))
        else:
            ac, bc = fx.array(part["a"]), fx.array(part["b"])
        gpu = fx.array(part["out"])
        a, b = P.operand_values(ac, in_fmt), P.operand_values(bc, in_fmt)
        pred = predict_gemm(a, b, p)
        ok = same_bits(gpu, pred, out_fmt)
        res.cases += int(ok.size)
        res.matches += int(ok.sum())
        for i, c in zip(*np.nonzero(~ok)):
            key = f"part{j}:r{int(i)}c{int(c)}"
            res.mismatches.append(Mismatch(key, f"part {j} (k={part['k']}) row {int(i)} col {int(c)}",
                                           _fmt_code(gpu[i, c], out_fmt), _fmt_code(pred[i, c], out_fmt)))
    det = [part.get("run2_differs", 0) for part in p["parts"]]
    if any(det):
        res.note = (res.note + "; " if res.note else "") + f"not deterministic: run 2 differed in {sum(det)} outputs"


def _compare_blockscaled(fx: Fixture, chk: dict, res: CheckResult):
    from ..arith.matrixunit.tensorcore import block_scaled_mma, tensorcore_models
    p, arr = chk["params"], chk.get("arrays", {})
    m = tensorcore_models()[p["model"]]
    elem, sfmt = get_format(m.fmt), get_format(m.scale_fmt or "e8m0")
    a, b = (codes_to_values(fx.array(arr[k]).astype(np.int64), elem) for k in ("a", "b"))
    sa, sb = (codes_to_values(fx.array(arr[k]).astype(np.int64), sfmt) for k in ("a_scale", "b_scale"))
    gpu = fx.array(arr["out"])
    pred = block_scaled_mma(a[:, None, :], sa[:, None, :], b[:, :, None], sb[:, :, None], 0.0, m)
    pred = P.f32_codes(pred[:, 0, 0])
    ok = same_bits(gpu, pred, get_format("fp32"))
    names = p.get("probes") or [f"row{i}" for i in range(gpu.size)]
    res.cases, res.matches = int(gpu.size), int(ok.sum())
    for i in np.flatnonzero(~ok):
        res.mismatches.append(Mismatch(names[i], f"probe {names[i]}", _fmt_code(gpu[i], "fp32"),
                                       _fmt_code(pred[i], "fp32")))


def compare_check(fx: Fixture, chk: dict) -> CheckResult:
    """Compare one recorded check with the emulator."""
    res = CheckResult(chk["name"], chk["kind"])
    t = time.perf_counter()
    if chk.get("status") in ("error", "skipped"):
        res.status = "not compared"
        res.note = f"capture {chk['status']}: {chk.get('error', '')}".strip()
        return res
    try:
        if chk["kind"] == "cast":
            _compare_cast(fx, chk, res)
        elif chk["kind"] == "sweep":
            _compare_sweep(fx, chk, res)
        elif chk["kind"] == "gemm":
            _compare_gemm(fx, chk, res)
        elif chk["kind"] == "blockscaled":
            _compare_blockscaled(fx, chk, res)
        else:
            res.status, res.note = "error", f"unknown check kind {chk['kind']!r}"
    except Exception as err:  # a broken check must not hide the others
        res.status, res.note = "error", f"{type(err).__name__}: {err}"
    for m in res.mismatches:
        e = fx.expected_for(res.name, m.key)
        if e is not None:
            m.reason = e.reason
    if res.status == "ok" and res.n_mismatch:
        res.status = "mismatch" if res.n_unexplained else "expected"
    res.seconds = time.perf_counter() - t
    return res


def compare_fixture(fixture) -> list[CheckResult]:
    """Compare every check of a fixture (a path or a ``Fixture``) with the emulator."""
    fx = fixture if isinstance(fixture, Fixture) else Fixture(fixture)
    return [compare_check(fx, chk) for chk in fx.checks]


def unused_expected(fx: Fixture, results: list[CheckResult]) -> list:
    """Lines of expected_differences.txt that no mismatch needed (stale entries)."""
    used = set()
    for r in results:
        for m in r.mismatches:
            for e in fx.expected:
                if e.covers(r.name, m.key):
                    used.add(e.line)
                    break
    return [e for e in fx.expected if e.line not in used]


# ----------------------------------------------------------------------------- report
def _header(fx: Fixture) -> list[str]:
    s = fx.summary
    dev = s.get("device", {})
    ver = s.get("versions", {})
    ev = s.get("evidence", "?")
    lines = [f"fixture {fx.name}  [{'GPU' if ev == 'gpu' else 'CPU (not GPU evidence)' if ev == 'cpu' else ev}]"]
    lines.append("  device   " + ", ".join(f"{k} {v}" for k, v in dev.items() if v not in (None, "")))
    lines.append("  versions " + ", ".join(f"{k} {v}" for k, v in ver.items() if v not in (None, "")))
    if s.get("created"):
        lines.append(f"  captured {s['created']}")
    return lines


def format_report(fx: Fixture, results: list[CheckResult], show: int = 5) -> str:
    """Text report: a table of checks, then the first mismatches of each."""
    lines = _header(fx)
    w = max([len(r.name) for r in results] + [5])
    lines.append("")
    lines.append(f"  {'check':<{w}} {'cases':>10} {'matches':>10} {'mismatches':>10} {'expected':>8}  status")
    for r in results:
        lines.append(f"  {r.name:<{w}} {r.cases:>10} {r.matches:>10} {r.n_mismatch:>10} "
                     f"{r.n_expected:>8}  {r.status}{'  ' + r.note if r.note else ''}")
    for r in results:
        diag = {k: v for k, v in r.diagnosis.items() if v}
        if diag:
            lines.append(f"\n  {r.name}: " + "; ".join(f"{k} = {v}" for k, v in diag.items()))
        if not r.mismatches or show <= 0:
            continue
        lines.append(f"\n  first mismatches of {r.name}:")
        for m in r.mismatches[:show]:
            why = f"  [expected: {m.reason}]" if m.reason else ""
            lines.append(f"    {m.inputs}: gpu {m.gpu}, predicted {m.predicted}{why}")
        if len(r.mismatches) > show:
            lines.append(f"    ... {len(r.mismatches) - show} more")
    stale = unused_expected(fx, results)
    for e in stale:
        lines.append(f"\n  note: expected_differences.txt line {e.line} ({e.check} {e.selector}) "
                     "matches no mismatch any more")
    devdiff = fx.summary.get("device_differences")
    if devdiff:
        lines.append("\n  CPU torch vs CUDA:")
        for k, v in devdiff.items():
            lines.append(f"    {k}: {v}")
    timings = (fx.summary.get("torch_path") or {}).get("timings")
    if timings:
        from .sections.speed import format_timings
        lines.append(f"\n  speed on {timings.get('device', 'the device')} (floatfmt's torch path; "
                     "not checks):")
        lines += [f"    {line}" for line in format_timings(timings)]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- measured data
MEASURED_FILE = "km_tensorcore.npz"
MEASURED_MANIFEST = "manifest.json"


def measured_root() -> Path:
    """``tests/data/hardware`` of the source tree this package was imported from."""
    return default_root().parent / "hardware"


@dataclass
class MeasuredResult:
    """One (GPU, input format, output format) set of the measured data, replayed."""

    gpu: str
    fmt: str
    out_fmt: str
    model: str  # the preset used (with "+fp16acc" for fp16 outputs)
    cases: int
    mismatches: int
    expected: int | None  # None: the presets claim the set (0 mismatches); else the open count
    c_used: bool
    note: str = ""
    first: list = field(default_factory=list)  # (row, gpu value, predicted value) of mismatches

    @property
    def claimed(self) -> bool:
        return self.expected is None

    @property
    def ok(self) -> bool:
        return self.mismatches == (0 if self.expected is None else self.expected)

    @property
    def status(self) -> str:
        if self.claimed:
            return "verified" if self.ok else "REGRESSED"
        if self.mismatches == 0:
            return "NOW MATCHES: claim it (update manifest.json and the README)"
        return "open" if self.ok else f"open, count CHANGED (recorded {self.expected})"


def _load_measured(root):
    root = Path(root) if root is not None else measured_root()
    if not (root / MEASURED_FILE).exists():
        return None, None
    manifest = json.loads((root / MEASURED_MANIFEST).read_text())
    return manifest, np.load(root / MEASURED_FILE)


def replay_measured(root=None, gpus=None) -> list[MeasuredResult]:
    """Replay every measured set under ``root`` (default ``measured_root()``) through
    ``ff.mma``: row i is ``a[i] (1 x K) @ b[i] (K x 1) + c[i]`` with the GPU's preset,
    ``acc_fmt`` the output format, and c = 0 where the set records that the instruction
    ran with a zero accumulator.  ``gpus``: only these GPU names.  [] when there is no data."""
    from ..arith.matrixunit.tensorcore import get_model, mma
    manifest, z = _load_measured(root)
    if manifest is None:
        return []
    open_sets = manifest.get("open", {})
    out = []
    for s in manifest["sets"]:
        if gpus is not None and s["gpu"] not in gpus:
            continue
        a = P.operand_values(z[s["a"]], s["fmt"])
        b = P.operand_values(z[s["b"]], s["fmt"])
        c = P.f32_values(z[s["c"]])
        for out_name, o in s["outputs"].items():
            out_fmt = get_format(out_name)
            gpu = codes_to_values(np.asarray(z[o["d"]], np.int64), out_fmt)
            cc = c if o["c_used"] else np.zeros_like(c)
            pred = mma(a[:, None, :], b[:, :, None], cc[:, None, None], s["fmt"], s["model"],
                       acc_fmt=out_name)[:, 0, 0]
            ok = same_bits(values_to_codes(gpu, out_fmt), values_to_codes(pred, out_fmt), out_fmt)
            key = f"{s['gpu']}/{s['fmt']}/{out_name}"
            entry = open_sets.get(key)
            bad = np.flatnonzero(~ok)
            out.append(MeasuredResult(
                s["gpu"], s["fmt"], out_name, get_model(s["model"], s["fmt"], out_name).name,
                int(ok.size), int(bad.size), None if entry is None else int(entry["mismatches"]),
                bool(o["c_used"]), o.get("note", "") or ("" if entry is None else entry.get("note", "")),
                [(int(i), float(gpu[i]), float(pred[i])) for i in bad[:20]]))
    return out


def format_measured(results: list[MeasuredResult], show: int = 0, root=None) -> str:
    """Text table of ``replay_measured`` results (``show``: mismatching rows per set)."""
    manifest, _ = _load_measured(root)
    if not results or manifest is None:
        return "measured data: none found under " + str(root if root is not None else measured_root())
    gpus = sorted({r.gpu for r in results}, key=[s["gpu"] for s in manifest["sets"]].index)
    lines = [f"measured tensor-core output: {manifest.get('title', 'published data')}  [GPU]",
             f"  source   {manifest.get('source', '?')}",
             f"  licence  {manifest.get('licence', '?')}",
             f"  {len(gpus)} GPUs ({', '.join(gpus)}); one matrix instruction per row, "
             "replayed through ff.mma", ""]
    lines.append(f"  {'GPU':<5} {'inputs':<9} {'output':<6} {'model':<22} {'rows':>5} "
                 f"{'mismatches':>10}  status")
    for r in results:
        lines.append(f"  {r.gpu:<5} {r.fmt:<9} {r.out_fmt:<6} {r.model:<22} {r.cases:>5} "
                     f"{r.mismatches:>10}  {r.status}{'' if r.c_used else '  (c = 0: as measured)'}")
    for r in results:
        if show > 0 and r.first and not r.ok:
            lines.append(f"\n  first mismatches of {r.gpu} {r.fmt} -> {r.out_fmt}:")
            for i, g, p in r.first[:show]:
                lines.append(f"    row {i}: gpu {g!r}, predicted {p!r}")
    for k, v in manifest.get("open", {}).items():
        lines.append("")
        lines += textwrap.wrap(f"open {k}: {v.get('note', '')}", 96, initial_indent="  ",
                               subsequent_indent="    ")
    return "\n".join(lines)


def report_main(dir=None, show: int = 5, measured=None) -> int:
    """Entry of ``floatfmt gpu-report``: report every fixture under ``dir`` (default:
    the committed ones) and, when ``measured`` (default: when ``dir`` is None), the
    published measured data (``replay_measured``).  Exit code 0 when every mismatch is
    expected, 1 when some is not (or a check errored, or a measured set is off its
    recorded count), 2 when there is no fixture."""
    paths = find_fixtures(dir)
    code = 0
    if measured if measured is not None else dir is None:
        res = replay_measured()
        print(format_measured(res, show))
        print()
        if not all(r.ok for r in res):
            code = 1
    if not paths:
        where = dir if dir is not None else "tests/data/gpu"
        print(f"no GPU fixtures found under {where} (a fixture is a folder with summary.json; "
              "see docs/gpu_capture.md)")
        return 2
    for path in paths:
        fx = Fixture(path)
        results = compare_fixture(fx)
        print(format_report(fx, results, show))
        print()
        if not all(r.ok for r in results):
            code = 1
    return code
