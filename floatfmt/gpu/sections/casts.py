"""Section ``casts``: float32 -> fp16, bf16, fp8_e4m3, fp8_e5m2 for the structured input
sets of ``probes.structured_cast_inputs`` (stored in full) and fp16/bf16 -> float32
for every code, on the device and (beside CUDA) on the CPU.

The overflow policy each device uses is measured first (1e6, +Inf, 2 x max) and the
prediction uses it; the record also counts the mismatches under the format's default.
"""

from __future__ import annotations

import numpy as np

from ...core.codec import codes_to_values, values_to_codes
from ...core.formats import get_format
from .. import probes as P
from ..compare import nan_codes, predict_cast, same_bits
from ..fixture import array_key
from .context import Context

__all__ = ["NAME", "run", "CAST_TARGETS", "overflow_policy", "choose_overflow", "nan_summary"]

NAME = "casts"
CAST_TARGETS = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")


def nan_summary(inputs: np.ndarray, outputs: np.ndarray, src: str, dst: str, limit: int = 16) -> dict:
    """What a device did with NaNs: the distinct NaN output codes (at most ``limit``
    listed), how many there are, and, for widening casts, how many NaN outputs
    kept the input's bits (payload shifted up) and how many kept them with the
    quiet bit set.

    >>> r = nan_summary(np.array([0x7E01, 0x7D00], np.uint16), np.array([0x7FC02000, 0x7FE00000], np.uint32),
    ...                 "fp16", "fp32")
    >>> r["nan_codes_distinct"], r["nan_payload_kept"], r["nan_payload_quieted"]
    (2, 1, 1)
    """
    sf, df = get_format(src), get_format(dst)
    codes = nan_codes(outputs, df)
    out: dict = {"nan_codes": codes[:limit], "nan_codes_distinct": len(codes)}
    with np.errstate(invalid="ignore"):
        nin = np.isnan(codes_to_values(np.asarray(inputs).astype(np.int64), sf))
    out["nan_inputs"] = int(nin.sum())
    if df.bits > sf.bits and df.nan == sf.nan == "ieee" and nin.any():
        c = np.asarray(inputs).astype(np.int64)[nin]
        sign = (c >> (sf.bits - 1)) & 1
        payload = c & ((1 << sf.mbits) - 1)
        shifted = ((sign << (df.bits - 1)) | (((1 << df.ebits) - 1) << df.mbits)
                   | (payload << (df.mbits - sf.mbits)))
        got = np.asarray(outputs).astype(np.int64)[nin]
        out["nan_payload_kept"] = int((got == shifted).sum())
        out["nan_payload_quieted"] = int(((got == (shifted | (1 << (df.mbits - 1)))) & (got != shifted)).sum())
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


def overflow_policy(ctx: Context, target: str, device: str) -> tuple[str, str]:
    """Measure the overflow policy of float32 -> ``target`` casts on ``device``."""
    fmt = get_format(target)
    probe_vals = [1e6, float("inf"), 2 * fmt.max] if fmt.max * 2 < 3e38 else [float("inf")]
    codes = P.f32_codes(np.array(probe_vals, np.float64))
    outs = ctx.dev.cast(codes, "fp32", target, device)
    return choose_overflow(target, {v: int(c) for v, c in zip(probe_vals, outs)})


def run(ctx: Context) -> None:
    """Record the structured float32 casts and the all-codes widening casts."""
    w = ctx.writer
    for target in CAST_TARGETS:
        x = P.structured_cast_inputs(target)
        in_ref = w.put("casts.npz", array_key("in", target), x)
        outs = {}
        for device in ctx.devices():
            policy, evidence = overflow_policy(ctx, target, device)
            ctx.policies[(target, device)] = (policy, evidence)
            gpu = ctx.dev.cast(x, "fp32", target, device)
            outs[device] = gpu
            _record_cast(ctx, f"cast.fp32-{target}.{device}", "fp32", target, device, x, in_ref, gpu,
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
        for device in ctx.devices():
            gpu = ctx.dev.cast(x, src, "fp32", device)
            _record_cast(ctx, f"cast.{src}-fp32.{device}", src, "fp32", device, x, in_ref, gpu, "inf", "")
    w.save()


def _record_cast(ctx: Context, name: str, src: str, dst: str, device: str, x: np.ndarray, in_ref: str,
                 gpu: np.ndarray, policy: str, evidence: str) -> None:
    w = ctx.writer
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
    ctx.log(f"  {name}: {x.size} cases, {bad.size} mismatches (overflow={policy})")
