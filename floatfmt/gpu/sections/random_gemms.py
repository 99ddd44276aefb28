"""Section ``random``: per configuration of ``dots.GEMM_CONFIGS``, 6 matmuls 64 x K x 64
of random operands (K = 16, 4096 and four log-uniform multiples of 16 between; 24,576
dot products; exponents over +-20 binades clipped to the format; random signs), each run
twice to see whether the device is deterministic. Operands are rebuilt from their seeds,
so the fixture stores seeds and outputs, and the predictions are computed by workers
8 rows at a time.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...core.formats import Format, get_format
from ...core.codec import code_dtype
from .. import probes as P
from ..compare import same_bits, tensorcore_available
from ..fixture import FixtureWriter, array_key
from .context import Context
from .dots import GEMM_CONFIGS, config_suffix, failed_check, predict_task

__all__ = ["NAME", "USES_WORKERS", "run", "random_plan"]

NAME = "random"
USES_WORKERS = True


def random_plan(in_fmt: str, out_fmt: str, fast: bool | None, dry: bool = False) -> list[dict]:
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


def run(ctx: Context) -> None:
    """One check per configuration; a failing one is recorded and the others run."""
    for in_fmt, out_fmt, fast in GEMM_CONFIGS:
        name = f"random.{in_fmt}.{out_fmt}" + config_suffix(fast)
        try:
            _random_check(ctx, name, in_fmt, out_fmt, fast)
        except Exception as err:  # noqa: BLE001 - recorded; the other checks still run
            failed_check(ctx, name, "random", err)
        ctx.writer.save()


def _random_check(ctx: Context, name: str, in_fmt: str, out_fmt: str, fast: bool | None) -> None:
    w = ctx.writer
    plan = random_plan(in_fmt, out_fmt, fast, ctx.dry)
    params: dict = {"in_fmt": in_fmt, "out_fmt": out_fmt, "model": ctx.model, "fast_accum": fast,
                    "tf32": True, "form": "random", "parts": []}
    how = ""
    for j, part in enumerate(plan):
        ac, bc = P.random_operands(part["seed"], in_fmt, part["m"], part["k"], part["n"], part["spread"])
        out1, how = ctx.dev.gemm(ac, bc, in_fmt, out_fmt, fast)
        out2, _ = ctx.dev.gemm(ac, bc, in_fmt, out_fmt, fast)
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
    ctx.log(f"  {name}: {len(plan)} matmuls, K = {[p['k'] for p in plan]}, {cases} dot products"
            + (f", NOT deterministic ({nondet} outputs differ)" if nondet else ", deterministic"))
    if not tensorcore_available():
        rec.update(matches=None, mismatches=None, note="not compared: floatfmt.arith.matrixunit.tensorcore is missing")
        return
    _submit_predictions(ctx, rec, get_format(out_fmt))


def _submit_predictions(ctx: Context, rec: dict, ofmt: Format) -> None:
    """Submit the prediction tasks of a random check, ``rows_per_task`` rows each."""
    params, name = rec["params"], rec["name"]
    state = {"matches": 0, "mismatches": 0, "missing": 0, "left": 0}
    rows_per_task = 8 if not ctx.dry else 16
    pred_parts: dict[int, np.ndarray] = {}
    for j, part in enumerate(params["parts"]):
        pred_parts[j] = np.zeros((part["m"], part["n"]), code_dtype(ofmt))
        for r0 in range(0, part["m"], rows_per_task):
            r1 = min(part["m"], r0 + rows_per_task)
            state["left"] += 1
            spec = {"id": f"{name}/{j}/{r0}", "form": "random", "params": params,
                    "part": {k: part[k] for k in ("seed", "m", "k", "n", "spread")},
                    "rows": (r0, r1), "deadline": ctx.deadline}
            ctx.submit(predict_task, spec, _random_done(ctx.writer, rec, state, pred_parts, j, r0, r1, ofmt))


def _random_done(w: FixtureWriter, rec: dict, state: dict, pred_parts: dict[int, np.ndarray], j: int, r0: int,
                 r1: int, ofmt: Format) -> Callable[[dict], None]:
    def done(res: dict) -> None:
        state["left"] -= 1
        if "pred" in res:
            pred_parts[j][r0:r1] = res["pred"]
            gpu = w.get(rec["params"]["parts"][j]["out"])[r0:r1]
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
                rec["params"]["parts"][jj]["pred"] = w.put("matmul.npz", array_key(name, f"p{jj}", "pred"), pred)
    return done
