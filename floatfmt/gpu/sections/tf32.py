"""Section ``tf32``: fp32 matmuls with TF32 off and on for ``probes.tf32_operand_values``
(ties on even and odd TF32 values, just past ties, random) times 1, on either operand,
telling truncation, RNE and RNA of the operands apart.
"""

from __future__ import annotations

import numpy as np

from ...core.cast import cast
from ...core.formats import get_format
from ...core.codec import codes_to_values
from .. import probes as P
from .context import Context
from .dots import dots_check

__all__ = ["NAME", "USES_WORKERS", "run"]

NAME = "tf32"
USES_WORKERS = True


def run(ctx: Context) -> None:
    """One check per (TF32 off/on, operand side): how many operands each of the
    tensor-core model's ``tf32_operands`` modes explains."""
    x = P.tf32_operand_values().astype(np.float64)
    k = 8 if ctx.dry else 64
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
            params = {"in_fmt": "tf32" if tf32 else "fp32", "out_fmt": "fp32", "model": ctx.model,
                      "tf32": tf32, "fast_accum": None}
            rec = dots_check(ctx, name, "tf32", params, probes_list, k)
            gpu_v = codes_to_values(ctx.writer.get(rec["arrays"]["out"]).astype(np.int64), get_format("fp32"))
            rec["params"]["tf32_modes"] = {m: int((v == gpu_v).sum()) for m, v in modes.items()}
            rec["params"]["tf32_modes"]["unchanged"] = int((x == gpu_v).sum())
            ctx.log(f"  {name}: of {x.size} operands, explained by " +
                    ", ".join(f"{m} {c}" for m, c in rec["params"]["tf32_modes"].items()))
    ctx.writer.save()
