"""Section ``torch``: floatfmt's own torch path on the device, against the same calls on
CPU tensors (issue 11, items 9 and 10).

The other sections compare what the *GPU's kernels* do with floatfmt's prediction;
this one checks floatfmt itself running on the GPU: ``ff.cast`` / ``encode`` /
``decode`` / ``floatfmt.torch.fake_quant`` on CUDA tensors (the rounding routine
written over the array namespace, with torch ops on the device) must give the bits
the numpy kernels give on the same CPU tensors.  The other entry points are called
too: the arithmetic, ``matmul(model=...)`` (every preset but the block-scaled ones,
which have their own section; one with the epilogue), ``mma`` and ``quantize`` /
``dequantize`` of several schemes (MX, NVFP4, integer per channel and per group, FP8
2-D blocks) run on the device and are compared; those without device code yet are
recorded as ``not_implemented`` with the error's message (floatfmt refuses rather
than copying to the host).

Timings (``speed``, issues 11 and 24): ``ff.cast`` on the device against the numpy path
and against torch's own conversions, the h100 bf16 GEMM against torch's SGEMM, and an
emulated training step (exact and ``gemm="fast"``) against plain torch, all on the device.

In a dry run (``--dry-run``: torch on the CPU) the "device" calls run under
``floatfmt.backend.dispatch.force_namespace``, so the CPU runs exactly the code CUDA runs,
on small sizes.  The results go to ``summary.json`` under ``torch_path``: a list of
checks (name, cases, mismatches, status, note, seconds) and the timings (kept apart
from ``checks``, whose records replay GPU kernels against predictions).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import numpy as np

from ...core.cast import cast
from ...arith.accumulate import matmul, sum as acc_sum
from ...core.codec import decode, encode
from ...backend.dispatch import force_namespace
from ...core.formats import get_format
from ...arith.ops import add, div, fma, sqrt
from ...core.rounding import MODES, STOCHASTIC, resolve_overflow
from ...scaling.quantize import quantize
from ...scaling.quantized_tensor import dequantize
from ...arith.matrixunit.tensorcore import mma, tensorcore_models
from . import speed
from .context import Context

__all__ = ["NAME", "run", "torch_section", "CAST_FORMATS"]

NAME = "torch"

CAST_FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp4_e2m1", "int8", "e8m0")
_DETERMINISTIC = tuple(m for m in MODES if m not in STOCHASTIC)


def _inputs(n: int, seed: int = 0) -> np.ndarray:
    """n float64 values over and beyond every listed format's range (exponents -160..160,
    random signs and 52-bit significands), with zeros, Inf, NaN and subnormals."""
    rng = np.random.default_rng(seed)
    x = np.ldexp(rng.uniform(1.0, 2.0, n), rng.integers(-160, 161, n))
    x *= np.where(rng.random(n) < 0.5, -1.0, 1.0)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -2.0 ** -1022, 448.0]
    return x


def _bad(got: np.ndarray, want: np.ndarray) -> int:
    """Elements that differ as stored values (NaN by class, the sign of zero counted)."""
    g = np.asarray(got, np.float64)
    w = np.asarray(want, np.float64)
    same = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
    return int((~same).sum())


def _preset_matmul(preset: str, fmt: str) -> Callable[[Any, Any], Any]:
    def call(p: Any, q: Any) -> Any:
        return matmul(p, q, fmt, model=preset)
    return call


class _Run:
    """Runs checks: the device side under ``force_namespace`` in a dry run."""

    def __init__(self, torch: Any, device: str, dry: bool, log: Callable[[str], None]):
        self.torch, self.device, self.dry, self.log = torch, device, dry, log
        self.checks: list[dict] = []

    def on_device(self) -> Any:
        return force_namespace() if self.device == "cpu" else contextlib.nullcontext()

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def check(self, name: str, fn: Callable[[], tuple[int, int]]) -> None:
        """fn() -> (cases, mismatches); exceptions become the check's status."""
        t = time.time()
        rec: dict = {"name": name}
        try:
            cases, bad = fn()
            rec.update(cases=cases, mismatches=bad, status="ok" if bad == 0 else "mismatch")
        except NotImplementedError as err:
            rec.update(cases=0, mismatches=None, status="not_implemented", note=str(err)[:300])
        except Exception as err:  # noqa: BLE001 - recorded, the capture goes on
            rec.update(cases=0, mismatches=None, status="error",
                       note=f"{type(err).__name__}: {str(err)[:300]}")
        rec["seconds"] = round(time.time() - t, 3)
        self.checks.append(rec)
        self.log(f"  torch {name}: {rec['status']} ({rec['cases']} cases, "
                 f"{rec['mismatches']} mismatches, {rec['seconds']}s)")

    # ------------------------------------------------------------------ the checks
    def casts(self, x: np.ndarray) -> None:
        torch = self.torch
        tc = torch.from_numpy(x)
        td = tc.to(self.device)
        for name in CAST_FORMATS:
            f = get_format(name)
            policies = sorted({f.default_overflow, "saturate"} - ({"wrap"} if f.kind != "int" else set()))
            for p in list(policies):
                try:
                    resolve_overflow(p, f)
                except ValueError:
                    policies.remove(p)

            def run(name: str = name, policies: list = policies) -> tuple[int, int]:
                bad = cases = 0
                for mode in _DETERMINISTIC:
                    for pol in policies:
                        want = cast(tc, name, mode, pol).numpy()
                        with self.on_device():
                            got = cast(td, name, mode, pol)
                        assert got.device.type == self.device
                        bad += _bad(got.cpu().numpy(), want)
                        cases += x.size
                return cases, bad
            self.check(f"cast.{name}", run)

    def narrow_inputs(self, x: np.ndarray) -> None:
        torch = self.torch

        def run() -> tuple[int, int]:
            bad = cases = 0
            for dt in (torch.float32, torch.float16, torch.bfloat16):
                tc = torch.from_numpy(x).to(dt)
                for name in ("bf16", "fp8_e4m3", "fp4_e2m1"):
                    want = cast(tc, name, "nearest_even", "saturate")
                    with self.on_device():
                        got = cast(tc.to(self.device), name, "nearest_even", "saturate")
                    bad += _bad(got.cpu().to(torch.float64).numpy(),
                                want.to(torch.float64).numpy()) + int(got.dtype != want.dtype)
                    cases += x.size
            return cases, bad
        self.check("cast.narrow_dtypes", run)

    def codec(self, x: np.ndarray) -> None:
        torch = self.torch
        tc = torch.from_numpy(np.nan_to_num(x, nan=0.0))  # fp4 has no NaN code

        def run() -> tuple[int, int]:
            bad = cases = 0
            for name in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"):
                want = encode(tc, name, overflow="saturate")
                with self.on_device():
                    got = encode(tc.to(self.device), name, overflow="saturate")
                    back: Any = decode(got, name)
                ok_codes = got.cpu().to(torch.int64).numpy() == want.to(torch.int64).numpy()
                bad += int((~ok_codes).sum())
                ref: Any = decode(want, name)
                bad += _bad(back.cpu().numpy(), ref.numpy())
                cases += 2 * x.size
            return cases, bad
        self.check("encode_decode", run)

    def stochastic(self, x: np.ndarray) -> None:
        torch = self.torch
        td = torch.from_numpy(x).to(self.device)
        tc = torch.from_numpy(x)

        def run() -> tuple[int, int]:
            with self.on_device():
                a = cast(td, "bf16", "stochastic", "saturate", rng=5).cpu().numpy()
                b = cast(td, "bf16", "stochastic", "saturate", rng=5).cpu().numpy()
            lo = cast(tc, "bf16", "down", "saturate").numpy()
            hi = cast(tc, "bf16", "up", "saturate").numpy()
            off = ~((a == lo) | (a == hi) | (np.isnan(a) & np.isnan(lo)))
            return 2 * x.size, _bad(a, b) + int(off.sum())
        self.check("cast.stochastic_seeded", run)

    def fake_quant(self, x: np.ndarray) -> None:
        torch = self.torch

        def run() -> tuple[int, int]:
            from ...torch import fake_quant
            xs = np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0).reshape(-1, 64)
            xs = np.clip(xs, -1e30, 1e30)
            tc = torch.from_numpy(xs)
            bad = cases = 0
            for fmt in ("int8", "fp8_e4m3", "fp4_e2m1"):
                for axis in (None, 0):
                    want = fake_quant(tc, fmt, axis=axis).numpy()
                    with self.on_device():
                        got = fake_quant(tc.to(self.device), fmt, axis=axis)
                    bad += _bad(got.cpu().numpy(), want)
                    cases += xs.size
            return cases, bad
        self.check("fake_quant", run)

    def not_yet_on_device(self) -> None:
        """The entries without device code: compared if they run, else recorded."""
        torch = self.torch
        rng = np.random.default_rng(3)
        a, b = rng.standard_normal((16, 64)), rng.standard_normal((64, 8))
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        calls: dict[str, Callable[[Any, Any], Any]] = {
            "ops.add": lambda p, q: add(p, p, "bf16"),
            "ops.fma": lambda p, q: fma(p, p, p, "fp16"),
            "ops.div": lambda p, q: div(p, p.flip(-1), "bf16", "toward_zero"),
            "ops.sqrt": lambda p, q: sqrt(p.abs(), "fp32", "up"),
            "sum": lambda p, q: acc_sum(p, "bf16", acc_fmt="fp32"),
        }
        for preset, m in sorted(tensorcore_models().items()):
            if m.algorithm not in ("st_fdpa", "gst_fdpa"):  # block-scaled: own section
                calls[f"matmul.{preset}"] = _preset_matmul(preset, m.fmt)
        calls["matmul.h100/bf16.epilogue"] = lambda p, q: matmul(
            p, q, "bf16", model="h100", alpha=0.5, c=p[:, :8], out_fmt="bf16")
        calls["mma.b200/fp8_e4m3"] = lambda p, q: mma(p, q, p[:, :8], "fp8_e4m3", "b200")
        calls["quantize.mxfp8"] = lambda p, q: dequantize(quantize(p, "mxfp8"))
        calls["quantize.mxfp4.rceil"] = lambda p, q: dequantize(
            quantize(p, "mxfp4_e2m1", scale_rounding="rceil", axis=0))
        calls["quantize.nvfp4"] = lambda p, q: dequantize(quantize(p, "nvfp4"))
        calls["quantize.int8.channel"] = lambda p, q: dequantize(
            quantize(p, "int8", granularity="channel", scheme="asymmetric"))
        calls["quantize.int4.group"] = lambda p, q: dequantize(
            quantize(p, "int4", granularity="group", group_size=16))
        calls["quantize.fp8_e4m3.block"] = lambda p, q: dequantize(
            quantize(p, "fp8_e4m3", granularity="block", block=(8, 32)))
        for name, call in calls.items():
            def run(call: Callable[[Any, Any], Any] = call) -> tuple[int, int]:
                want = call(ta, tb)
                with self.on_device():
                    got = call(ta.to(self.device), tb.to(self.device))
                w = want.numpy() if hasattr(want, "numpy") else np.asarray(want)
                return int(np.size(w)), _bad(got.cpu().numpy(), w)
            self.check(name, run)


def torch_section(torch: Any, device: str, dry: bool, log: Callable[[str], None]) -> dict:
    """Run the section; returns ``{"checks": [...], "timings": {...}}`` for summary.json.

    ``device`` is ``"cuda"`` (a GPU capture) or ``"cpu"`` (a dry run: the device calls
    run the namespace code on the CPU).  No check raises: failures are recorded."""
    r = _Run(torch, device, dry, log)
    x = _inputs((1 << 12) if dry else (1 << 20))
    r.casts(x)
    r.narrow_inputs(x[: 1 << 12])
    r.codec(x)
    r.stochastic(x)
    r.fake_quant(x[: 1 << 14])
    r.not_yet_on_device()
    timings = speed.timings(r)
    bad = [c["name"] for c in r.checks if c["status"] in ("mismatch", "error")]
    log(f"  torch: {len(r.checks)} checks, {len(bad)} with mismatches or errors"
        + (f" ({', '.join(bad)})" if bad else ""))
    return {"device": device, "checks": r.checks, "timings": timings}


def run(ctx: Context) -> None:
    """The section as the capture runner calls it."""
    ctx.writer.summary["torch_path"] = torch_section(ctx.dev.torch, ctx.device, ctx.dry, ctx.log)
    ctx.writer.save()
