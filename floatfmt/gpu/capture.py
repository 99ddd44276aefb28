"""Capture what a CUDA GPU does to numbers, next to floatfmt's prediction.

Run on a machine with torch and CUDA (see ``docs/gpu_capture.md``)::

    python -m floatfmt.gpu.capture --out DIR            # the whole capture, < 6 min on an H200
    python -m floatfmt.gpu.capture --out DIR --dry-run  # torch on the CPU, tiny GEMMs: a test run

Sections (each in its own try/except; results are saved after every one):

1. ``casts``: float32 -> fp16, bf16, fp8_e4m3, fp8_e5m2 on the GPU and with torch
   on the CPU for the structured input sets of ``probes.structured_cast_inputs``
   (stored in full), and fp16/bf16 -> float32 for every code.
   ``sweep``: the same four casts for all 2^32 float32 patterns, compared with
   floatfmt in parallel worker processes chunk by chunk; only mismatch counts,
   the first mismatches and the NaN codes seen are kept.
2. ``tf32``: fp32 matmuls with TF32 off and on for ``probes.tf32_operand_values``,
   on either operand, telling truncation, RNE and RNA apart.
3. ``probes``: the reference file's GEMM probes for fp16, bf16, tf32 and FP8
   (``torch._scaled_mm`` with unit scales, fast accumulation on and off) at
   K = L, 2L, 4L, fp32 and 16-bit outputs, 64 x K x 64 shapes; FP8 promotion
   interval probes.
4. ``random``: per input and output format, 6 matmuls 64 x K x 64 of random
   operands (K from 16 to 4096): 24,576 dot products, each matmul run twice.

Writes into DIR: ``summary.json`` (device, versions, settings, one record per
check with its inputs, GPU output codes and the emulator's prediction as array
references, counts), ``casts.npz``, ``sweep.npz``, ``matmul.npz`` and a draft
``README.md``.  The summary table (check, cases, matches, mismatches) is
printed last.

This module imports torch only inside functions, so it can be imported (and
its helpers tested) where torch is missing.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .._version import __version__ as FLOATFMT_VERSION
from .._cast import cast
from ..codec import code_dtype, codes_to_values, values_to_codes
from .._formats import get_format
from . import probes as P
from .compare import nan_codes, predict_cast, predict_dots, predict_gemm, same_bits, tensorcore_available
from .fixture import FixtureWriter, array_key

__all__ = ["main", "CAST_TARGETS", "nan_summary", "preset_for_capability", "model_blocks", "sweep_order",
           "choose_overflow", "random_plan", "GEMM_CONFIGS", "summary_table", "slug"]

CAST_TARGETS = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16",
                "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "tf32": "float32"}
# (input format, output format, fast_accum) for probes and random GEMMs.
GEMM_CONFIGS = (("fp16", "fp32", None), ("fp16", "fp16", None),
                ("bf16", "fp32", None), ("bf16", "bf16", None),
                ("tf32", "fp32", None),
                ("fp8_e4m3", "fp32", True), ("fp8_e4m3", "fp32", False),
                ("fp8_e4m3", "bf16", True), ("fp8_e4m3", "bf16", False),
                ("fp8_e5m2", "fp32", True), ("fp8_e5m2", "fp32", False),
                ("fp8_e5m2", "bf16", True), ("fp8_e5m2", "bf16", False))
PROMOTION_POSITIONS = {1024: (0, 1, 31, 32, 63, 64, 100, 127, 128, 129, 255, 256, 511, 512, 1000),
                       4096: (0, 128, 1024, 2048)}
_CAPABILITY_PRESETS = {(7, 0): "v100", (7, 5): "t4", (8, 0): "a100", (8, 6): "a100", (8, 7): "a100",
                       (8, 9): "ada", (9, 0): "h100", (10, 0): "b200"}


# ============================================================================ pure helpers
def slug(text: str) -> str:
    """A file-name-safe lower-case slug.

    >>> slug("NVIDIA H200 NVL")
    'nvidia-h200-nvl'
    """
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def preset_for_capability(cap) -> str:
    """Tensor-core preset for a CUDA compute capability (major, minor).

    >>> preset_for_capability((9, 0)), preset_for_capability((8, 9)), preset_for_capability((12, 0))
    ('h100', 'ada', 'b200')
    """
    cap = tuple(int(c) for c in cap)
    if cap in _CAPABILITY_PRESETS:
        return _CAPABILITY_PRESETS[cap]
    return "b200" if cap >= (10, 0) else "h100" if cap >= (9, 0) else "a100"


def model_blocks(model: str) -> dict:
    """Block size L per input format of a tensor-core preset (the reference file's
    H100 values when floatfmt.tensorcore is missing or lacks the format)."""
    out = dict(P.DEFAULT_BLOCKS)
    try:
        from ..tensorcore import get_model
    except ImportError:
        return out
    for fmt in out:
        try:
            out[fmt] = get_model(model, fmt).L
        except (ValueError, TypeError):
            pass
    return out


def sweep_order(n_chunks: int) -> list[int]:
    """Chunk indices in bit-reversed order, so a sweep cut short still samples
    every region of the 2^32 patterns evenly.

    >>> sweep_order(8)
    [0, 4, 2, 6, 1, 5, 3, 7]
    """
    bits = max(1, (n_chunks - 1).bit_length())
    order = sorted(range(1 << bits), key=lambda i: int(format(i, f"0{bits}b")[::-1], 2))
    return [i for i in order if i < n_chunks]


def nan_summary(inputs, outputs, src, dst, limit: int = 16) -> dict:
    """What a device did with NaNs: the distinct NaN output codes (at most ``limit``
    listed), how many there are, and, for widening casts, how many NaN outputs
    kept the input's bits (payload shifted up) and how many kept them with the
    quiet bit set.

    >>> r = nan_summary(np.array([0x7E01, 0x7D00], np.uint16), np.array([0x7FC02000, 0x7FE00000], np.uint32),
    ...                 "fp16", "fp32")
    >>> r["nan_codes_distinct"], r["nan_payload_kept"], r["nan_payload_quieted"]
    (2, 1, 1)
    """
    src, dst = get_format(src), get_format(dst)
    codes = nan_codes(outputs, dst)
    out = {"nan_codes": codes[:limit], "nan_codes_distinct": len(codes)}
    with np.errstate(invalid="ignore"):
        nin = np.isnan(codes_to_values(np.asarray(inputs).astype(np.int64), src))
    out["nan_inputs"] = int(nin.sum())
    if dst.bits > src.bits and dst.nan == src.nan == "ieee" and nin.any():
        c = np.asarray(inputs).astype(np.int64)[nin]
        sign = (c >> (src.bits - 1)) & 1
        payload = c & ((1 << src.mbits) - 1)
        shifted = ((sign << (dst.bits - 1)) | (((1 << dst.ebits) - 1) << dst.mbits)
                   | (payload << (dst.mbits - src.mbits)))
        got = np.asarray(outputs).astype(np.int64)[nin]
        out["nan_payload_kept"] = int((got == shifted).sum())
        out["nan_payload_quieted"] = int(((got == (shifted | (1 << (dst.mbits - 1)))) & (got != shifted)).sum())
    return out


def choose_overflow(target: str, outputs: dict) -> tuple[str, str]:
    """The overflow policy that explains a device's outputs for the overflow probe
    inputs (1e6, +Inf, 2 * max): ``saturate`` when they give +-max, else the
    format's own.  Returns (policy, evidence text).

    >>> choose_overflow("fp8_e4m3", {1e6: 0x7E, float("inf"): 0x7E})
    ('saturate', '1000000.0 -> 0x7e, inf -> 0x7e')
    >>> choose_overflow("fp8_e4m3", {1e6: 0x7F, float("inf"): 0x7F})[0]
    'nan'
    """
    fmt = get_format(target)
    mx = int(values_to_codes(np.float64(fmt.max), fmt))
    ev = ", ".join(f"{k!r} -> 0x{int(v):x}" for k, v in outputs.items())
    if outputs and all(int(v) == mx for v in outputs.values()):
        return "saturate", ev
    return fmt.default_overflow, ev


def random_plan(in_fmt: str, out_fmt: str, fast, dry: bool = False) -> list[dict]:
    """The random GEMMs of one configuration: 6 matmuls 64 x K x 64 (K: 16, 4096 and
    four log-uniform multiples of 16 in between), seeds fixed by the configuration,
    so the same plan gives the same operands everywhere.  Dry runs: 3 tiny ones.

    >>> [p["k"] for p in random_plan("bf16", "fp32", None)][:2]
    [16, 4096]
    >>> sum(p["m"] * p["n"] for p in random_plan("bf16", "fp32", None))
    24576
    """
    base = sum((i + 1) * ord(c) for i, c in enumerate(f"{in_fmt}/{out_fmt}/{fast}")) * 1000
    if dry:
        return [{"seed": base + j, "m": 16, "k": k, "n": 16, "spread": 20} for j, k in enumerate((16, 48, 96))]
    raw = np.random.PCG64(base).random_raw(4)
    ks = [16, 4096] + [int(16 * max(1, round(2 ** (4 + 8 * (int(r) / 2.0 ** 64)) / 16))) for r in raw]
    return [{"seed": base + j, "m": 64, "k": k, "n": 64, "spread": 20} for j, k in enumerate(ks)]


def summary_table(rows) -> str:
    """The closing table: rows of (check, cases, matches, mismatches or None)."""
    w = max([len(r[0]) for r in rows] + [5])
    out = [f"{'check':<{w}} {'cases':>12} {'matches':>12} {'mismatches':>11}"]
    for name, cases, matches, mism in rows:
        m = "n/c" if mism is None else str(mism)
        mt = "n/c" if matches is None else str(matches)
        out.append(f"{name:<{w}} {cases:>12} {mt:>12} {m:>11}")
    return "\n".join(out)


# ============================================================================ worker side
def _worker_init():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass


_TORCH = {}


def _torch_dev(device: str):
    if "torch" not in _TORCH:
        import torch
        _TORCH["torch"] = torch
    return _TORCH["torch"], device


def _to_codes(t, bits: int) -> np.ndarray:
    """Codes (unsigned numpy) of a torch tensor of a ``bits``-wide dtype."""
    torch = _TORCH["torch"]
    iview = {8: torch.uint8, 16: torch.int16, 32: torch.int32}[bits]
    udt = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
    return t.view(iview).cpu().numpy().view(udt)


def _sweep_task(spec: dict) -> dict:
    """One chunk of the all-2^32 sweep: casts on the device (and on the CPU), compared
    with floatfmt; returns counts, first mismatches and NaN codes per target."""
    t0 = time.time()
    if time.time() > spec["deadline"]:
        return {"index": spec["index"], "skipped": True}
    torch, device = _torch_dev(spec["device"])
    start, count = spec["start"], spec["count"]
    u = np.arange(start, start + count, dtype=np.uint64).astype(np.uint32)
    x32 = u.view(np.float32)
    xt = torch.from_numpy(u.view(np.int32)).view(torch.float32).to(device)
    out = {"index": spec["index"], "start": start, "count": count, "targets": {}}
    keep = spec["keep"]
    for name, overflow in spec["targets"]:
        fmt = get_format(name)
        tdt = getattr(torch, TORCH_DTYPES[name])
        gpu = _to_codes(xt.to(tdt), fmt.bits)
        rec = {"mismatches": 0, "inputs": [], "gpu": [], "pred": [], "nan_codes": set(),
               "cpu_diff": 0, "cpu_inputs": [], "cpu_codes": []}
        if spec.get("cpu_compare") and device != "cpu":
            cpu = _to_codes(torch.from_numpy(u.view(np.int32)).view(torch.float32).to(tdt), fmt.bits)
            d = np.flatnonzero(cpu != gpu)
            rec["cpu_diff"] = int(d.size)
            rec["cpu_inputs"] = u[d[:keep]].tolist()
            rec["cpu_codes"] = cpu[d[:keep]].tolist()
        step = 1 << 22
        for s in range(0, count, step):
            xs = x32[s:s + step]
            pred_v = cast(xs, fmt, overflow=overflow, dtype=np.float64)
            gv = codes_to_values(gpu[s:s + step].astype(np.int64), fmt) if fmt.bits > 16 else \
                _decode_table(fmt)[gpu[s:s + step].astype(np.intp)]
            nanp, nang = np.isnan(pred_v), np.isnan(gv)
            ok = ((pred_v == gv) & (np.signbit(pred_v) == np.signbit(gv))) | (nanp & nang)
            if nang.any():
                rec["nan_codes"].update(int(c) for c in np.unique(gpu[s:s + step][nang]))
            bad = np.flatnonzero(~ok)
            rec["mismatches"] += int(bad.size)
            room = keep - len(rec["inputs"])
            if bad.size and room > 0:
                sel = bad[:room]
                rec["inputs"] += u[s + sel].tolist()
                rec["gpu"] += gpu[s + sel].tolist()
                rec["pred"] += values_to_codes(pred_v[sel], fmt).tolist()
        rec["nan_codes"] = sorted(rec["nan_codes"])
        out["targets"][name] = rec
    out["seconds"] = time.time() - t0
    return out


_TABLES = {}


def _decode_table(fmt):
    if fmt.name not in _TABLES:
        _TABLES[fmt.name] = codes_to_values(np.arange(1 << fmt.bits, dtype=np.int64), fmt)
    return _TABLES[fmt.name]


def _predict_task(spec: dict) -> dict:
    """Emulator prediction for some dot products (run in a worker process)."""
    if time.time() > spec["deadline"]:
        return {"id": spec["id"], "skipped": True}
    t0 = time.time()
    params = spec["params"]
    if spec["form"] == "dots":
        pred = predict_dots(spec["a"], spec["b"], params)
    else:
        part = spec["part"]
        ac, bc = P.random_operands(part["seed"], params["in_fmt"], part["m"], part["k"], part["n"],
                                   part["spread"])
        r0, r1 = spec["rows"]
        a = P.operand_values(ac[r0:r1], params["in_fmt"])
        b = P.operand_values(bc, params["in_fmt"])
        pred = predict_gemm(a, b, params)
    return {"id": spec["id"], "pred": pred, "seconds": time.time() - t0}


# ============================================================================ capture
class Capture:
    """One capture run (see the module docstring)."""

    def __init__(self, args):
        self.args = args
        self.t0 = time.time()
        self.deadline = self.t0 + args.budget
        self.device = "cpu" if args.dry_run else args.device
        self.dry = args.dry_run
        self.pending = []  # (future, callback)
        self.pool = None
        self.torch = None
        self.writer = None
        self.model = args.model
        self.log_lines = []

    # ----------------------------------------------------------------- plumbing
    def log(self, msg: str):
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_lines.append(line)

    def run(self) -> int:
        try:
            import torch
        except ImportError:
            print("floatfmt.gpu.capture needs torch (pip install torch); it is not installed",
                  file=sys.stderr)
            return 2
        self.torch = torch
        _TORCH["torch"] = torch
        if self.device == "cuda" and not torch.cuda.is_available():
            print("CUDA is not available to torch here; use --dry-run (or --device cpu) to test on the CPU",
                  file=sys.stderr)
            return 2
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        env = self.environment()
        if self.model is None:
            cap = env["device"].get("capability")
            self.model = preset_for_capability(tuple(int(c) for c in cap.split("."))) if cap else "h100"
        env["settings"]["model"] = self.model
        env["settings"]["tensorcore_available"] = tensorcore_available()
        label = self.args.label or self._label(env)
        evidence = "gpu" if self.device == "cuda" else "cpu"
        self.writer = FixtureWriter(self.args.out, {"label": label, "evidence": evidence,
                                                    "created": _dt.datetime.now(_dt.timezone.utc).isoformat(
                                                        timespec="seconds"), **env})
        self.writer.summary["device_differences"] = {}
        self.log(f"capture {label}: device {env['device'].get('name')}, model preset {self.model}, "
                 f"budget {self.args.budget:.0f}s, sections {','.join(self.args.sections)}")
        self.writer.save()
        want = set(self.args.sections)
        if "sweep" in want or any(s in want for s in ("probes", "random")):
            try:
                self.start_pool()
            except Exception as err:  # noqa: BLE001 - without workers, run the tasks here
                self.log(f"could not start worker processes ({type(err).__name__}: {err}); "
                         "running their tasks in this process")
                self.pool = None
        steps = [("casts", self.section_casts), ("tf32", self.section_tf32),
                 ("probes", self.section_probes), ("random", self.section_random),
                 ("sweep", self.section_sweep)]
        for name, fn in steps:
            if name not in want:
                continue
            t = time.time()
            self.log(f"section {name} ...")
            try:
                fn()
                self.writer.section(name, status="ok", seconds=round(time.time() - t, 2))
            except Exception as err:
                tb = traceback.format_exc()
                self.log(f"section {name} FAILED: {type(err).__name__}: {err}\n{tb}")
                self.writer.section(name, status="error", error=f"{type(err).__name__}: {err}",
                                    traceback=tb[-4000:], seconds=round(time.time() - t, 2))
            self.writer.save()
        try:
            self.collect()
        except Exception as err:
            self.log(f"collecting worker results FAILED: {type(err).__name__}: {err}\n{traceback.format_exc()}")
        finally:
            self.stop_pool()
        self.writer.summary["seconds"] = round(time.time() - self.t0, 2)
        self.writer.save()
        self.write_readme(label)
        table = summary_table(self.table_rows())
        print("\n" + table, flush=True)
        print(f"\ntotal {time.time() - self.t0:.1f}s; fixture written to {self.args.out}", flush=True)
        return 0

    def _label(self, env) -> str:
        day = _dt.date.today().isoformat()
        if self.device == "cuda":
            name = env["device"].get("name", "gpu").replace("NVIDIA ", "")
            return f"{slug(name)}-{day}"
        return f"cpu-torch{env['versions'].get('torch', '').split('+')[0]}-{day}"

    def start_pool(self):
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 2
        n = self.args.workers or max(1, min(15, cores - 1))
        self.pool = cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"),
                                           initializer=_worker_init)
        self.workers = n
        self.log(f"started {n} worker processes")

    def stop_pool(self):
        if self.pool is None:
            return
        procs = list(getattr(self.pool, "_processes", {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # only the workers this capture started
            if p.is_alive():
                p.terminate()
        self.pool = None

    def submit(self, fn, spec, callback):
        # Workers must find the function in the importable module, also when this file
        # runs as __main__ (python -m floatfmt.gpu.capture).
        import importlib
        fn = getattr(importlib.import_module("floatfmt.gpu.capture"), fn.__name__)
        if self.pool is None:
            callback(fn(spec))
            return
        self.pending.append((self.pool.submit(fn, spec), callback))

    def collect(self):
        """Hand worker results to their callbacks as they arrive; at the deadline, give
        up on the rest (they are recorded as skipped)."""
        futs = {f: cb for f, cb in self.pending}
        self.pending = []
        pending = set(futs)
        end = self.deadline + 10
        total, last = len(futs), time.time()
        while pending and time.time() < end:
            done, pending = cf.wait(pending, timeout=min(15.0, max(0.1, end - time.time())),
                                    return_when=cf.FIRST_COMPLETED)
            for f in done:
                try:
                    res = f.result()
                except Exception as err:  # noqa: BLE001 - a failed task must not stop the others
                    self.log(f"worker task failed: {type(err).__name__}: {err}")
                    res = {"error": f"{type(err).__name__}: {err}"}
                self._call(futs[f], res)
            if time.time() - last > 20 and pending:
                last = time.time()
                self.log(f"  workers: {total - len(pending)} of {total} tasks done")
        for f in pending:
            f.cancel()
            self._call(futs[f], {"skipped": True})
        for fin in getattr(self, "finalizers", []):
            self._call(fin)

    def _call(self, fn, *args):
        """Run a result callback; a failing one is logged, the others still run."""
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001
            self.log(f"handling a worker result FAILED: {type(err).__name__}: {err}\n{traceback.format_exc()}")

    def finalizer(self, fn):
        if not hasattr(self, "finalizers"):
            self.finalizers = []
        self.finalizers.append(fn)

    def table_rows(self):
        return [(c["name"], int(c.get("cases") or 0), c.get("matches"), c.get("mismatches"))
                for c in self.writer.summary["checks"]]

    # ----------------------------------------------------------------- environment
    def environment(self) -> dict:
        torch = self.torch
        import ml_dtypes
        dev, ver, settings = {}, {}, {}
        ver.update(python=platform.python_version(), numpy=np.__version__, ml_dtypes=ml_dtypes.__version__,
                   torch=torch.__version__, floatfmt=FLOATFMT_VERSION, cuda=torch.version.cuda)
        ver["floatfmt_git"] = _git_commit()
        if self.device == "cuda":
            props = torch.cuda.get_device_properties(0)
            dev.update(name=props.name, capability=f"{props.major}.{props.minor}",
                       multiprocessors=props.multi_processor_count,
                       memory_gib=round(props.total_memory / 2 ** 30, 1))
            dev["driver"] = _nvidia_smi("driver_version")
            try:
                ver["cudnn"] = torch.backends.cudnn.version()
            except Exception:  # noqa: BLE001 - optional facts
                pass
            a = torch.ones(64, 64, device="cuda")
            (a @ a).sum().item()  # loads cuBLAS
            ver.update(_cublas_versions())
            settings["preferred_blas_library"] = str(torch.backends.cuda.preferred_blas_library())
        else:
            dev.update(name=f"CPU ({platform.processor() or platform.machine()})", capability=None)
        settings.update(
            device=self.device, dry_run=self.dry, cpu_compare=not self.args.no_cpu_compare,
            allow_fp16_reduced_precision_reduction=False, allow_bf16_reduced_precision_reduction=False,
            CUBLAS_WORKSPACE_CONFIG=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            torch_num_threads=torch.get_num_threads(), cpu_count=os.cpu_count())
        return {"device": dev, "versions": ver, "settings": settings}

    # ----------------------------------------------------------------- torch helpers
    def tdtype(self, name):
        return getattr(self.torch, TORCH_DTYPES[name])

    def to_tensor(self, codes, fmt_name, device):
        """A torch tensor on ``device`` holding the values of codes stored in fmt_name."""
        torch = self.torch
        store = P.storage_format(fmt_name)
        codes = np.ascontiguousarray(codes)
        iview = {8: (np.uint8, torch.uint8), 16: (np.int16, torch.int16), 32: (np.int32, torch.int32)}[store.bits]
        t = torch.from_numpy(codes.view(iview[0]).copy())
        return t.view(self.tdtype(store.name)).to(device)

    def cast_on(self, codes, src, dst, device):
        x = self.to_tensor(codes, src, device)
        return _to_codes(x.to(self.tdtype(dst)), get_format(dst).bits)

    def gemm(self, a_codes, b_codes, in_fmt, out_fmt, fast, tf32=True, device=None):
        """Run a @ b on the device; returns (output codes, method text)."""
        torch = self.torch
        device = device or self.device
        A = self.to_tensor(a_codes, in_fmt, device)
        B = self.to_tensor(b_codes, in_fmt, device)
        odt = self.tdtype(out_fmt)
        if in_fmt in ("tf32", "fp32"):
            on = bool(tf32 and in_fmt == "tf32")
            torch.backends.cuda.matmul.allow_tf32 = on
            torch.set_float32_matmul_precision("high" if on else "highest")
            out, how = torch.mm(A, B), f"torch.mm fp32, allow_tf32={torch.backends.cuda.matmul.allow_tf32}"
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
        elif in_fmt.startswith("fp8"):
            one = torch.ones((), dtype=torch.float32, device=device)
            Bc = B.t().contiguous().t()  # column-major, as _scaled_mm requires
            out = torch._scaled_mm(A, Bc, scale_a=one, scale_b=one, out_dtype=odt, use_fast_accum=bool(fast))
            how = f"torch._scaled_mm unit scales, use_fast_accum={bool(fast)}"
        elif out_fmt == in_fmt:
            out, how = torch.mm(A, B), "torch.mm"
        else:
            try:
                out, how = torch.mm(A, B, out_dtype=odt), f"torch.mm(out_dtype={odt})"
            except (RuntimeError, TypeError, NotImplementedError):
                if device != "cpu":
                    raise
                out, how = (A.float() @ B.float()), "CPU fallback: float32 matmul of the operands"
        return _to_codes(out.to(odt) if out.dtype != odt else out, get_format(out_fmt).bits), how

    # ----------------------------------------------------------------- section 1: casts
    def devices(self):
        if self.device == "cuda" and not self.args.no_cpu_compare:
            return ["cuda", "cpu"]
        return [self.device]

    def overflow_policy(self, target, device) -> tuple[str, str]:
        fmt = get_format(target)
        probe_vals = [1e6, float("inf"), 2 * fmt.max] if fmt.max * 2 < 3e38 else [float("inf")]
        codes = P.f32_codes(np.array(probe_vals, np.float64))
        outs = self.cast_on(codes, "fp32", target, device)
        return choose_overflow(target, {v: int(c) for v, c in zip(probe_vals, outs)})

    def section_casts(self):
        w = self.writer
        self.policies = {}
        for target in CAST_TARGETS:
            x = P.structured_cast_inputs(target)
            in_ref = w.put("casts.npz", array_key("in", target), x)
            outs = {}
            for device in self.devices():
                policy, evidence = self.overflow_policy(target, device)
                self.policies[(target, device)] = (policy, evidence)
                gpu = self.cast_on(x, "fp32", target, device)
                outs[device] = gpu
                self._record_cast(f"cast.fp32-{target}.{device}", "fp32", target, device, x, in_ref, gpu,
                                  policy, evidence)
            if "cpu" in outs and "cuda" in outs:
                d = np.flatnonzero(outs["cpu"] != outs["cuda"])
                w.summary["device_differences"][f"fp32->{target} structured"] = (
                    f"{d.size} of {x.size} differ" + (": " + ", ".join(
                        f"0x{int(x[i]):08x} cpu 0x{int(outs['cpu'][i]):x} cuda 0x{int(outs['cuda'][i]):x}"
                        for i in d[:8]) if d.size else ""))
            w.save()
        for src in ("fp16", "bf16"):
            x = P.all_codes(src)
            in_ref = w.put("casts.npz", array_key("in", src, "all"), x)
            for device in self.devices():
                gpu = self.cast_on(x, src, "fp32", device)
                self._record_cast(f"cast.{src}-fp32.{device}", src, "fp32", device, x, in_ref, gpu, "inf", "")
        w.save()

    def _record_cast(self, name, src, dst, device, x, in_ref, gpu, policy, evidence):
        w = self.writer
        pred = predict_cast(x, src, dst, policy)
        ok = same_bits(gpu, pred, dst)
        bad = np.flatnonzero(~ok)
        arrays = {"inputs": in_ref, "outputs": w.put("casts.npz", array_key(name, "out"), gpu)}
        if bad.size:
            arrays["pred_index"] = w.put("casts.npz", array_key(name, "pred_index"), bad.astype(np.int64))
            arrays["pred_codes"] = w.put("casts.npz", array_key(name, "pred_codes"), pred[bad])
        params = {"src": src, "dst": dst, "device": device, "overflow": policy,
                  "overflow_evidence": evidence, "rounding": "nearest_even", **nan_summary(x, gpu, src, dst)}
        default = get_format(dst).default_overflow
        if policy != default:
            params["mismatches_with_default_overflow"] = int(
                (~same_bits(gpu, predict_cast(x, src, dst, default), dst)).sum())
        w.add_check({"name": name, "section": "casts", "kind": "cast", "params": params,
                     "arrays": arrays, "cases": int(x.size), "matches": int(ok.sum()),
                     "mismatches": int(bad.size),
                     "note": "prediction stored where it differs from the device (pred_index, pred_codes)"})
        self.log(f"  {name}: {x.size} cases, {bad.size} mismatches (overflow={policy})")

    # ----------------------------------------------------------------- sweep
    def section_sweep(self):
        bits = self.args.sweep_chunk_bits
        n_chunks = 1 << (32 - bits)
        order = sweep_order(n_chunks)
        limit = self.args.sweep_chunks or (4 if self.dry else n_chunks)
        order = order[:limit]
        chosen = {t: getattr(self, "policies", {}).get((t, self.device)) or self._sweep_policy(t)
                  for t in CAST_TARGETS}
        targets = [(t, chosen[t][0]) for t in CAST_TARGETS]
        t_start = time.time()
        keep = self.args.max_mismatches
        state = {t: {"mismatches": 0, "inputs": [], "gpu": [], "pred": [], "nan": set(), "cpu_diff": 0,
                     "cpu_inputs": [], "cpu_codes": []} for t, _ in targets}
        done = {"chunks": 0, "cases": 0, "seconds": 0.0, "skipped": 0, "errors": []}
        deadline = self.deadline - 5

        def on_result(res):
            if res.get("skipped") or res.get("error"):
                done["skipped"] += 1
                if res.get("error"):
                    done["errors"].append(res["error"])
                return
            done["chunks"] += 1
            done["cases"] += res["count"]
            done["seconds"] += res["seconds"]
            for t, r in res["targets"].items():
                s = state[t]
                s["mismatches"] += r["mismatches"]
                room = keep - len(s["inputs"])
                s["inputs"] += r["inputs"][:room]
                s["gpu"] += r["gpu"][:room]
                s["pred"] += r["pred"][:room]
                s["nan"].update(r["nan_codes"])
                s["cpu_diff"] += r["cpu_diff"]
                room = keep - len(s["cpu_inputs"])
                s["cpu_inputs"] += r["cpu_inputs"][:room]
                s["cpu_codes"] += r["cpu_codes"][:room]

        for idx in order:
            spec = {"index": idx, "start": idx << bits, "count": 1 << bits, "targets": targets,
                    "device": self.device, "deadline": deadline, "keep": keep,
                    "cpu_compare": self.device == "cuda" and not self.args.no_cpu_compare}
            self.submit(_sweep_task, spec, on_result)
        self.log(f"  sweep: {len(order)} chunks of 2^{bits} submitted to {getattr(self, 'workers', 1)} workers")

        def finish():
            w = self.writer
            for t, policy in targets:
                s = state[t]
                fmt = get_format(t)
                name = f"sweep.fp32-{t}.{self.device}"
                arrays = {}
                if s["inputs"]:
                    order_i = np.argsort(np.asarray(s["inputs"], np.uint64))
                    arrays["inputs"] = w.put("sweep.npz", array_key(name, "in"),
                                             np.asarray(s["inputs"], np.uint32)[order_i])
                    arrays["outputs"] = w.put("sweep.npz", array_key(name, "out"),
                                              np.asarray(s["gpu"], code_dtype(fmt))[order_i])
                    arrays["pred_codes"] = w.put("sweep.npz", array_key(name, "pred"),
                                                 np.asarray(s["pred"], code_dtype(fmt))[order_i])
                w.add_check({"name": name, "section": "sweep", "kind": "sweep",
                             "params": {"src": "fp32", "dst": t, "device": self.device, "overflow": policy,
                                        "overflow_evidence": chosen[t][1],
                                        "cases": done["cases"], "mismatches": s["mismatches"],
                                        "chunks_done": done["chunks"], "chunks_total": n_chunks,
                                        "chunk_bits": bits, "emulator": FLOATFMT_VERSION,
                                        "nan_codes": sorted(s["nan"])[:16], "nan_codes_distinct": len(s["nan"]),
                                        "stored": len(s["inputs"])},
                             "arrays": arrays, "cases": done["cases"],
                             "matches": done["cases"] - s["mismatches"], "mismatches": s["mismatches"]})
                if self.device == "cuda" and not self.args.no_cpu_compare:
                    w.summary["device_differences"][f"fp32->{t} sweep"] = (
                        f"{s['cpu_diff']} of {done['cases']} differ" + (": " + ", ".join(
                            f"0x{a:08x} cpu 0x{c:x}" for a, c in zip(s["cpu_inputs"][:8], s["cpu_codes"][:8]))
                            if s["cpu_diff"] else ""))
                    if s["cpu_inputs"]:
                        w.put("sweep.npz", array_key(name, "cpu_diff_in"), np.asarray(s["cpu_inputs"], np.uint32))
                        w.put("sweep.npz", array_key(name, "cpu_diff_codes"),
                              np.asarray(s["cpu_codes"], code_dtype(fmt)))
            w.section("sweep", chunks_done=done["chunks"], chunks_skipped=done["skipped"],
                      wall_seconds=round(time.time() - t_start, 1),
                      worker_seconds=round(done["seconds"], 1), errors=done["errors"][:5])
            self.log(f"  sweep: {done['chunks']} of {len(order)} chunks done ({done['cases']} patterns), "
                     f"{done['skipped']} skipped")

        self.finalizer(finish)

    def _sweep_policy(self, t):
        try:
            return self.overflow_policy(t, self.device)
        except Exception as err:  # noqa: BLE001
            return get_format(t).default_overflow, f"probe failed: {err}"

    # ----------------------------------------------------------------- GEMM helpers
    def _dots_check(self, name, section, params, probes_list, k, extra_params=None):
        """Run each probe as a 64 x k x 64 GEMM (vector in row 0 / column 0); record."""
        w = self.writer
        in_fmt, out_fmt, fast = params["in_fmt"], params["out_fmt"], params.get("fast_accum")
        op_fmt = in_fmt if params.get("tf32", True) else "fp32"
        size = 16 if self.dry else 64
        a_rows = np.stack([p.a for p in probes_list])
        b_rows = np.stack([p.b for p in probes_list])
        a_codes = P.operand_codes(a_rows, op_fmt)
        b_codes = P.operand_codes(b_rows, op_fmt)
        outs, others, how = [], [], ""
        zero_pad = P.operand_codes(np.zeros(1), op_fmt)[0]
        for i in range(len(probes_list)):
            A = np.full((size, k), zero_pad, a_codes.dtype)
            B = np.full((k, size), zero_pad, b_codes.dtype)
            A[0], B[:, 0] = a_codes[i], b_codes[i]
            out, how = self.gemm(A, B, op_fmt, out_fmt, fast, tf32=params.get("tf32", True))
            outs.append(out[0, 0])
            rest = out.reshape(-1)[1:]
            others.append(int(np.count_nonzero(rest)))
        gpu = np.asarray(outs, code_dtype(get_format(out_fmt)))
        arrays = {"a": w.put("matmul.npz", array_key(name, "a"), a_codes),
                  "b": w.put("matmul.npz", array_key(name, "b"), b_codes),
                  "out": w.put("matmul.npz", array_key(name, "out"), gpu)}
        params = {**params, "form": "dots", "k": k, "m": size, "n": size, "method": how,
                  "probes": [p.name for p in probes_list], "probe_kinds": [p.kind for p in probes_list],
                  "probe_params": [p.param for p in probes_list],
                  "probe_meta": {p.name: p.meta for p in probes_list if p.meta},
                  "others_nonzero": int(sum(others)), **(extra_params or {})}
        rec = w.add_check({"name": name, "section": section, "kind": "gemm", "params": params,
                           "arrays": arrays, "cases": len(probes_list)})
        self._predict_dots_async(rec, a_rows, b_rows, gpu)
        return rec

    def _predict_dots_async(self, rec, a_vals, b_vals, gpu):
        params = rec["params"]
        name = rec["name"]
        if not tensorcore_available() and params.get("tf32", True):
            rec.update(matches=None, mismatches=None, note="not compared: floatfmt.tensorcore is missing")
            return
        spec = {"id": name, "form": "dots", "params": params, "a": a_vals, "b": b_vals,
                "deadline": self.deadline}

        def done(res):
            if "pred" not in res:
                rec.update(matches=None, mismatches=None,
                           note=f"prediction {'skipped (time budget)' if res.get('skipped') else res.get('error')}")
                return
            pred = res["pred"]
            out_fmt = get_format(params["out_fmt"])
            ok = same_bits(gpu, pred, out_fmt)
            rec.update(matches=int(ok.sum()), mismatches=int((~ok).sum()))
            rec["arrays"]["pred"] = self.writer.put("matmul.npz", array_key(name, "pred"), pred)
            if params.get("probe_kinds"):
                vals = lambda c: codes_to_values(np.asarray(c, np.int64), out_fmt)  # noqa: E731
                rec["diagnosis"] = {
                    "gpu": P.diagnose_probes(params["probes"], params["probe_kinds"], params["probe_params"],
                                             vals(gpu), params["k"], params["probe_meta"]),
                    "emulator": P.diagnose_probes(params["probes"], params["probe_kinds"],
                                                  params["probe_params"], vals(pred), params["k"],
                                                  params["probe_meta"])}

        self.submit(_predict_task, spec, done)

    # ----------------------------------------------------------------- section 2: TF32
    def section_tf32(self):
        x = P.tf32_operand_values().astype(np.float64)
        k = 8 if self.dry else 64
        # keys are the tensor-core model's tf32_operands values
        modes = {m: cast(x, "tf32", rounding=r) for m, r in
                 (("truncate", "toward_zero"), ("rne", "nearest_even"), ("rna", "nearest_away"))}
        for tf32 in (False, True):
            for side in ("a", "b"):
                probes_list = []
                for i, v in enumerate(x):
                    a = np.zeros(k)
                    b = np.zeros(k)
                    if side == "a":
                        a[0], b[0] = v, 1.0
                    else:
                        a[0], b[0] = 1.0, v
                    probes_list.append(P.Probe(f"x{i}", "tf32", float(v), a, b))
                name = f"tf32.{side}.{'on' if tf32 else 'off'}"
                params = {"in_fmt": "tf32" if tf32 else "fp32", "out_fmt": "fp32", "model": self.model,
                          "tf32": tf32, "fast_accum": None}
                rec = self._dots_check(name, "tf32", params, probes_list, k)
                gpu_v = codes_to_values(self.writer_array(rec["arrays"]["out"]).astype(np.int64), get_format("fp32"))
                rec["params"]["tf32_modes"] = {m: int((v == gpu_v).sum()) for m, v in modes.items()}
                rec["params"]["tf32_modes"]["unchanged"] = int((x == gpu_v).sum())
                self.log(f"  {name}: of {x.size} operands, explained by " +
                         ", ".join(f"{m} {c}" for m, c in rec["params"]["tf32_modes"].items()))
        self.writer.save()

    def writer_array(self, ref):
        file, key = ref.split(":", 1)
        arr = self.writer._files[file][key]
        meta = self.writer.summary["arrays"][ref]
        if meta["encoding"] == "delta":
            arr = np.cumsum(arr)
        return arr.astype(meta["dtype"])

    # ----------------------------------------------------------------- section 3: probes
    def section_probes(self):
        blocks = model_blocks(self.model)
        for in_fmt, out_fmt, fast in GEMM_CONFIGS:
            L = blocks.get(in_fmt, P.DEFAULT_BLOCKS[in_fmt])
            for mult in (1, 2, 4):
                k = max(16, L * mult) if in_fmt.startswith("fp8") else L * mult
                name = f"probe.{in_fmt}.k{k}.{out_fmt}" + ("" if fast is None else ".fast" if fast else ".slow")
                params = {"in_fmt": in_fmt, "out_fmt": out_fmt, "model": self.model, "fast_accum": fast,
                          "tf32": True, "block": L}
                try:
                    self._dots_check(name, "probes", params, P.gemm_probes(in_fmt, k, L), k)
                except Exception as err:
                    self._failed_check(name, "probes", err)
            self.writer.save()
        for in_fmt in ("fp8_e4m3", "fp8_e5m2"):
            for fast in (False, True):
                for k, positions in PROMOTION_POSITIONS.items():
                    if self.dry and k > 1024:
                        continue
                    name = f"promotion.{in_fmt}.k{k}.fp32.{'fast' if fast else 'slow'}"
                    params = {"in_fmt": in_fmt, "out_fmt": "fp32", "model": self.model, "fast_accum": fast,
                              "tf32": True}
                    try:
                        self._dots_check(name, "probes", params, P.promotion_probes(in_fmt, k, positions), k)
                    except Exception as err:
                        self._failed_check(name, "probes", err)
        self.writer.save()

    def _failed_check(self, name, section, err):
        self.log(f"  {name} FAILED: {type(err).__name__}: {err}")
        try:
            self.writer.add_check({"name": name, "section": section, "kind": "gemm", "status": "error",
                                   "error": f"{type(err).__name__}: {err}", "params": {}, "arrays": {}})
        except ValueError:
            pass

    # ----------------------------------------------------------------- section 4: random
    def section_random(self):
        w = self.writer
        for in_fmt, out_fmt, fast in GEMM_CONFIGS:
            name = f"random.{in_fmt}.{out_fmt}" + ("" if fast is None else ".fast" if fast else ".slow")
            try:
                self._random_check(w, name, in_fmt, out_fmt, fast)
            except Exception as err:
                self._failed_check(name, "random", err)
            w.save()

    def _random_check(self, w, name, in_fmt, out_fmt, fast):
        plan = random_plan(in_fmt, out_fmt, fast, self.dry)
        params = {"in_fmt": in_fmt, "out_fmt": out_fmt, "model": self.model, "fast_accum": fast,
                  "tf32": True, "form": "random", "parts": []}
        ofmt = get_format(out_fmt)
        how = ""
        for j, part in enumerate(plan):
            ac, bc = P.random_operands(part["seed"], in_fmt, part["m"], part["k"], part["n"], part["spread"])
            out1, how = self.gemm(ac, bc, in_fmt, out_fmt, fast)
            out2, _ = self.gemm(ac, bc, in_fmt, out_fmt, fast)
            differs = int(np.count_nonzero(out1 != out2))
            rec_part = {**part, "out": w.put("matmul.npz", array_key(name, f"p{j}", "out"), out1),
                        "run2_differs": differs}
            if differs:
                rec_part["out2"] = w.put("matmul.npz", array_key(name, f"p{j}", "out2"), out2)
            params["parts"].append(rec_part)
        params["method"] = how
        cases = sum(p["m"] * p["n"] for p in plan)
        rec = w.add_check({"name": name, "section": "random", "kind": "gemm", "params": params,
                           "arrays": {}, "cases": cases})
        nondet = sum(p["run2_differs"] for p in params["parts"])
        self.log(f"  {name}: {len(plan)} matmuls, K = {[p['k'] for p in plan]}, {cases} dot products"
                 + (f", NOT deterministic ({nondet} outputs differ)" if nondet else ", deterministic"))
        if not tensorcore_available():
            rec.update(matches=None, mismatches=None, note="not compared: floatfmt.tensorcore is missing")
            return
        state = {"matches": 0, "mismatches": 0, "missing": 0, "left": 0}
        rows_per_task = 8 if not self.dry else 16
        pred_parts = {}
        for j, part in enumerate(params["parts"]):
            pred_parts[j] = np.zeros((part["m"], part["n"]), code_dtype(ofmt))
            for r0 in range(0, part["m"], rows_per_task):
                r1 = min(part["m"], r0 + rows_per_task)
                state["left"] += 1
                spec = {"id": f"{name}/{j}/{r0}", "form": "random", "params": params,
                        "part": {k: part[k] for k in ("seed", "m", "k", "n", "spread")},
                        "rows": (r0, r1), "deadline": self.deadline}
                self.submit(_predict_task, spec, self._random_done(rec, state, pred_parts, j, r0, r1, ofmt))

    def _random_done(self, rec, state, pred_parts, j, r0, r1, ofmt):
        def done(res):
            state["left"] -= 1
            if "pred" in res:
                pred_parts[j][r0:r1] = res["pred"]
                gpu = self.writer_array(rec["params"]["parts"][j]["out"])[r0:r1]
                ok = same_bits(gpu, res["pred"], ofmt)
                state["matches"] += int(ok.sum())
                state["mismatches"] += int((~ok).sum())
            else:
                state["missing"] += (r1 - r0) * rec["params"]["parts"][j]["n"]
            if state["left"] == 0:
                name = rec["name"]
                if state["missing"]:
                    rec["note"] = f"{state['missing']} predictions not computed (time budget)"
                rec.update(matches=state["matches"], mismatches=state["mismatches"])
                for jj, pred in pred_parts.items():
                    rec["params"]["parts"][jj]["pred"] = self.writer.put(
                        "matmul.npz", array_key(name, f"p{jj}", "pred"), pred)
        return done

    # ----------------------------------------------------------------- README draft
    def write_readme(self, label):
        s = self.writer.summary
        ev = s.get("evidence")
        lines = [f"# GPU fixture {label}", ""]
        if ev == "cpu":
            lines += ["**CPU evidence, not GPU evidence.** These outputs come from PyTorch's CPU kernels; "
                      "they say nothing about what a GPU does.", ""]
        lines += ["Written by `python -m floatfmt.gpu.capture` "
                  f"({'dry run' if self.dry else 'full run'}, sections {', '.join(self.args.sections)}).", "",
                  "| | |", "| --- | --- |"]
        for k, v in {**s.get("device", {}), **s.get("versions", {})}.items():
            if v not in (None, ""):
                lines.append(f"| {k} | {v} |")
        lines += ["", "## Results at capture time", "", "```", summary_table(self.table_rows()), "```", ""]
        if s.get("device_differences"):
            lines += ["## CPU torch vs CUDA", ""] + [f"- {k}: {v}" for k, v in s["device_differences"].items()] + [""]
        lines += ["## Findings", "", "(fill in: what the probes showed, preset changes made, with evidence)", ""]
        (Path(self.args.out) / "README.md").write_text("\n".join(lines))


# ============================================================================ environment facts
def _git_commit():
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def _nvidia_smi(field):
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:  # noqa: BLE001
        return None


def _cublas_versions() -> dict:
    """cuBLAS / cuBLASLt versions of the libraries loaded in this process."""
    import ctypes
    out = {}
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return out
    libs = {}
    for line in maps:
        path = line.split()[-1] if line.split() else ""
        base = os.path.basename(path)
        if base.startswith("libcublasLt.so"):
            libs.setdefault("cublasLt", path)
        elif base.startswith("libcublas.so"):
            libs.setdefault("cublas", path)
    try:
        if "cublas" in libs:
            lib = ctypes.CDLL(libs["cublas"])
            vals = []
            for prop in range(3):
                v = ctypes.c_int()
                lib.cublasGetProperty(prop, ctypes.byref(v))
                vals.append(v.value)
            out["cublas"] = ".".join(map(str, vals))
        if "cublasLt" in libs:
            lib = ctypes.CDLL(libs["cublasLt"])
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            out["cublasLt"] = int(lib.cublasLtGetVersion())
    except Exception as err:  # noqa: BLE001
        out["cublas_error"] = f"{type(err).__name__}: {err}"
    return out


# ============================================================================ command line
def _parser():
    p = argparse.ArgumentParser(prog="python -m floatfmt.gpu.capture",
                                description="Capture GPU casts and matmuls next to floatfmt's predictions.")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--dry-run", action="store_true",
                   help="torch on the CPU, tiny GEMMs, 4 sweep chunks: tests the script without a GPU")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--sections", default="casts,tf32,probes,random,sweep",
                   help="comma-separated subset of casts,tf32,probes,random,sweep")
    p.add_argument("--model", default=None, help="tensor-core preset (default: from the compute capability)")
    p.add_argument("--label", default=None, help="fixture name (default DEVICE-DATE)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default cores - 1, at most 15)")
    p.add_argument("--budget", type=float, default=330.0, help="seconds for the whole capture (default 330)")
    p.add_argument("--sweep-chunk-bits", type=int, default=None,
                   help="log2 patterns per sweep task (default 24; 20 in a dry run)")
    p.add_argument("--sweep-chunks", type=int, default=None, help="sweep only this many chunks (spread evenly)")
    p.add_argument("--max-mismatches", type=int, default=1000, help="mismatching inputs kept per sweep target")
    p.add_argument("--no-cpu-compare", action="store_true", help="skip the CPU torch casts on a GPU run")
    p.add_argument("--cublas-workspace", default=None,
                   help="set CUBLAS_WORKSPACE_CONFIG before CUDA starts (e.g. ':0:0' forbids split-K workspaces)")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = sorted(set(args.sections) - {"casts", "tf32", "probes", "random", "sweep"})
    if bad:
        print(f"unknown section(s) {', '.join(bad)}; valid: casts, tf32, probes, random, sweep", file=sys.stderr)
        return 2
    if args.sweep_chunk_bits is None:
        args.sweep_chunk_bits = 20 if args.dry_run else 24
    if not 16 <= args.sweep_chunk_bits <= 32:
        print("--sweep-chunk-bits must be in 16..32", file=sys.stderr)
        return 2
    if args.cublas_workspace is not None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = args.cublas_workspace
    return Capture(args).run()


if __name__ == "__main__":
    sys.exit(main())
