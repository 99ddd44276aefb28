"""GEMM checks shared by the ``tf32``, ``probes`` and ``random`` sections.

A probe (``floatfmt.gpu.probes.Probe``) is a pair of K-vectors whose dot product
shows one property of a matrix unit. ``dots_check`` runs each probe as a
``size x K x size`` GEMM with the vectors in row 0 of A and column 0 of B (zeros
elsewhere), records the device's output codes, and asks a worker for floatfmt's
prediction; ``predict_task`` is that worker task (also used by the random GEMMs).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ...core.codec import code_dtype, codes_to_values
from ...core.formats import get_format
from .. import probes as P
from ..compare import predict_dots, predict_gemm, same_bits, tensorcore_available
from ..fixture import array_key
from .context import Context

__all__ = ["GEMM_CONFIGS", "config_suffix", "dots_check", "failed_check", "predict_task"]

# (input format, output format, fast_accum) for probes and random GEMMs.
GEMM_CONFIGS = (("fp16", "fp32", None), ("fp16", "fp16", None),
                ("bf16", "fp32", None), ("bf16", "bf16", None),
                ("tf32", "fp32", None),
                ("fp8_e4m3", "fp32", True), ("fp8_e4m3", "fp32", False),
                ("fp8_e4m3", "bf16", True), ("fp8_e4m3", "bf16", False),
                ("fp8_e5m2", "fp32", True), ("fp8_e5m2", "fp32", False),
                ("fp8_e5m2", "bf16", True), ("fp8_e5m2", "bf16", False))


def config_suffix(fast: bool | None) -> str:
    """The check-name suffix of an FP8 accumulation mode (none for other inputs).

    >>> config_suffix(None), config_suffix(True), config_suffix(False)
    ('', '.fast', '.slow')
    """
    return "" if fast is None else ".fast" if fast else ".slow"


def failed_check(ctx: Context, name: str, section: str, err: BaseException) -> None:
    """Log a check that raised and record it with status ``error`` (unless a record of
    that name exists already)."""
    ctx.log(f"  {name} FAILED: {type(err).__name__}: {err}")
    try:
        ctx.writer.add_check({"name": name, "section": section, "kind": "gemm", "status": "error",
                              "error": f"{type(err).__name__}: {err}", "params": {}, "arrays": {}})
    except ValueError:
        pass


def dots_check(ctx: Context, name: str, section: str, params: dict, probes_list: Sequence[P.Probe], k: int,
               extra_params: dict | None = None) -> dict:
    """Run each probe as a GEMM (vector in row 0 / column 0), record the check and
    submit its prediction; returns the check record (filled in when the prediction
    arrives)."""
    w = ctx.writer
    out_fmt, fast = params["out_fmt"], params.get("fast_accum")
    op_fmt = params["in_fmt"] if params.get("tf32", True) else "fp32"
    size = 16 if ctx.dry else 64
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
        out, how = ctx.dev.gemm(A, B, op_fmt, out_fmt, fast, tf32=params.get("tf32", True))
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
    _predict_dots_async(ctx, rec, a_rows, b_rows, gpu)
    return rec


def _predict_dots_async(ctx: Context, rec: dict, a_vals: np.ndarray, b_vals: np.ndarray, gpu: np.ndarray) -> None:
    params = rec["params"]
    name = rec["name"]
    if not tensorcore_available() and params.get("tf32", True):
        rec.update(matches=None, mismatches=None, note="not compared: floatfmt.arith.matrixunit.tensorcore is missing")
        return
    spec = {"id": name, "form": "dots", "params": params, "a": a_vals, "b": b_vals, "deadline": ctx.deadline}

    def done(res: dict) -> None:
        if "pred" not in res:
            rec.update(matches=None, mismatches=None,
                       note=f"prediction {'skipped (time budget)' if res.get('skipped') else res.get('error')}")
            return
        pred = res["pred"]
        out_fmt = get_format(params["out_fmt"])
        ok = same_bits(gpu, pred, out_fmt)
        rec.update(matches=int(ok.sum()), mismatches=int((~ok).sum()))
        rec["arrays"]["pred"] = ctx.writer.put("matmul.npz", array_key(name, "pred"), pred)
        if params.get("probe_kinds"):
            def vals(c: Any) -> np.ndarray:
                return codes_to_values(np.asarray(c, np.int64), out_fmt)
            rec["diagnosis"] = {
                "gpu": P.diagnose_probes(params["probes"], params["probe_kinds"], params["probe_params"],
                                         vals(gpu), params["k"], params["probe_meta"]),
                "emulator": P.diagnose_probes(params["probes"], params["probe_kinds"],
                                              params["probe_params"], vals(pred), params["k"],
                                              params["probe_meta"])}

    ctx.submit(predict_task, spec, done)


def predict_task(spec: dict) -> dict:
    """Worker task: floatfmt's prediction for some dot products (``form`` ``dots``: the
    given probe vectors; ``random``: rows ``r0:r1`` of a random GEMM rebuilt from its seed)."""
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
