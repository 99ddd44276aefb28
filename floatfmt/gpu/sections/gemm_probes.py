"""Section ``probes``: the reference file's GEMM probes (precision F, truncation vs
rounding, final rounding, block size L, specials) for every configuration of
``dots.GEMM_CONFIGS`` at K = L, 2L, 4L, with 64 x K x 64 shapes; and the FP8
promotion-interval probes (``use_fast_accum`` off and on) at K = 1024 and 4096.
"""

from __future__ import annotations

from .. import probes as P
from .context import Context
from .dots import GEMM_CONFIGS, config_suffix, dots_check, failed_check

__all__ = ["NAME", "USES_WORKERS", "run", "model_blocks", "PROMOTION_POSITIONS"]

NAME = "probes"
USES_WORKERS = True
# K -> positions of the one big product among products of 1 (promotion-interval probes)
PROMOTION_POSITIONS = {1024: (0, 1, 31, 32, 63, 64, 100, 127, 128, 129, 255, 256, 511, 512, 1000),
                       4096: (0, 128, 1024, 2048)}


def model_blocks(model: str) -> dict:
    """Block size L per input format of a tensor-core preset (the reference file's
    H100 values when floatfmt.arith.matrixunit.tensorcore is missing or lacks the format)."""
    out = dict(P.DEFAULT_BLOCKS)
    try:
        from ...arith.matrixunit.tensorcore import get_model
    except ImportError:
        return out
    for fmt in out:
        try:
            out[fmt] = get_model(model, fmt).L
        except (ValueError, TypeError):
            pass
    return out


def run(ctx: Context) -> None:
    """The probe checks, then the promotion checks; a failing check is recorded as an
    error and the others still run."""
    blocks = model_blocks(ctx.model)
    for in_fmt, out_fmt, fast in GEMM_CONFIGS:
        L = blocks.get(in_fmt, P.DEFAULT_BLOCKS[in_fmt])
        for mult in (1, 2, 4):
            k = max(16, L * mult) if in_fmt.startswith("fp8") else L * mult
            name = f"probe.{in_fmt}.k{k}.{out_fmt}" + config_suffix(fast)
            params = {"in_fmt": in_fmt, "out_fmt": out_fmt, "model": ctx.model, "fast_accum": fast,
                      "tf32": True, "block": L}
            try:
                dots_check(ctx, name, "probes", params, P.gemm_probes(in_fmt, k, L), k)
            except Exception as err:  # noqa: BLE001 - recorded; the other checks still run
                failed_check(ctx, name, "probes", err)
        ctx.writer.save()
    for in_fmt in ("fp8_e4m3", "fp8_e5m2"):
        for fast in (False, True):
            for k, positions in PROMOTION_POSITIONS.items():
                if ctx.dry and k > 1024:
                    continue
                name = f"promotion.{in_fmt}.k{k}.fp32.{'fast' if fast else 'slow'}"
                params = {"in_fmt": in_fmt, "out_fmt": "fp32", "model": ctx.model, "fast_accum": fast,
                          "tf32": True}
                try:
                    dots_check(ctx, name, "probes", params, P.promotion_probes(in_fmt, k, positions), k)
                except Exception as err:  # noqa: BLE001 - recorded; the other checks still run
                    failed_check(ctx, name, "probes", err)
    ctx.writer.save()
