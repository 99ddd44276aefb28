"""The speed figures of the capture's ``torch`` section: issue 24's ratios, measured on the
capture's device against torch's own kernels on the same device in the same run.

* ``cast``: ``ff.cast`` of float64 values (standard normal) to bf16 on the device against the numpy path
  (issue 11: at least 100x), ns per element;
* ``casts_f32``: ``ff.cast`` of a float32 tensor (standard normal) to bf16, fp16 and
  fp8_e4m3 under nearest even against torch's round trip ``t.to(D).to(torch.float32)``
  (target: no slower), the directed modes as multiples of nearest even (target: 1.5x),
  and how many elements differ from torch's round trip (a fact about torch's
  conversion on that device, not a check of floatfmt: the other sections check it);
* ``gemm_vs_sgemm``: ``ff.matmul(a, b, "bf16", model="h100")`` at 512^3 against
  torch's float32 matmul with TF32 off (target: within 100x);
* ``gemm_4096``: the 4096^3 product of the same kind, once (target: under 10 s);
* ``training_step``: one training step (forward, a fixed projection loss, backward) of
  a two-block pre-norm transformer (``nn.TransformerEncoderLayer``, width 128, 64
  tokens, batch 4) in plain float32, under ``emulating(model, "bf16")`` (the exact
  matrix-unit model) and with ``gemm="fast"`` (targets: fast within 3x, exact within
  50x plain torch).

Each figure is the best of a few runs after a warm-up, with the device synchronised
around each; each one is measured on its own, so one failure (recorded as ``error``)
loses none of the others.  A dry run (``--dry-run``: torch on the CPU, the device code
under ``force_namespace``) measures the same things on small sizes, to show they run.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable

import numpy as np

from ...arith.accumulate import matmul
from ...core.cast import cast

__all__ = ["timings", "format_timings", "best", "transformer", "TORCH_DTYPES"]

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8_e4m3": "float8_e4m3fn"}
DIRECTED = ("toward_zero", "up", "down")


def best(r: Any, fn: Callable[[], Any], repeat: int = 3, device: bool = True,
         warmup: bool = True) -> float:
    """The least wall time of ``repeat`` calls of ``fn`` (after one warm-up call when
    ``warmup``), ``r.sync()`` after each, under ``r.on_device()`` when ``device``.  ``r``:
    the torch section's runner (``torch``, ``device``, ``dry``, ``log``, ``on_device``,
    ``sync``)."""
    with (r.on_device() if device else contextlib.nullcontext()):
        if warmup:
            fn()
            r.sync()
        ts = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            r.sync()
            ts.append(time.perf_counter() - t)
    return min(ts)


def _cast_vs_numpy(r: Any, dry: bool) -> dict:
    n = (1 << 16) if dry else (1 << 24)
    x = np.random.default_rng(1).standard_normal(n)
    td = r.torch.from_numpy(x).to(r.device)
    t_dev = best(r, lambda: cast(td, "bf16"))
    t_np = best(r, lambda: cast(x, "bf16"), device=False)
    return {"elements": n, "device_ns": t_dev / n * 1e9, "numpy_ns": t_np / n * 1e9,
            "speedup": t_np / t_dev, "target": "speedup >= 100"}


def _round_trip(x: Any, dt: Any) -> Any:
    """torch's own conversion of float32 ``x`` to ``dt`` and back."""
    return x.to(dt).to(x.dtype)


def _casts_f32(r: Any, dry: bool) -> dict:
    torch = r.torch
    n = (1 << 16) if dry else (1 << 24)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(n, generator=g, dtype=torch.float32).to(r.device)
    out: dict = {"elements": n, "target": "ff <= torch round trip; directed <= 1.5x RNE"}
    for fmt, dname in TORCH_DTYPES.items():
        dt = getattr(torch, dname)
        ff_s = best(r, functools.partial(cast, x, fmt))
        rt_s = best(r, functools.partial(_round_trip, x, dt), device=False)
        with r.on_device():
            differ = int((cast(x, fmt) != _round_trip(x, dt)).sum().item())
        rec = {"ff_ns": ff_s / n * 1e9, "torch_ns": rt_s / n * 1e9, "torch_over_ff": rt_s / ff_s,
               "differ_from_torch": differ}
        for mode in DIRECTED:
            rec[f"{mode}_over_rne"] = best(r, functools.partial(cast, x, fmt, mode)) / ff_s
        out[fmt] = rec
    return out


def _gemm(r: Any, size: int, sgemm: bool) -> dict:
    """The h100 bf16 product of two size^3 float32 operands on the device: best of 3, with
    torch's SGEMM beside it when ``sgemm``; else one call, timed alone (the 4096^3 one)."""
    torch = r.torch
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g, dtype=torch.float32).to(r.device)
    b = torch.randn(size, size, generator=g, dtype=torch.float32).to(r.device)
    rec: dict = {"size": size}
    t = best(r, lambda: matmul(a, b, "bf16", model="h100"), 3 if sgemm else 1, warmup=sgemm)
    rec["ff_s"] = t
    if sgemm:
        was = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")  # (SGEMM: no TF32)
        try:
            s = best(r, lambda: a @ b, 5, device=False)
        finally:
            torch.set_float32_matmul_precision(was)
        rec.update(sgemm_s=s, ff_over_sgemm=t / s, target="ff <= 100x SGEMM")
    else:
        rec["target"] = "under 10 s at 4096^3"
    return rec


def transformer(torch: Any, e: int, vocab: int = 64) -> Any:
    """Two pre-norm transformer blocks (GELU, no dropout) between a linear embedding of
    ``vocab`` features and a linear head: the model of the step timing."""
    nn = torch.nn
    torch.manual_seed(4)
    layer = dict(d_model=e, nhead=4, dim_feedforward=4 * e, dropout=0.0, activation="gelu",
                 batch_first=True, norm_first=True)
    return nn.Sequential(nn.Linear(vocab, e), nn.TransformerEncoderLayer(**layer),
                         nn.TransformerEncoderLayer(**layer), nn.Linear(e, vocab))


def _training_step(r: Any, dry: bool) -> dict:
    from ...torch import emulating, get_recipe
    torch = r.torch
    e, t, vocab = (16, 8, 11) if dry else (128, 64, 64)
    model = transformer(torch, e, vocab).to(r.device)
    x = torch.randn(4, t, vocab, generator=torch.Generator().manual_seed(5)).to(r.device)
    w = torch.randn(4, t, vocab, generator=torch.Generator().manual_seed(6)).to(r.device)

    def step() -> None:
        model.zero_grad()
        (model(x) * w).sum().backward()

    fast = get_recipe("bf16").replace(name="bf16_fast", gemm="fast")
    plain = best(r, step, 5, device=False)
    with emulating(model, fast):
        quick = best(r, step, 3)
    with emulating(model, "bf16"):
        exact = best(r, step, 2)
    return {"model": f"2 pre-norm TransformerEncoderLayer, e={e}, tokens={t}, batch 4",
            "plain_s": plain, "exact_s": exact, "fast_s": quick, "exact_over_plain": exact / plain,
            "fast_over_plain": quick / plain, "target": "fast <= 3x, exact <= 50x plain torch"}


def timings(r: Any) -> dict:
    """Every figure above as ``{name: record}`` (``{"error": ...}`` where one failed),
    each logged with ``r.log`` as it is measured (``r``: as for ``best``)."""
    dry = r.dry
    parts: dict[str, Callable[[], dict]] = {
        "cast": lambda: _cast_vs_numpy(r, dry),
        "casts_f32": lambda: _casts_f32(r, dry),
        "gemm_vs_sgemm": lambda: _gemm(r, 64 if dry else 512, True),
        "gemm_4096": lambda: _gemm(r, 64 if dry else 4096, False),
        "training_step": lambda: _training_step(r, dry),
    }
    out: dict = {"device": r.device, "dry_run": dry}
    for name, fn in parts.items():
        t = time.perf_counter()
        try:
            out[name] = fn()
        except Exception as err:  # noqa: BLE001 - recorded, the capture goes on
            out[name] = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
        for line in format_timings({name: out[name]}):
            r.log(f"  torch timing {line}  ({time.perf_counter() - t:.1f}s)")
    return out


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def format_timings(t: dict) -> list[str]:
    """One line per figure of a ``timings`` result (for the log and ``gpu-report``).

    >>> format_timings({"gemm_vs_sgemm": {"size": 512, "ff_s": 0.25, "sgemm_s": 0.0025,
    ...                                   "ff_over_sgemm": 100.0, "target": "ff <= 100x SGEMM"}})
    ['gemm_vs_sgemm: size 512, ff_s 0.25, sgemm_s 0.0025, ff_over_sgemm 100 (target: ff <= 100x SGEMM)']
    """
    lines = []
    for name, rec in t.items():
        if not isinstance(rec, dict):
            continue
        target = f" (target: {rec['target']})" if "target" in rec else ""
        flat = []
        for k, v in rec.items():
            if k == "target":
                continue
            if isinstance(v, dict):
                flat.append(f"{k} [" + ", ".join(f"{kk} {_num(vv)}" for kk, vv in v.items()) + "]")
            else:
                flat.append(f"{k} {_num(v)}")
        lines.append(f"{name}: " + ", ".join(flat) + target)
    return lines
