"""``matmul(..., model=...)`` and ``dot(..., model=...)`` on tensors of any device: the tensor-core steps of
``floatfmt.tensorcore`` written over the array namespace (torch ops on the tensor's
device; torch is never imported here).

This is the device implementation ``floatfmt.dispatch`` calls for ``ff.matmul``
with a ``model`` on a CUDA tensor (or a CPU tensor under ``force_namespace``, which
the tests use to prove it equal to the numpy kernels).  The steps are those of the
module docstring of ``floatfmt.tensorcore`` (numpy's ``_chain_matmul_fast``), for
one block of L products at a time along K:

1. the operands are cast to the model's input format (tf32 models: to fp32, then
   to tf32 by the model's ``tf32_operands`` rule) by ``ff.cast`` on the device;
2. products are exact in float64 (inputs of at most 11 significant bits... 24 for
   tf32: 48-bit products); each has the exponent e_a + e_b, where a value's exponent
   is max(floor(log2|v|), emin) of the input format, and zero products do not
   count;
3. e_max is the largest of those exponents, the model's ``zero_exponent`` floor and
   the accumulator's exponent (when nonzero);
4. every term, the accumulator included, is truncated toward zero to a multiple of
   2**(e_max - F) by the one rounding routine (scaled by 2**(F - e_max), rounded
   toward zero to a 53-bit integer, scaled back: all exact), and the terms are added
   in float64, exactly (they are multiples of that unit below 2**(F + 2) units);
5. the sum is rounded once to the step format in the model's rounding
   (``round_values`` on the device); past its range it is +-Inf; an exact zero +0;
   where the float64 sum of the block's products and the accumulator is not finite
   (Inf or NaN operands, or an Inf accumulator), the result is that sum.

Supported on the device: every NVIDIA preset with ``c_entry="aligned"`` and float inputs
(the int8 presets, the B200 FP8 presets, whose accumulator enters after the
products, and the AMD and block-scaled units, whose steps live in ``floatfmt.fdpa``,
raise NotImplementedError), Inf / NaN operands (a block whose float64 sum
is not finite gives that sum: NaN, or the Inf), ``out_fmt``, and no epilogue
(``alpha`` 1, no ``c``).  Results are float64 tensors on the operands' device, not
differentiable.  ``order`` must be ``"sequential"`` as for the numpy path.
"""

from __future__ import annotations

import math
from typing import Any

from ._cast import cast
from ._formats import Format, get_format
from ._xp import namespace
from .rounding import STOCHASTIC, resolve_mode, resolve_overflow, round_values
from .tensorcore import TF32_OPERANDS, TensorCoreModel, get_model

__all__ = ["device_matmul", "device_dot", "tile_terms"]

_ALIGNED = Format("aligned", kind="int", bits=53)  # the aligned terms, as integers


def tile_terms(device: Any) -> int:
    """Products (L x rows x N) formed at once: 2**26 on a GPU (few, large kernels; about
    ten float64 temporaries of that size), 2**20 elsewhere (cache-sized)."""
    return 1 << 26 if device.type == "cuda" else 1 << 20


def _no(what: str, device: Any) -> NotImplementedError:
    return NotImplementedError(f"floatfmt.matmul on {device}: {what} is not implemented on the "
                               "device yet (numpy arrays and CPU tensors support it)")


def _inputs(a: Any, b: Any, fmt: str, m: TensorCoreModel, rounding: str, overflow: Any,
            ftz: bool, daz: bool) -> tuple[Any, Any, Format]:
    """The operands cast to the model's input format (as float64 tensors)."""
    t = namespace(a).t
    if m.fmt == "tf32":
        opts = dict(overflow=overflow, ftz=ftz, daz=daz)
        x = cast(cast(a, "fp32", rounding, **opts, dtype=t.float64), "tf32",
                 TF32_OPERANDS[m.tf32_operands], dtype=t.float64)
        y = cast(cast(b, "fp32", rounding, **opts, dtype=t.float64), "tf32",
                 TF32_OPERANDS[m.tf32_operands], dtype=t.float64)
    else:
        x = cast(a, m.fmt, rounding, overflow, ftz, daz, dtype=t.float64)
        y = cast(b, m.fmt, rounding, overflow, ftz, daz, dtype=t.float64)
    return x.detach(), y.detach(), get_format(m.fmt)


def _exponents(v: Any, fmt: Format, t: Any) -> Any:
    """max(floor(log2|v|), emin) (int64) for nonzero finite v, a very small sentinel for
    zeros (and non-finite v, which the caller masks)."""
    _, e = t.frexp(t.where(t.isfinite(v), v, t.zeros((), dtype=v.dtype, device=v.device)))
    e = t.clamp(e.to(t.int64) - 1, min=fmt.emin)
    return t.where(v != 0, e, t.full_like(e, -(1 << 30)))


def _truncate(v: Any, scale: Any, xp: Any) -> Any:
    """v truncated toward zero to a multiple of 2**-scale (exact scalings around the one
    rounding routine's toward-zero rounding to integers)."""
    y = v * xp.pow2(scale)
    return round_values(y, _ALIGNED, "toward_zero", "saturate") * xp.pow2(-scale)


def _step(xk: Any, yk: Any, exk: Any, eyk: Any, acc: Any, m: TensorCoreModel, cfmt: Format,
          ofmt: Format, xp: Any) -> Any:
    """One fused step: xk (l, ..., r), yk (l, ..., n) with exponents; acc (..., r, n)."""
    t = xp.t
    zero = t.zeros((), dtype=acc.dtype, device=acc.device)
    P = xk[..., :, None] * yk[..., None, :]  # exact products (l, ..., r, n)
    total = P.sum(0) + acc  # Inf / NaN detection (finite terms cannot overflow float64)
    special = ~t.isfinite(total)
    fin_p = t.isfinite(P)
    E = t.where((P != 0) & fin_p, exk[..., :, None] + eyk[..., None, :], m.zero_exponent)
    fin = t.isfinite(acc)
    cv = t.where(fin, acc, zero)
    e_max = t.maximum(t.clamp(E.amax(0), min=m.zero_exponent), _exponents(cv, cfmt, t))
    scale = m.F - e_max
    val = _truncate(t.where(fin_p, P, zero), scale, xp).sum(0) + _truncate(cv, scale, xp)
    policy = "inf" if ofmt.inf else "saturate"
    r = round_values(val, ofmt, m.rounding, policy)
    if m.overflow == "inf":
        big = val.abs() >= 2.0 ** (ofmt.emax + 1)
        r = t.where(big, t.copysign(t.full_like(val, float("inf")), val), r)
    else:
        r = t.clamp(r, -ofmt.max, ofmt.max)
    r = t.where(val == 0, zero, r)  # exact zero: +0
    return t.where(special, t.where(t.isnan(total), float("nan"), total), r)


def device_matmul(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
                  out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0,
                  beta: Any = None, c: Any = None, block: int = 32,
                  rounding: str = "nearest_even", overflow: Any = None, ftz: bool = False,
                  daz: bool = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.matmul`` with a tensor-core ``model`` on tensors of one device (the rules in
    the module docstring); the same arguments as ``ff.matmul``."""
    device = a.device
    if model is None:
        raise _no("matmul without a tensor-core model (the accumulation orders)", device)
    if order != "sequential":
        raise ValueError(f"order={order!r} does not apply with a tensor-core model: the model "
                         "fixes the order (blocks of L products chained along K)")
    if alpha != 1.0 or c is not None or (beta not in (None, 0.0)):
        raise _no("the epilogue (alpha, beta, c)", device)
    mode = resolve_mode(rounding)
    if mode in STOCHASTIC:
        raise _no("stochastic rounding of the operands", device)
    m = get_model(model, fmt, "fp32" if acc_fmt is None else acc_fmt)
    if m.fmt == "int8" or m.c_entry != "aligned":
        raise _no(f"the {m.name} model ({'int8' if m.fmt == 'int8' else 'c after'})", device)
    if m.algorithm != "t_fdpa":  # the AMD and block-scaled steps (floatfmt.fdpa): host only
        raise _no(f"the {m.name} model ({m.algorithm} step)", device)
    xp = namespace(a)
    t = xp.t
    x, y, in_fmt = _inputs(a, b, fmt, m, mode, overflow, ftz, daz)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul needs arrays, not scalars")
    x1, y1 = x.ndim == 1, y.ndim == 1
    if x1:
        x = x[None, :]
    if y1:
        y = y[:, None]
    if x.shape[-1] != y.shape[-2]:
        raise ValueError(f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} do not align")
    batch = t.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    nb = len(batch)  # the same number of batch axes on both sides, for broadcasting
    x = x.reshape((1,) * (nb - (x.ndim - 2)) + tuple(x.shape))
    y = y.reshape((1,) * (nb - (y.ndim - 2)) + tuple(y.shape))
    rows, cols, K = x.shape[-2], y.shape[-1], x.shape[-1]
    out = t.zeros(tuple(batch) + (rows, cols), dtype=t.float64, device=device)
    xK, yK = x.movedim(-1, 0), y.movedim(-2, 0)  # (K, ..., rows), (K, ..., cols)
    exK, eyK = _exponents(xK, in_fmt, t), _exponents(yK, in_fmt, t)
    per_row = max(1, math.prod(batch) * cols * min(m.L, max(K, 1)))
    step = max(1, tile_terms(device) // per_row)
    acc_fmt_, ofmt = get_format(m.acc_fmt), m.output_format
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        acc = out[..., r0:r1, :]
        cfmt = acc_fmt_
        for k0 in range(0, K, m.L):
            k1 = min(K, k0 + m.L)
            acc = _step(xK[k0:k1, ..., r0:r1], yK[k0:k1], exK[k0:k1, ..., r0:r1], eyK[k0:k1],
                        acc, m, cfmt, ofmt, xp)
            cfmt = ofmt
        out[..., r0:r1, :] = acc
    if x1:
        out = out[..., 0, :]
    if y1:
        out = out[..., 0]
    if out_fmt is not None:
        f = get_format(out_fmt)
        out = round_values(out, f, mode, resolve_overflow(overflow, f), ftz=bool(ftz))
    return out


def device_dot(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
               out_fmt: Any = None, model: Any = None, **options: Any) -> Any:
    """``ff.dot`` with a tensor-core ``model`` on tensors of one device: the dot product
    over the last axis (leading axes broadcast) is the 1 x K by K x 1 matrix product of
    ``device_matmul`` (the same fused steps along K)."""
    if model is None:
        raise _no("dot without a tensor-core model (the accumulation orders)", a.device)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("dot needs arrays, not scalars")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"dot: last axes differ ({a.shape[-1]} and {b.shape[-1]})")
    r = device_matmul(a.unsqueeze(-2), b.unsqueeze(-1), fmt, acc_fmt, order, out_fmt, model,
                      **options)
    return r[..., 0, 0]
