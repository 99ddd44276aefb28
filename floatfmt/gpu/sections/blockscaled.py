"""Section ``blockscaled``: Blackwell block-scaled MMA probes (MXFP8, MXFP4, NVFP4).

For every block format torch can hand to cuBLAS (``BLOCK_TORCH``) and every probe of
``floatfmt.gpu.probes.blockscaled_probes`` (c-precision, in-step precision, group
sums, scale exponents, NaN and signed scales), one ``128 x K x 128`` GEMM
``torch._scaled_mm(A, B, scale_a, scale_b, out_dtype=float32)`` with the probe in row 0
of A and column 0 of B (zeros and unit scales elsewhere).  The output ``D[0, 0]`` is
recorded beside floatfmt's prediction (``tensorcore.block_scaled_mma`` with the
probe's B200 preset) and the value the reference's description gives
(``meta["expect"]``); ``floatfmt gpu-report`` replays the prediction.

Block scales go to cuBLAS in its tiled layout (``to_blocked_layout``).  This needs a
Blackwell GPU (compute capability 10.x) and a torch with block-scaled ``_scaled_mm``;
elsewhere (and in a dry run) one ``skipped`` check records the reason
(``record_checks(ctx, reason)`` records every check's inputs and prediction without
running them, which the tests use on the CPU).
The torch calls are written from torch's and cuBLAS's documented conventions but were
not run on a B200 when this section was written: a B200 session should check the
first results by hand (``expect`` beside ``out``).  MXFP6 is left out: torch has no
FP6 tensor type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.formats import get_format
from ...core.codec import values_to_codes
from ...core.packing import pack
from ...arith.matrixunit.tensorcore import block_scaled_mma, tensorcore_models
from .. import probes as P
from ..fixture import array_key
from .context import Context
from .dots import failed_check

__all__ = ["NAME", "USES_WORKERS", "run", "record_checks", "BLOCK_TORCH", "to_blocked_layout",
           "probe_operands", "skip_reason"]

NAME = "blockscaled"
USES_WORKERS = False
SIZE = 128  # M = N: one 128-row tile of scales
# block format -> (torch element dtype, torch scale dtype, elements per byte)
BLOCK_TORCH = {"mxfp8_e4m3": ("float8_e4m3fn", "float8_e8m0fnu", 1),
               "mxfp8_e5m2": ("float8_e5m2", "float8_e8m0fnu", 1),
               "mxfp4_e2m1": ("float4_e2m1fn_x2", "float8_e8m0fnu", 2),
               "nvfp4": ("float4_e2m1fn_x2", "float8_e4m3fn", 2)}


def to_blocked_layout(codes: np.ndarray) -> np.ndarray:
    """Scale codes (rows x cols: one row per row of A, or per column of B; one column per
    block along K) in cuBLAS's tiled block-scale layout, flattened.

    The matrix is padded (with code 0) to multiples of 128 rows and 4 columns and cut
    into 128 x 4 tiles, stored one after the other (tile rows first); inside a tile,
    entry (r, c) sits at ``(r % 32) * 16 + (r // 32) * 4 + c``.

    >>> t = to_blocked_layout(np.arange(128 * 4, dtype=np.uint8).reshape(128, 4) % 251)
    >>> int(t[16]), int(t[4])          # (r, c) = (1, 0) and (32, 0)
    (4, 128)
    """
    codes = np.asarray(codes)
    rows, cols = codes.shape
    R, C = -(-rows // 128) * 128, -(-cols // 4) * 4
    padded = np.zeros((R, C), codes.dtype)
    padded[:rows, :cols] = codes
    tiles = padded.reshape(R // 128, 128, C // 4, 4).transpose(0, 2, 1, 3)  # (tr, tc, 128, 4)
    inner = tiles.reshape(R // 128, C // 4, 4, 32, 4).transpose(0, 1, 3, 2, 4)  # r = 32 i + j
    return inner.reshape(-1)


def probe_operands(p: P.Probe, block_fmt: str, size: int = SIZE) -> dict:
    """Codes of A (size x K), B (K x size), and the scale matrices (size x K/B for A,
    size x K/B for B's columns) of one probe: the probe in row 0 / column 0, zero
    elements and unit scales elsewhere."""
    model = P.BLOCKSCALED_PRESETS[block_fmt][0]
    m = tensorcore_models()[model]
    elem, sfmt = get_format(m.fmt), get_format(m.scale_fmt or "e8m0")
    k, nb = p.a.size, p.meta["a_scale"].size
    A = np.zeros((size, k))
    B = np.zeros((k, size))
    A[0], B[:, 0] = p.a, p.b
    sa = np.ones((size, nb))
    sb = np.ones((size, nb))
    sa[0], sb[0] = p.meta["a_scale"], p.meta["b_scale"]
    return {"a": values_to_codes(A, elem), "b": values_to_codes(B, elem),
            "a_scale": values_to_codes(sa, sfmt), "b_scale": values_to_codes(sb, sfmt),
            "model": model}


def skip_reason(ctx: Context) -> str | None:
    """Why the section cannot run on this device (None: it can)."""
    if ctx.dry or ctx.device != "cuda":
        return "needs a Blackwell GPU (compute capability 10.x): not run in a dry run / on the CPU"
    torch = ctx.dev.torch
    cap = tuple(torch.cuda.get_device_capability())
    if cap[0] != 10:
        return f"needs a Blackwell GPU (compute capability 10.x), not {cap}"
    if not hasattr(torch, "float8_e8m0fnu") or not hasattr(torch, "float4_e2m1fn_x2"):
        return f"torch {torch.__version__} has no float8_e8m0fnu / float4_e2m1fn_x2"
    return None


def _tensor(torch: Any, codes: np.ndarray, dtype_name: str, per_byte: int, device: str) -> Any:
    """A torch tensor of the element (or scale) codes, packed two to a byte for fp4
    along the last axis (the first element in the low nibble)."""
    c = np.ascontiguousarray(codes).astype(np.uint8)
    if per_byte == 2:
        c = pack(c, "fp4_e2m1")
        c = c.reshape(codes.shape[:-1] + (codes.shape[-1] // 2,))
    t = torch.from_numpy(np.ascontiguousarray(c))
    return t.view(getattr(torch, dtype_name)).to(device)


def _scaled_mm(ctx: Context, ops: dict, block_fmt: str) -> tuple[int, int, str]:
    """D = A @ B on the device; returns (fp32 code of D[0, 0], nonzero outputs elsewhere,
    how it was called)."""
    torch = ctx.dev.torch
    edt, sdt, per = BLOCK_TORCH[block_fmt]
    A = _tensor(torch, ops["a"], edt, per, ctx.device)
    Bt = _tensor(torch, np.ascontiguousarray(ops["b"].T), edt, per, ctx.device)
    sa = _tensor(torch, to_blocked_layout(ops["a_scale"]), sdt, 1, ctx.device)
    sb = _tensor(torch, to_blocked_layout(ops["b_scale"]), sdt, 1, ctx.device)
    out = torch._scaled_mm(A, Bt.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    d = out.float().cpu().numpy()
    how = f"torch._scaled_mm({edt}, scales {sdt} in the 128x4 tiled layout, out float32)"
    return int(d[:1, :1].view(np.uint32)[0, 0]), int(np.count_nonzero(d) - (d[0, 0] != 0)), how


def _check(ctx: Context, block_fmt: str, k: int, probes: list, reason: str | None) -> None:
    w = ctx.writer
    name = f"blockscaled.{block_fmt}.k{k}"
    opss = [probe_operands(p, block_fmt) for p in probes]
    model = opss[0]["model"]
    pred = np.array([block_scaled_mma(p.a[None], p.meta["a_scale"][None], p.b[:, None],
                                      p.meta["b_scale"][:, None], 0.0, model)[0, 0]
                     for p in probes])
    expect = np.array([p.meta["expect"] for p in probes])
    rows = {"a": [o["a"][0] for o in opss], "b": [o["b"][:, 0] for o in opss],  # the probes
            "a_scale": [o["a_scale"][0] for o in opss], "b_scale": [o["b_scale"][0] for o in opss]}
    arrays = {key: w.put("blockscaled.npz", array_key(name, key), np.stack(v))
              for key, v in rows.items()}
    arrays["pred"] = w.put("blockscaled.npz", array_key(name, "pred"), P.f32_codes(pred))
    arrays["expect"] = w.put("blockscaled.npz", array_key(name, "expect"), P.f32_codes(expect))
    params: dict[str, Any] = {"block_fmt": block_fmt, "model": model, "k": k, "m": SIZE, "n": SIZE,
              "probes": [p.name for p in probes], "probe_kinds": [p.kind for p in probes],
              "probe_params": [p.param for p in probes]}
    rec: dict[str, Any] = {"name": name, "section": NAME, "kind": "blockscaled", "params": params,
           "arrays": arrays, "cases": len(probes)}
    if reason is not None:
        w.add_check({**rec, "status": "skipped", "error": reason})
        return
    outs, others, how = [], 0, ""
    for o in opss:
        code, nz, how = _scaled_mm(ctx, o, block_fmt)
        outs.append(code)
        others += nz
    gpu = np.array(outs, np.uint32)
    arrays["out"] = w.put("blockscaled.npz", array_key(name, "out"), gpu)
    params.update(method=how, others_nonzero=others)
    gv = P.f32_values(gpu)
    same = (gv == pred) | (np.isnan(gv) & np.isnan(pred))
    as_ref = (gv == expect) | (np.isnan(gv) & np.isnan(expect))
    rec.update(matches=int(same.sum()), mismatches=int((~same).sum()),
               reference_matches=int(as_ref.sum()))
    w.add_check(rec)
    ctx.log(f"  {name}: {int(same.sum())}/{len(probes)} as floatfmt predicts, "
            f"{int(as_ref.sum())} as the reference describes")


def run(ctx: Context) -> None:
    """One check per block format and probe length on a Blackwell GPU; elsewhere one
    skipped check that says why."""
    reason = skip_reason(ctx)
    if reason is not None:
        ctx.log(f"  blockscaled: {reason}")
        ctx.writer.add_check({"name": NAME, "section": NAME, "kind": "blockscaled",
                              "status": "skipped", "error": reason, "params": {}, "arrays": {}})
        return
    record_checks(ctx)


def record_checks(ctx: Context, reason: str | None = None) -> None:
    """Record every check: run on the device, or (``reason`` given) recorded as skipped
    with its inputs, prediction and expected values.  A failing check is recorded as
    an error and the others still run."""
    for block_fmt in BLOCK_TORCH:
        probes = P.blockscaled_probes(block_fmt)
        for k in sorted({p.a.size for p in probes}):
            try:
                _check(ctx, block_fmt, k, [p for p in probes if p.a.size == k], reason)
            except Exception as err:  # noqa: BLE001 - recorded; the other checks still run
                failed_check(ctx, f"blockscaled.{block_fmt}.k{k}", NAME, err)
        ctx.writer.save()
