"""``matmul(..., model=...)``, ``dot(..., model=...)``, ``mma`` and ``block_scaled_mma`` on
tensors of any device:
the tensor-core steps of ``floatfmt.arith.matrixunit.tensorcore`` written over the array namespace (torch
ops on the tensor's device; torch is never imported here).

These are the device implementations ``floatfmt.backend.dispatch`` calls for ``ff.matmul`` /
``ff.dot`` with a ``model``, ``ff.mma`` and ``tensorcore.block_scaled_mma`` on a CUDA tensor (or a CPU tensor under
``force_namespace``, which the tests use to prove them equal to the numpy kernels for
every preset of ``ff.tensorcore_models()``).  The steps are those of the module
docstring of ``floatfmt.arith.matrixunit.tensorcore``, for one block of L products at a time along K:

1. the operands are cast to the model's input format by ``ff.cast`` on the device
   (tf32 models: to fp32 in the call's rounding, then to tf32 by the model's
   ``tf32_operands`` rule; models with ``ftz``: subnormal inputs become +0);
2. products are exact in float64 (inputs of at most 24 significant bits); each has
   the exponent e_a + e_b, where a value's exponent is max(floor(log2|v|), emin) of
   the input format;
3. T-FDPA (every NVIDIA preset): e_max is the largest of the nonzero products'
   exponents, the model's ``zero_exponent`` floor and the accumulator's exponent
   (when nonzero); every term, the accumulator included, is truncated toward zero to
   a multiple of 2**(e_max - F) by the one rounding routine (scaled by 2**(F - e_max),
   rounded toward zero to a 53-bit integer, scaled back: all exact), the terms are
   added in float64, exactly (multiples of that unit below 2**(F + 2) units), and the
   sum is rounded once to the step format in the model's rounding (past its range
   +-Inf, or +-max for ``overflow="saturate"``; an exact zero +0); where the float64
   sum of the block's products and the accumulator is not finite (Inf or NaN), the
   result is that sum (so the NVIDIA presets' steps mask neither zero nor non-finite
   products: a zero operand's exponent lies below every floor, and the lanes holding
   Inf / NaN take that sum; ``_fused``'s ``lean`` form).  With ``c_entry="after"``
   (B200 FP8) the products are fused that way from a zero accumulator and the accumulator is then added by
   ``ops_device.device_add`` (exact sum, one round-to-nearest-even);
4. the AMD steps (``e_fdpa``, ``ftz_addmul``, ``tr_fdpa``, ``gtr_fdpa``) are
   ``floatfmt.arith.matrixunit.fdpa_device.step``;
5. int8 models: integer products summed exactly (a float64 matrix product of
   integers below 2**53 is exact in any order), wrapped to int32; a NaN operand
   (no integer code) raises the numpy path's ValueError (``tensorcore.check_int_operands``);
6. block-scaled models (``block_scaled_mma``: Blackwell ST-FDPA / GST-FDPA): the scaled
   terms of ``fdpa_device.scaled_terms`` go through the T-FDPA steps of 3, ``L / group``
   terms and the accumulator per step.

The epilogue of ``matmul`` / ``dot`` is the numpy path's (``accumulate._epilogue``):
``alpha * acc`` by ``ff.mul`` in the accumulator format, ``beta * c + acc`` by
``ff.fma`` there (c first cast to ``out_fmt``, or to the accumulator format with
nearest-even when there is no ``out_fmt``), both with the call's rounding, overflow,
ftz and daz (``ops_device`` on the device); then one rounding to ``out_fmt``.

Stochastic rounding (every SR mode of ``rounding``, ``sr_bits``) applies where the numpy
path applies the call's rounding: the operands' casts, the epilogue and ``out_fmt``
(the unit's own steps are fixed by the model).  The random numbers come from one
generator per call (``rng``: a ``torch.Generator`` on the operands' device, an int
seed (a new Generator on the device seeded with it), or None: torch's default
generator of the device), one number per element of each rounding, in this order:

1. a's cast to the input format (tf32 models: to fp32), then b's;
2. ``alpha != 1``: ``ops_device.device_mul(alpha, acc)`` (alpha's cast, the
   accumulator's cast, the product's rounding);
3. ``c`` with ``beta != 0``: c's cast to ``out_fmt`` (none when there is no
   ``out_fmt``: c is then cast to the accumulator with nearest-even), then
   ``device_fma(beta, c, acc)`` (beta's, c's and the accumulator's casts, the sum's
   rounding);
4. the rounding to ``out_fmt``.

So a seed (or a Generator in a given state) reproduces the bits on its device.  numpy's
path rounds the same values with the same rule, drawing from a numpy Generator (one
stream per call there too; a cast of values already in the format draws nothing), so
a seed gives other bits; given the same random numbers the results are the same
(tests/test_torch_tensorcore_sr.py replays the torch draws into numpy's rounding).
``mma`` and ``block_scaled_mma`` take no rounding option (nearest-even casts, as on
numpy).

``dot`` / ``matmul`` without a model are ``floatfmt.arith.accumulate_device``'s,
which hands calls with a model to this module.  Block-scaled presets
(``"b200/mxfp8_e4m3"`` ...) are not ``matmul`` models (``get_model`` refuses them with
a ValueError pointing to ``ff.block_scaled_matmul``); their unit is
``tensorcore.block_scaled_mma`` here, which ``ff.block_scaled_matmul`` (quantising
its operands first, ``floatfmt.training.recipes``) calls on the device.
Results are float64 tensors on the operands' device, not differentiable.  ``order``
must be ``"sequential"`` as for the numpy path.
"""

from __future__ import annotations

import math
from typing import Any

from . import cpuunits, fdpa_device
from ...core.cast import cast
from ...core.formats import Format, get_format
from ...backend.namespace import is_tensor, namespace
from ...backend.dispatch import check_tensors
from ..ops import (OpCall as DeviceCall, add_rule as device_add, fma_rule as device_fma,
                   mul_rule as device_mul)
from ...core.rounding import STOCHASTIC, resolve_mode, resolve_overflow, round_values
from .tensorcore import (TF32_OPERANDS, TensorCoreModel, check_int_operands, get_block_model,
                         get_model, matmul_shapes, mma_shapes)

__all__ = ["device_matmul", "device_dot", "device_mma", "device_block_scaled_mma", "tile_terms"]

_ALIGNED = Format("aligned", kind="int", bits=53)  # the aligned terms, as integers
_AMD = ("e_fdpa", "ftz_addmul", "tr_fdpa", "gtr_fdpa")


def tile_terms(device: Any) -> int:
    """Products (L x rows x N) formed at once: 2**26 on a GPU (few, large kernels; about
    ten float64 temporaries of that size), 2**20 elsewhere (cache-sized)."""
    return 1 << 26 if device.type == "cuda" else 1 << 20


def _no(name: str, what: str, device: Any) -> NotImplementedError:
    return NotImplementedError(f"floatfmt.{name} on {device}: {what} is not implemented on the "
                               "device yet (numpy arrays and CPU tensors support it)")


def _tensor(v: Any, device: Any, t: Any) -> Any:
    """A tensor operand as it is; numbers and lists beside tensors as float64 tensors."""
    return v if is_tensor(v) else t.as_tensor(v, dtype=t.float64, device=device)


def _inputs(a: Any, b: Any, m: TensorCoreModel, rounding: str, overflow: Any, ftz: bool,
            daz: bool, t: Any, g: Any = None, sr_bits: Any = None) -> tuple[Any, Any, Format]:
    """The operands cast to the model's input format (float64 tensors), as
    ``tensorcore._cast_inputs``: a, then b, each drawing one number per element from
    the generator g under stochastic rounding."""
    in_fmt = get_format(m.fmt)
    opts = dict(overflow=overflow, ftz=ftz, daz=daz, rng=g, sr_bits=sr_bits, dtype=t.float64)
    if m.fmt == "tf32":
        rule = TF32_OPERANDS[m.tf32_operands]
        x = cast(cast(a, "fp32", rounding, **opts), "tf32", rule, dtype=t.float64)
        y = cast(cast(b, "fp32", rounding, **opts), "tf32", rule, dtype=t.float64)
    else:
        x = cast(a, in_fmt, rounding, **opts)
        y = cast(b, in_fmt, rounding, **opts)
    x, y = x.detach(), y.detach()
    if m.ftz:  # the unit flushes subnormal inputs to +0 (CDNA2)
        x, y = (fdpa_device.flush_to_plus_zero(v, in_fmt, namespace(v)) for v in (x, y))
    if m.daz:  # subnormal inputs read as zeros of their sign (Intel)
        x, y = cpuunits.read_as_zero(x, in_fmt), cpuunits.read_as_zero(y, in_fmt)
    if in_fmt.kind == "int":  # NaN has no integer code: the host path's ValueError
        check_int_operands(m, bool(t.isnan(x).any()), bool(t.isnan(y).any()))
    return x, y, in_fmt


def _exponents(v: Any, fmt: Format, t: Any) -> Any:
    """max(floor(log2|v|), emin) (int64) for nonzero finite v (other v: masked later)."""
    _, e = t.frexp(t.where(t.isfinite(v), v, t.zeros((), dtype=v.dtype, device=v.device)))
    return t.clamp(e.to(t.int64) - 1, min=fmt.emin)


def _truncate(v: Any, scale: Any, xp: Any) -> Any:
    """v truncated toward zero to a multiple of 2**-scale (exact scalings around the one
    rounding routine's toward-zero rounding to integers)."""
    y = v * xp.pow2(scale)
    return round_values(y, _ALIGNED, "toward_zero", "saturate") * xp.pow2(-scale)


def _units(v: Any, up: Any) -> Any:
    """v * up (``up`` = 2**scale) truncated toward zero to an integer (float64), by the one
    rounding routine."""
    return round_values(v * up, _ALIGNED, "toward_zero", "saturate")


# A zero operand's exponent in the lean T-FDPA step (``_lean``): a product with a zero
# factor gets an exponent below every model's zero_exponent floor, so it never sets e_max
# (the general step masks such products instead, a pass over every product).
_ZERO_OPERAND = -(1 << 40)


def _lean(m: TensorCoreModel, in_fmt: Format) -> bool:
    """Whether ``_chain`` may run the model's T-FDPA steps lean (``_fused(lean=True)``):
    the scale F - e_max then lies in [-1022, 1022] for every step (e_max is at least the
    zero_exponent floor and at most the largest exponent of a product of two inputs or of
    an accumulator value), so 2**scale and 2**-scale are normal powers read from bits."""
    hi = max(2 * in_fmt.emax + 1, get_format(m.acc_fmt).emax, m.output_format.emax)
    return (m.algorithm not in _AMD and m.algorithm not in cpuunits.ALGORITHMS
            and in_fmt.kind == "float" and m.F - m.zero_exponent <= 1022
            and hi - m.F <= 1022)


def _fused(P: Any, EP: Any, acc: Any, m: TensorCoreModel, cfmt: Format, ofmt: Format,
           xp: Any, lean: bool = False, keep: bool = False) -> Any:
    """One T-FDPA step, acc aligned as a term: products P (l, ..., r, n) with exponents
    EP, acc (..., r, n) of cfmt; as ``tfdpa._fused`` / ``_finish``.

    ``lean`` (``_chain`` when ``_lean`` holds; the same bits, fewer passes over the
    products): EP gives products with a zero factor an exponent below zero_exponent
    (``_ZERO_OPERAND``), so zero products need no mask; non-finite products are not
    masked either, since a lane holding one is replaced by ``special`` at the end (its
    float64 total is then Inf or NaN: finite products of inputs of at most 24 significant
    bits cannot overflow float64); the truncated terms are summed as integers (below
    2**(F + 2) each, so their sum is exact in any order) and scaled back once, by
    2**-scale read from the bits of 2**scale.  ``keep``: zero terms keep their exponent
    EP (GST-FDPA group sums, ``tfdpa.tfdpa_step``)."""
    t = xp.t
    zero = t.zeros((), dtype=acc.dtype, device=acc.device)
    total = P.sum(0) + acc  # Inf / NaN detection (finite terms cannot overflow float64)
    special = ~t.isfinite(total)
    fin = t.isfinite(acc)
    cv = t.where(fin, acc, zero)
    ec = t.where(cv != 0, _exponents(cv, cfmt, t), m.zero_exponent)
    if lean:
        e_max = t.maximum(t.clamp(EP.amax(0), min=m.zero_exponent), ec)
        bits = (m.F + 1023 - e_max) << 52  # 2**scale, scale = F - e_max in [-1022, 1022]
        up = bits.view(t.float64)
        down = ((2046 << 52) - bits).view(t.float64)  # 2**-scale
        val = (_units(P, up).sum(0) + _units(cv, up)) * down
    else:
        fin_p = t.isfinite(P)
        E = t.where(fin_p if keep else (P != 0) & fin_p, EP, m.zero_exponent)
        e_max = t.maximum(t.clamp(E.amax(0), min=m.zero_exponent), ec)
        scale = m.F - e_max
        val = _truncate(t.where(fin_p, P, zero), scale, xp).sum(0) + _truncate(cv, scale, xp)
    r = round_values(val, ofmt, m.rounding, "inf" if ofmt.inf else "saturate")
    if m.overflow == "inf":
        big = val.abs() >= 2.0 ** (ofmt.emax + 1)
        r = t.where(big, t.copysign(t.full_like(val, float("inf")), val), r)
    else:
        r = t.clamp(r, -ofmt.max, ofmt.max)
    r = t.where(val == 0, zero, r)  # exact zero: +0
    return t.where(special, t.where(t.isnan(total), float("nan"), total), r)


def _step(P: Any, EP: Any, acc: Any, m: TensorCoreModel, cfmt: Format, ofmt: Format,
          xp: Any, lean: bool = False, keep: bool = False) -> Any:
    """One step of the model over the first axis of P (as ``tfdpa.tfdpa_step``);
    ``lean``, ``keep``: see ``_fused``."""
    if m.algorithm in _AMD:
        return fdpa_device.step(P, EP, acc, m, cfmt, ofmt, xp)
    if m.algorithm in cpuunits.ALGORITHMS:  # the numpy path's step, K first here
        acc = acc.expand(P.shape[1:]).clone()
        return cpuunits.step([P[k] for k in range(P.shape[0])], acc, m.algorithm)
    if m.c_entry == "aligned":
        return _fused(P, EP, acc, m, cfmt, ofmt, xp, lean, keep)
    s = _fused(P, EP, xp.t.zeros_like(acc), m, cfmt, ofmt, xp, lean, keep)  # the products alone
    policy = "inf" if m.overflow == "inf" and ofmt.inf else "saturate"
    return device_add(s, acc, ofmt, "nearest_even", policy)  # then one RNE addition


def _chain(x: Any, y: Any, m: TensorCoreModel, in_fmt: Format, out_shape: tuple,
           c: Any, xp: Any) -> Any:
    """``x @ y`` (at least 2-D, batch axes broadcasting to ``out_shape``) through the
    model's steps in K order from the accumulator c (values of ``m.acc_fmt`` broadcast
    to out_shape; None: +0), a few output rows at a time."""
    t = xp.t
    device = x.device
    batch = tuple(out_shape[:-2])
    nb = len(batch)  # the same number of batch axes on both sides, for broadcasting
    x = x.reshape((1,) * (nb - (x.ndim - 2)) + tuple(x.shape))
    y = y.reshape((1,) * (nb - (y.ndim - 2)) + tuple(y.shape))
    rows, cols, K = out_shape[-2], out_shape[-1], x.shape[-1]
    acc0 = t.zeros(out_shape, dtype=t.float64, device=device) if c is None \
        else c.expand(out_shape)
    out = acc0.clone()
    xK, yK = x.movedim(-1, 0), y.movedim(-2, 0)  # (K, ..., rows), (K, ..., cols)
    exK, eyK = _exponents(xK, in_fmt, t), _exponents(yK, in_fmt, t)
    lean = _lean(m, in_fmt)
    if lean:  # zero operands: an exponent no product with them can raise to e_max
        exK, eyK = t.where(xK == 0, _ZERO_OPERAND, exK), t.where(yK == 0, _ZERO_OPERAND, eyK)
    per_row = max(1, math.prod(batch) * cols * min(m.L, max(K, 1)))
    step = max(1, tile_terms(device) // per_row)
    acc_fmt, ofmt = get_format(m.acc_fmt), m.output_format
    for r0 in range(0, rows if K else 0, step):
        r1 = min(rows, r0 + step)
        acc = acc0[..., r0:r1, :]
        cfmt = acc_fmt
        for k0 in range(0, K, m.L):
            k1 = min(K, k0 + m.L)
            xk, exk = xK[k0:k1, ..., r0:r1, None], exK[k0:k1, ..., r0:r1, None]
            yk, eyk = yK[k0:k1, ..., None, :], eyK[k0:k1, ..., None, :]
            acc = _step(xk * yk, exk + eyk, acc, m, cfmt, ofmt, xp, lean)
            cfmt = ofmt
        out[..., r0:r1, :] = acc
    return out


def _int32_wrap(r: Any, t: Any) -> Any:
    """Exact integer values (float64 tensor) wrapped to int32, as float64."""
    i = r.to(t.int64)
    return ((i + 2 ** 31) % 2 ** 32 - 2 ** 31).to(t.float64)


def _start(name: str, a: Any, b: Any, c: Any) -> tuple[Any, Any, Any, Any, Any]:
    """The device, the namespace and the operands as tensors on it."""
    device = check_tensors(f"floatfmt.{name}", [a, b, c])
    probe = next(v for v in (a, b, c) if is_tensor(v))
    xp = namespace(probe)
    return device, xp, _tensor(a, device, xp.t), _tensor(b, device, xp.t), xp.t


def _product(kind: str, a: Any, b: Any, fmt: Any, acc_fmt: Any, model: Any, mode: str,
             overflow: Any, ftz: bool, daz: bool, device: Any, xp: Any, g: Any = None,
             sr_bits: Any = None) -> tuple[Any, str]:
    """``tensorcore.tensorcore_product`` on the device: (values, accumulator format)."""
    t = xp.t
    m = get_model(model, fmt, "fp32" if acc_fmt is None else acc_fmt)
    x, y, in_fmt = _inputs(a, b, m, mode, overflow, ftz, daz, t, g, sr_bits)
    if kind == "dot":  # the last axes: a (..., 1, K) by (..., K, 1) matrix product
        if x.ndim == 0 or y.ndim == 0:
            raise ValueError("dot needs arrays, not scalars")
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"dot: last axes differ ({x.shape[-1]} and {y.shape[-1]})")
        x, y = x.unsqueeze(-2), y.unsqueeze(-1)
    out_shape, squeeze = matmul_shapes(tuple(x.shape), tuple(y.shape), kind)
    if x.ndim == 1:
        x = x[None, :]
    if y.ndim == 1:
        y = y[:, None]
    if m.fmt == "int8":
        r = _int32_wrap(t.matmul(x, y) if x.shape[-1] else t.zeros(out_shape, dtype=t.float64,
                                                                    device=device), t)
    else:
        r = _chain(x, y, m, in_fmt, out_shape, None, xp)
    r = r.reshape(squeeze)
    if kind == "dot":
        r = r[..., 0, 0]
    return r, ("fp32" if m.fmt == "int8" else m.acc_fmt)


def _epilogue(kind: str, r: Any, acc_fmt: str, out_fmt: Any, alpha: Any, beta: Any, c: Any,
              rounding: Any, overflow: Any, ftz: bool, daz: bool, g: Any = None,
              sr_bits: Any = None) -> Any:
    """``accumulate._epilogue`` and the final rounding of ``accumulate._final`` on the
    device: alpha * acc, then beta * c + acc, in acc_fmt; then out_fmt.  Every rounding
    with the call's mode draws from the generator g in that order (the module
    docstring)."""
    if alpha is None:
        alpha = 1.0
    if beta is None:  # cuBLAS's beta: 1 when a c is given
        beta = 0.0 if c is None else 1.0
    opts = dict(rounding=rounding, overflow=overflow, ftz=ftz, daz=daz, rng=g, sr_bits=sr_bits)
    if alpha != 1.0:
        r = device_mul(alpha, r, acc_fmt, **opts)
    if c is not None and beta != 0.0:
        # c as ops.operand_values casts it: to out_fmt with the call's options, or to the
        # accumulator with nearest-even
        c = _tensor(c, r.device, namespace(r).t)
        if out_fmt is None:
            cast_c = DeviceCall(kind, [c], acc_fmt, "nearest_even", None, False, False,
                                products=False)
        else:
            cast_c = DeviceCall(kind, [c], out_fmt, rounding, overflow, ftz, daz, sr_bits,
                                g, products=False)
        r = device_fma(beta, cast_c.operand(c), r, acc_fmt, **opts)
    if out_fmt is not None:
        f = get_format(out_fmt)
        r = round_values(r, f, resolve_mode(rounding), resolve_overflow(overflow, f),
                         ftz=bool(ftz), rng=g, sr_bits=sr_bits)
    return r


def _tensorcore_call(kind: str, a: Any, b: Any, fmt: Any, acc_fmt: Any, order: str,
                     out_fmt: Any, model: Any, alpha: Any, beta: Any, c: Any, block: Any,
                     rounding: str, overflow: Any, ftz: bool, daz: bool, rng: Any,
                     sr_bits: Any) -> Any:
    device, xp, a, b, _ = _start(kind, a, b, c)
    if model is None:
        raise _no(kind, f"{kind} without a tensor-core model (the accumulation orders)", device)
    if order != "sequential":
        raise ValueError(f"order={order!r} does not apply with a tensor-core model: the model "
                         "fixes the order (blocks of L products chained along K)")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive integer, not {block!r}")  # as on numpy
    mode = resolve_mode(rounding)
    # stochastic rounding: one generator for the whole call (a torch.Generator on the
    # device, a new one from an int seed, or None: torch's default generator)
    g = xp.generator(rng, a) if mode in STOCHASTIC else None
    r, acc = _product(kind, a, b, fmt, acc_fmt, model, mode, overflow, ftz, daz, device, xp,
                      g, sr_bits)
    return _epilogue(kind, r, acc, out_fmt, alpha, beta, c, rounding, overflow, ftz, daz, g, sr_bits)


def device_matmul(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
                  out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0,
                  beta: Any = None, c: Any = None, block: int = 32,
                  rounding: str = "nearest_even", overflow: Any = None, ftz: bool = False,
                  daz: bool = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.matmul`` with a tensor-core ``model`` on tensors of one device (the rules in
    the module docstring); the same arguments as ``ff.matmul``."""
    return _tensorcore_call("matmul", a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta,
                            c, block, rounding, overflow, ftz, daz, rng, sr_bits)


def device_dot(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
               out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0,
               beta: Any = None, c: Any = None, block: int = 32,
               rounding: str = "nearest_even", overflow: Any = None, ftz: bool = False,
               daz: bool = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.dot`` with a tensor-core ``model`` on tensors of one device: the dot product
    over the last axis (leading axes broadcast) is the (..., 1, K) by (..., K, 1) matrix
    product of ``device_matmul`` (the same fused steps along K)."""
    return _tensorcore_call("dot", a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta,
                            c, block, rounding, overflow, ftz, daz, rng, sr_bits)


def _accumulator_input(c: Any, m: TensorCoreModel, out_shape: tuple, device: Any,
                       xp: Any) -> Any:
    """``tensorcore._accumulator_input`` on the device: c as accumulator values, checked
    and broadcast to out_shape."""
    t = xp.t
    if isinstance(c, (str, bytes)) or c is None:
        raise TypeError(f"mma: c must be a number or an array of numbers, not {type(c).__name__}")
    cv = _tensor(c, device, t)
    if m.fmt == "int8":
        cv = cv.to(t.float64)
        ok = t.isfinite(cv) & (cv == t.round(cv)) & ((cv + 0.5).abs() <= 2.0 ** 31)
        if not bool(ok.all()):
            raise ValueError("mma: an int8 model's c must hold integers in the int32 range")
    else:
        cv = cast(cv, m.acc_fmt, dtype=t.float64).detach()
        if m.ftz:
            cv = fdpa_device.flush_to_plus_zero(cv, get_format(m.acc_fmt), xp)
    try:
        fits = tuple(t.broadcast_shapes(cv.shape, out_shape)) == tuple(out_shape)
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"mma: c of shape {tuple(cv.shape)} does not broadcast to the result "
                         f"shape {tuple(out_shape)}")
    return cv.expand(out_shape)


def device_mma(a: Any, b: Any, c: Any, fmt: Any, model: Any, acc_fmt: Any = "fp32") -> Any:
    """``ff.mma`` on tensors of one device: D = A.B + C with C the unit's accumulator
    input (the rules of ``tensorcore.mma`` and the module docstring)."""
    device, xp, a, b, t = _start("mma", a, b, c)
    m = get_model(model, fmt, acc_fmt)
    x, y, in_fmt = _inputs(a, b, m, "nearest_even", None, False, False, t)
    out_shape = mma_shapes(tuple(x.shape), tuple(y.shape))
    cv = _accumulator_input(c, m, out_shape, device, xp)
    if m.fmt == "int8":
        p = t.matmul(x, y) if x.shape[-1] else t.zeros(out_shape, dtype=t.float64,
                                                       device=device)
        return _int32_wrap(p + cv, t)
    return _chain(x, y, m, in_fmt, out_shape, cv, xp)


def device_block_scaled_mma(a: Any, a_scale: Any, b: Any, b_scale: Any, c: Any = 0.0,
                            model: Any = "b200", block_fmt: Any = None) -> Any:
    """``tensorcore.block_scaled_mma`` on tensors of one device: the scaled terms of
    ``fdpa_device.scaled_terms`` (ST: scaled products; GST: scaled sums of G products)
    through the T-FDPA steps, ``L / group`` terms and the accumulator per step, in K
    order, from the fp32 accumulator c."""
    device = check_tensors("floatfmt.block_scaled_mma", [a, a_scale, b, b_scale, c])
    xp = namespace(next(v for v in (a, a_scale, b, b_scale, c) if is_tensor(v)))
    t = xp.t
    m = get_block_model(model, block_fmt)
    elem, sfmt = get_format(m.fmt), get_format(m.scale_fmt or "e8m0")
    x = cast(_tensor(a, device, t), elem, dtype=t.float64).detach()
    y = cast(_tensor(b, device, t), elem, dtype=t.float64).detach()
    sx, sy = (_tensor(v, device, t).to(t.float64) for v in (a_scale, b_scale))
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise ValueError(f"block_scaled_mma: shapes {tuple(x.shape)} and {tuple(y.shape)} do "
                         "not align as (..., M, K) and (..., K, N)")
    nb = -(-x.shape[-1] // m.scale_block)
    want_x, want_y = tuple(x.shape[:-1]) + (nb,), tuple(y.shape[:-2]) + (nb, y.shape[-1])
    if tuple(sx.shape) != want_x or tuple(sy.shape) != want_y:
        raise ValueError(f"block_scaled_mma: scales of shapes {tuple(sx.shape)} and "
                         f"{tuple(sy.shape)}; {m.name} needs {want_x} and {want_y} (one per "
                         f"{m.scale_block} along K)")
    out_shape = matmul_shapes(tuple(x.shape), tuple(y.shape), "block_scaled_mma")[0]
    acc = _accumulator_input(c, m, out_shape, device, xp).clone()
    T, ET = fdpa_device.scaled_terms(x, sx, y, sy, elem, sfmt, m.scale_block, m.group, xp,
                                     m.zero_exponent)
    T, ET = T.movedim(-1, 0), ET.movedim(-1, 0)  # terms first: (n, ..., M, N)
    step_model = m.replace(L=m.L // m.group, group=1)
    cfmt, ofmt = get_format(m.acc_fmt), m.output_format
    for k0 in range(0, T.shape[0], step_model.L):
        k1 = k0 + step_model.L
        acc = _step(T[k0:k1], ET[k0:k1], acc, step_model, cfmt, ofmt, xp, keep=m.group > 1)
        cfmt = ofmt
    return acc
