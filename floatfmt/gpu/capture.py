"""Capture what a CUDA GPU does to numbers, next to floatfmt's prediction: the runner.

Run on a machine with torch and CUDA (see ``docs/gpu_capture.md``)::

    python -m floatfmt.gpu.capture --out DIR            # the whole capture, < 6 min on an H200
    python -m floatfmt.gpu.capture --out DIR --dry-run  # torch on the CPU, tiny GEMMs: a test run

This module is the runner: the command line, the worker pool, the fixture writer,
the environment facts (device, versions, settings), the closing summary table and the
draft README. What is measured lives in the sections (``floatfmt.gpu.sections``, one
module each, run in this order; each in its own try/except, the fixture saved after
every one):

``casts``   float32 -> fp16, bf16, fp8_e4m3, fp8_e5m2 on the GPU and with torch on the
            CPU for structured input sets, and fp16/bf16 -> float32 for every code;
``tf32``    fp32 matmuls with TF32 off and on, telling truncation, RNE and RNA apart;
``probes``  the reference file's GEMM probes for fp16, bf16, tf32 and FP8, and FP8
            promotion-interval probes;
``random``  per input and output format, 6 random matmuls 64 x K x 64, each run twice;
``sweep``   the four casts for all 2^32 float32 patterns, compared in worker processes;
``torch``   floatfmt's own torch path on the device against CPU tensors, and its speed.

A new section is a module in ``floatfmt/gpu/sections/`` and one line in
``sections.SECTION_MODULES``.

Writes into DIR: ``summary.json`` (device, versions, settings, one record per
check with its inputs, GPU output codes and the emulator's prediction as array
references, counts), ``casts.npz``, ``sweep.npz``, ``matmul.npz`` and a draft
``README.md``.  The summary table (check, cases, matches, mismatches) is
printed last.

torch is imported only inside functions, so this module can be imported (and
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
from typing import Any, Callable, Sequence

import numpy as np

from .._version import __version__ as FLOATFMT_VERSION
from ..core.optional import MissingExtraError, optional_import
from .compare import tensorcore_available
from .device import TorchDevice, worker_init
from .fixture import FixtureWriter
from .sections import Section, sections
from .sections.casts import CAST_TARGETS, choose_overflow, nan_summary
from .sections.context import Callback, Task
from .sections.dots import GEMM_CONFIGS
from .sections.gemm_probes import model_blocks
from .sections.random_gemms import random_plan
from .sections.sweep import sweep_order

# The runner's own names, and the sections' helpers re-exported for callers of
# ``floatfmt.gpu.capture`` (tests and notebooks use them from here).
__all__ = ["main", "Capture", "CAST_TARGETS", "nan_summary", "preset_for_capability", "model_blocks",
           "sweep_order", "choose_overflow", "random_plan", "GEMM_CONFIGS", "summary_table", "slug"]

_CAPABILITY_PRESETS = {(7, 0): "v100", (7, 5): "t4", (8, 0): "a100", (8, 6): "a100", (8, 7): "a100",
                       (8, 9): "ada", (9, 0): "h100", (10, 0): "b200"}


# ============================================================================ pure helpers
def slug(text: str) -> str:
    """A file-name-safe lower-case slug.

    >>> slug("NVIDIA H200 NVL")
    'nvidia-h200-nvl'
    """
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def preset_for_capability(cap: Sequence[int | str]) -> str:
    """Tensor-core preset for a CUDA compute capability (major, minor).

    >>> preset_for_capability((9, 0)), preset_for_capability((8, 9)), preset_for_capability((12, 0))
    ('h100', 'ada', 'b200')
    """
    key = tuple(int(c) for c in cap)
    if key in _CAPABILITY_PRESETS:
        return _CAPABILITY_PRESETS[key]
    return "b200" if key >= (10, 0) else "h100" if key >= (9, 0) else "a100"


def summary_table(rows: Sequence[tuple[str, int, int | None, int | None]]) -> str:
    """The closing table: rows of (check, cases, matches, mismatches or None)."""
    w = max([len(r[0]) for r in rows] + [5])
    out = [f"{'check':<{w}} {'cases':>12} {'matches':>12} {'mismatches':>11}"]
    for name, cases, matches, mism in rows:
        m = "n/c" if mism is None else str(mism)
        mt = "n/c" if matches is None else str(matches)
        out.append(f"{name:<{w}} {cases:>12} {mt:>12} {m:>11}")
    return "\n".join(out)


# ============================================================================ the runner
class Capture:
    """One capture run: the runner's state, and the ``sections.Context`` the sections use."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.t0 = time.time()
        self.deadline = self.t0 + args.budget
        self.device: str = "cpu" if args.dry_run else args.device
        self.dry: bool = args.dry_run
        self.pending: list[tuple[cf.Future, Callback]] = []
        self.finalizers: list[Callable[[], None]] = []
        self.pool: cf.ProcessPoolExecutor | None = None
        self.workers = 1
        self.torch: Any = None
        self.dev: TorchDevice
        self.writer: FixtureWriter
        self.model: str = args.model or ""
        self.policies: dict[tuple[str, str], tuple[str, str]] = {}
        self.log_lines: list[str] = []

    # ----------------------------------------------------------------- plumbing
    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_lines.append(line)

    def run(self) -> int:
        """The whole capture; returns the exit status (2: torch or CUDA missing)."""
        try:
            torch = optional_import("torch", "gpu", "python -m floatfmt.gpu.capture")
        except MissingExtraError as err:
            print(f"floatfmt.gpu.capture: error: {err}", file=sys.stderr)
            return 2
        self.torch = torch
        if self.device == "cuda" and not torch.cuda.is_available():
            print("CUDA is not available to torch here; use --dry-run (or --device cpu) to test on the CPU",
                  file=sys.stderr)
            return 2
        self.dev = TorchDevice(torch, self.device)
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        label = self.start_fixture()
        chosen = [s for s in sections() if s.name in self.args.sections]
        if any(s.uses_workers for s in chosen):
            try:
                self.start_pool()
            except Exception as err:  # noqa: BLE001 - without workers, run the tasks here
                self.log(f"could not start worker processes ({type(err).__name__}: {err}); "
                         "running their tasks in this process")
                self.pool = None
        for section in chosen:
            self.run_section(section)
        try:
            self.collect()
        except Exception as err:  # noqa: BLE001 - the fixture is still written
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

    def start_fixture(self) -> str:
        """Gather the environment, choose the model preset, open the fixture; returns its label."""
        env = self.environment()
        if not self.model:
            cap = env["device"].get("capability")
            self.model = preset_for_capability(cap.split(".")) if cap else "h100"
        env["settings"]["model"] = self.model
        env["settings"]["tensorcore_available"] = tensorcore_available()
        label = self.args.label or self._label(env)
        evidence = "gpu" if self.device == "cuda" else "cpu"
        created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        self.writer = FixtureWriter(self.args.out, {"label": label, "evidence": evidence, "created": created,
                                                    **env})
        self.writer.summary["device_differences"] = {}
        self.log(f"capture {label}: device {env['device'].get('name')}, model preset {self.model}, "
                 f"budget {self.args.budget:.0f}s, sections {','.join(self.args.sections)}")
        self.writer.save()
        return label

    def run_section(self, section: Section) -> None:
        """Run one section in its own try/except, record its status and save."""
        t = time.time()
        self.log(f"section {section.name} ...")
        try:
            section.run(self)
            self.writer.section(section.name, status="ok", seconds=round(time.time() - t, 2))
        except Exception as err:  # noqa: BLE001 - one failing section loses nothing else
            tb = traceback.format_exc()
            self.log(f"section {section.name} FAILED: {type(err).__name__}: {err}\n{tb}")
            self.writer.section(section.name, status="error", error=f"{type(err).__name__}: {err}",
                                traceback=tb[-4000:], seconds=round(time.time() - t, 2))
        self.writer.save()

    def _label(self, env: dict) -> str:
        day = _dt.date.today().isoformat()
        if self.device == "cuda":
            name = env["device"].get("name", "gpu").replace("NVIDIA ", "")
            return f"{slug(name)}-{day}"
        return f"cpu-torch{env['versions'].get('torch', '').split('+')[0]}-{day}"

    # ----------------------------------------------------------------- worker pool
    def start_pool(self) -> None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 2
        n = self.args.workers or max(1, min(15, cores - 1))
        self.pool = cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"),
                                           initializer=worker_init)
        self.workers = n
        self.log(f"started {n} worker processes")

    def stop_pool(self) -> None:
        if self.pool is None:
            return
        procs = list(getattr(self.pool, "_processes", {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # only the workers this capture started
            if p.is_alive():
                p.terminate()
        self.pool = None

    def submit(self, fn: Task, spec: dict, callback: Callback) -> None:
        """Run ``fn(spec)`` in a worker (here, without a pool); ``callback`` gets the result."""
        if self.pool is None:
            callback(fn(spec))
            return
        self.pending.append((self.pool.submit(fn, spec), callback))

    def finalizer(self, fn: Callable[[], None]) -> None:
        self.finalizers.append(fn)

    def collect(self) -> None:
        """Hand worker results to their callbacks as they arrive; at the deadline, give
        up on the rest (they are recorded as skipped)."""
        futs = dict(self.pending)
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
        for fin in self.finalizers:
            self._call(fin)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a result callback; a failing one is logged, the others still run."""
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001
            self.log(f"handling a worker result FAILED: {type(err).__name__}: {err}\n{traceback.format_exc()}")

    # ----------------------------------------------------------------- what sections see
    def devices(self) -> list[str]:
        if self.device == "cuda" and not self.args.no_cpu_compare:
            return ["cuda", "cpu"]
        return [self.device]

    # ----------------------------------------------------------------- environment
    def environment(self) -> dict:
        """Device, versions and settings for the fixture's summary."""
        torch = self.torch
        import ml_dtypes
        dev: dict[str, Any] = {}
        ver: dict[str, Any] = {}
        settings: dict[str, Any] = {}
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

    # ----------------------------------------------------------------- summary and README draft
    def table_rows(self) -> list[tuple[str, int, int | None, int | None]]:
        return [(c["name"], int(c.get("cases") or 0), c.get("matches"), c.get("mismatches"))
                for c in self.writer.summary["checks"]]

    def write_readme(self, label: str) -> None:
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
def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def _nvidia_smi(field: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:  # noqa: BLE001
        return None


def _cublas_versions() -> dict:
    """cuBLAS / cuBLASLt versions of the libraries loaded in this process."""
    import ctypes
    out: dict = {}
    try:
        maps = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return out
    libs: dict[str, str] = {}
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
def _parser(names: Sequence[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m floatfmt.gpu.capture",
                                description="Capture GPU casts and matmuls next to floatfmt's predictions.")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--dry-run", action="store_true",
                   help="torch on the CPU, tiny GEMMs, 4 sweep chunks: tests the script without a GPU")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--sections", default=",".join(names),
                   help=f"comma-separated subset of {','.join(names)}")
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


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (``python -m floatfmt.gpu.capture --help``); returns the exit status."""
    names = [s.name for s in sections()]
    args = _parser(names).parse_args(argv)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = sorted(set(args.sections) - set(names))
    if bad:
        print(f"unknown section(s) {', '.join(bad)}; valid: {', '.join(names)}", file=sys.stderr)
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
