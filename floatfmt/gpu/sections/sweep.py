"""Section ``sweep``: float32 -> fp16, bf16, fp8_e4m3, fp8_e5m2 for all 2^32 float32
patterns, in chunks of 2^``--sweep-chunk-bits`` compared with floatfmt in worker
processes. Only mismatch counts, the first ``--max-mismatches`` mismatching inputs
per target, the NaN codes seen and (beside CUDA) the CPU-vs-device differences are
kept. Chunks run in bit-reversed order, so a sweep cut short by the time budget
still samples every region evenly.
"""

from __future__ import annotations

import time

import numpy as np

from ...core.cast import cast
from ...core.formats import Format, get_format
from ..._version import __version__ as FLOATFMT_VERSION
from ...core.codec import code_dtype, codes_to_values, values_to_codes
from ..device import TORCH_DTYPES, to_codes
from ..fixture import array_key
from .casts import CAST_TARGETS, overflow_policy
from .context import Context

__all__ = ["NAME", "USES_WORKERS", "run", "sweep_order", "sweep_task"]

NAME = "sweep"
USES_WORKERS = True


def sweep_order(n_chunks: int) -> list[int]:
    """Chunk indices in bit-reversed order, so a sweep cut short still samples
    every region of the 2^32 patterns evenly.

    >>> sweep_order(8)
    [0, 4, 2, 6, 1, 5, 3, 7]
    """
    bits = max(1, (n_chunks - 1).bit_length())
    order = sorted(range(1 << bits), key=lambda i: int(format(i, f"0{bits}b")[::-1], 2))
    return [i for i in order if i < n_chunks]


def run(ctx: Context) -> None:
    """Submit the sweep's chunks; the results are tallied as they arrive and recorded
    by a finalizer once every chunk is in (or skipped at the deadline)."""
    args = ctx.args
    bits = args.sweep_chunk_bits
    n_chunks = 1 << (32 - bits)
    order = sweep_order(n_chunks)[:args.sweep_chunks or (4 if ctx.dry else n_chunks)]
    chosen = {t: ctx.policies.get((t, ctx.device)) or _policy(ctx, t) for t in CAST_TARGETS}
    targets = [(t, chosen[t][0]) for t in CAST_TARGETS]
    cpu_compare = ctx.device == "cuda" and not args.no_cpu_compare
    tally = _Tally([t for t, _ in targets], args.max_mismatches)
    t_start = time.time()
    for idx in order:
        spec = {"index": idx, "start": idx << bits, "count": 1 << bits, "targets": targets,
                "device": ctx.device, "deadline": ctx.deadline - 5, "keep": args.max_mismatches,
                "cpu_compare": cpu_compare}
        ctx.submit(sweep_task, spec, tally.add)
    ctx.log(f"  sweep: {len(order)} chunks of 2^{bits} submitted to {ctx.workers} workers")

    def finish() -> None:
        for t, policy in targets:
            _record_target(ctx, tally, t, policy, chosen[t][1], n_chunks, bits, cpu_compare)
        ctx.writer.section("sweep", chunks_done=tally.chunks, chunks_skipped=tally.skipped,
                           wall_seconds=round(time.time() - t_start, 1),
                           worker_seconds=round(tally.seconds, 1), errors=tally.errors[:5])
        ctx.log(f"  sweep: {tally.chunks} of {len(order)} chunks done ({tally.cases} patterns), "
                f"{tally.skipped} skipped")

    ctx.finalizer(finish)


def _policy(ctx: Context, target: str) -> tuple[str, str]:
    try:
        return overflow_policy(ctx, target, ctx.device)
    except Exception as err:  # noqa: BLE001 - the sweep still runs, under the default policy
        return get_format(target).default_overflow, f"probe failed: {err}"


class _Tally:
    """The sweep's results so far: counts, and the first ``keep`` mismatches per target."""

    def __init__(self, targets: list[str], keep: int):
        self.keep = keep
        self.state: dict[str, dict] = {t: {"mismatches": 0, "inputs": [], "gpu": [], "pred": [], "nan": set(),
                                           "cpu_diff": 0, "cpu_inputs": [], "cpu_codes": []} for t in targets}
        self.chunks = self.cases = self.skipped = 0
        self.seconds = 0.0
        self.errors: list[str] = []

    def add(self, res: dict) -> None:
        """Fold in one chunk's result (a worker's ``sweep_task`` return value)."""
        if res.get("skipped") or res.get("error"):
            self.skipped += 1
            if res.get("error"):
                self.errors.append(res["error"])
            return
        self.chunks += 1
        self.cases += res["count"]
        self.seconds += res["seconds"]
        for t, r in res["targets"].items():
            s = self.state[t]
            s["mismatches"] += r["mismatches"]
            room = self.keep - len(s["inputs"])
            s["inputs"] += r["inputs"][:room]
            s["gpu"] += r["gpu"][:room]
            s["pred"] += r["pred"][:room]
            s["nan"].update(r["nan_codes"])
            s["cpu_diff"] += r["cpu_diff"]
            room = self.keep - len(s["cpu_inputs"])
            s["cpu_inputs"] += r["cpu_inputs"][:room]
            s["cpu_codes"] += r["cpu_codes"][:room]


def _record_target(ctx: Context, tally: _Tally, t: str, policy: str, evidence: str, n_chunks: int, bits: int,
                   cpu_compare: bool) -> None:
    w = ctx.writer
    s = tally.state[t]
    fmt = get_format(t)
    name = f"sweep.fp32-{t}.{ctx.device}"
    arrays = {}
    if s["inputs"]:
        order_i = np.argsort(np.asarray(s["inputs"], np.uint64))
        arrays["inputs"] = w.put("sweep.npz", array_key(name, "in"), np.asarray(s["inputs"], np.uint32)[order_i])
        arrays["outputs"] = w.put("sweep.npz", array_key(name, "out"),
                                  np.asarray(s["gpu"], code_dtype(fmt))[order_i])
        arrays["pred_codes"] = w.put("sweep.npz", array_key(name, "pred"),
                                     np.asarray(s["pred"], code_dtype(fmt))[order_i])
    w.add_check({"name": name, "section": "sweep", "kind": "sweep",
                 "params": {"src": "fp32", "dst": t, "device": ctx.device, "overflow": policy,
                            "overflow_evidence": evidence,
                            "cases": tally.cases, "mismatches": s["mismatches"],
                            "chunks_done": tally.chunks, "chunks_total": n_chunks,
                            "chunk_bits": bits, "emulator": FLOATFMT_VERSION,
                            "nan_codes": sorted(s["nan"])[:16], "nan_codes_distinct": len(s["nan"]),
                            "stored": len(s["inputs"])},
                 "arrays": arrays, "cases": tally.cases,
                 "matches": tally.cases - s["mismatches"], "mismatches": s["mismatches"]})
    if cpu_compare:
        w.summary["device_differences"][f"fp32->{t} sweep"] = (
            f"{s['cpu_diff']} of {tally.cases} differ" + (": " + ", ".join(
                f"0x{a:08x} cpu 0x{c:x}" for a, c in zip(s["cpu_inputs"][:8], s["cpu_codes"][:8]))
                if s["cpu_diff"] else ""))
        if s["cpu_inputs"]:
            w.put("sweep.npz", array_key(name, "cpu_diff_in"), np.asarray(s["cpu_inputs"], np.uint32))
            w.put("sweep.npz", array_key(name, "cpu_diff_codes"), np.asarray(s["cpu_codes"], code_dtype(fmt)))


# ---------------------------------------------------------------------------- worker side
_TABLES: dict[str, np.ndarray] = {}


def _decode_table(fmt: Format) -> np.ndarray:
    if fmt.name not in _TABLES:
        _TABLES[fmt.name] = codes_to_values(np.arange(1 << fmt.bits, dtype=np.int64), fmt)
    return _TABLES[fmt.name]


def sweep_task(spec: dict) -> dict:
    """Worker task, one chunk of the sweep: casts on the device (and on the CPU),
    compared with floatfmt; returns counts, first mismatches and NaN codes per target."""
    t0 = time.time()
    if time.time() > spec["deadline"]:
        return {"index": spec["index"], "skipped": True}
    import torch
    device = spec["device"]
    start, count = spec["start"], spec["count"]
    u = np.arange(start, start + count, dtype=np.uint64).astype(np.uint32)
    xt = torch.from_numpy(u.view(np.int32)).view(torch.float32).to(device)
    out: dict = {"index": spec["index"], "start": start, "count": count, "targets": {}}
    for name, overflow in spec["targets"]:
        fmt = get_format(name)
        tdt = getattr(torch, TORCH_DTYPES[name])
        gpu = to_codes(xt.to(tdt), fmt.bits)
        rec = _compare_chunk(u, gpu, fmt, overflow, spec["keep"])
        if spec.get("cpu_compare") and device != "cpu":
            cpu = to_codes(torch.from_numpy(u.view(np.int32)).view(torch.float32).to(tdt), fmt.bits)
            d = np.flatnonzero(cpu != gpu)
            rec.update(cpu_diff=int(d.size), cpu_inputs=u[d[:spec["keep"]]].tolist(),
                       cpu_codes=cpu[d[:spec["keep"]]].tolist())
        out["targets"][name] = rec
    out["seconds"] = time.time() - t0
    return out


def _compare_chunk(u: np.ndarray, gpu: np.ndarray, fmt: Format, overflow: str, keep: int) -> dict:
    """Compare a device's codes for the float32 patterns ``u`` with floatfmt's cast."""
    x32 = u.view(np.float32)
    rec: dict = {"mismatches": 0, "inputs": [], "gpu": [], "pred": [], "nan_codes": set(),
                 "cpu_diff": 0, "cpu_inputs": [], "cpu_codes": []}
    step = 1 << 22
    for s in range(0, u.size, step):
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
    return rec
