"""``matmul(..., model=...)`` and ``dot(..., model=...)``: the tensor-core products with
the cuBLAS-style epilogue, written once over the array namespace (numpy arrays and
tensors of any device; ``floatfmt.arith.accumulate`` hands calls with a model here).

The steps (``tensorcore``'s module docstring states the unit's rule):

1. the operands are cast to the model's input format (``tensorcore._cast_inputs``:
   tf32 models to fp32 in the call's rounding, then to tf32 by ``tf32_operands``;
   models with ``ftz``: subnormal inputs become +0; ``daz``: zeros of their sign);
2. the unit's steps along K (``tensorcore.tensorcore_product``: T-FDPA, the AMD steps
   of ``fdpa``, Intel's ``cpuunits``; int8: exact sums wrapped to int32);
3. the epilogue (``epilogue``): ``alpha * acc`` by ``ff.mul`` in the accumulator
   format, ``beta * c + acc`` by ``ff.fma`` there (c first cast to ``out_fmt`` with
   the call's options, or to the accumulator format with nearest-even when there is no
   ``out_fmt``), both with the call's rounding, overflow, ftz and daz; then one
   rounding to ``out_fmt``.

Stochastic rounding (every SR mode, ``sr_bits``) applies where the call's rounding
applies: the operands' casts, the epilogue and ``out_fmt`` (the unit's own steps are
fixed by the model).  The random numbers come from one generator per call, one
number per element of each rounding, in this order: a's cast (tf32: to fp32), b's;
``alpha != 1``: ``mul(alpha, acc)``; ``c`` with ``beta != 0``: c's cast to
``out_fmt``, then ``fma(beta, c, acc)``; the rounding to ``out_fmt``.  The generator:
numpy arrays ``make_rng(rng)`` (an int seed or a numpy Generator); tensors a
``torch.Generator`` on the operands' device, an int seed (a new Generator there) or
None (torch's default generator of the device).  So a seed reproduces the bits on its
path; numpy's and torch's streams differ, the rule is the same
(tests/test_torch_tensorcore_sr.py replays the torch draws into numpy's rounding).

Block-scaled presets (``"b200/mxfp8_e4m3"`` ...) are not ``matmul`` models
(``get_model`` refuses them, pointing to ``ff.block_scaled_matmul``).  Results are
float64 (tensors on the operands' device, not differentiable).  ``order`` must be
``"sequential"``.
"""

from __future__ import annotations

from typing import Any

from ...backend.namespace import NUMPY, is_tensor, namespace
from ...core.formats import get_format
from ...core.rounding import STOCHASTIC, make_rng, resolve_mode, resolve_overflow, round_values
from .tensorcore import tensorcore_product, tile_terms

__all__ = ["model_matmul", "model_dot", "epilogue", "tile_terms"]


def _c_operand(kind: str, c: Any, fmt: Any, rounding: Any, overflow: Any, ftz: bool,
               daz: bool, g: Any, sr_bits: Any, like: Any) -> Any:
    """c as the epilogue takes it (``ops.operand_values``' rule): cast to fmt with these
    options (drawing from g under stochastic rounding).  numpy: the numpy kernel's
    ``ops.operand_values``; tensors: the rule over the namespace, ``ops.OpCall.operand``
    (``tests/test_ops_fast.py`` proves the two equal)."""
    if is_tensor(like):
        from ..ops import OpCall
        c = namespace(like).operand(c, like)
        call = OpCall(kind, [c], fmt, rounding, overflow, ftz, daz, sr_bits, g,
                          products=False)
        return call.operand(c)
    from ..ops import make_ctx, operand_values
    return operand_values(c, make_ctx(fmt, rounding, overflow, ftz, daz, g, sr_bits))[0]


def epilogue(kind: str, r: Any, acc_fmt: str, out_fmt: Any, alpha: Any, beta: Any, c: Any,
             rounding: Any, overflow: Any, ftz: bool, daz: bool, g: Any = None,
             sr_bits: Any = None) -> Any:
    """alpha * acc, then beta * c + acc, in acc_fmt (``ff.mul``, ``ff.fma``); then one
    rounding to out_fmt (None: none).  Every rounding with the call's mode draws from the
    generator g in that order (the module docstring).  r: float64 array or tensor."""
    from .. import ops
    xp = namespace(r)
    if alpha is None:
        alpha = 1.0
    if beta is None:  # cuBLAS's beta: 1 when a c is given (c is never silently ignored)
        beta = 0.0 if c is None else 1.0
    opts = dict(rounding=rounding, overflow=overflow, ftz=ftz, daz=daz, rng=g, sr_bits=sr_bits)
    if alpha != 1.0:
        r = ops.mul(alpha, r, acc_fmt, **opts)
    if c is not None and beta != 0.0:
        if out_fmt is None:
            cv = _c_operand(kind, c, acc_fmt, "nearest_even", None, False, False, None, None, r)
        else:
            cv = _c_operand(kind, c, out_fmt, rounding, overflow, ftz, daz, g, sr_bits, r)
        r = ops.fma(beta, cv, r, acc_fmt, **opts)
    r = xp.values(r)
    if out_fmt is not None:
        f = get_format(out_fmt)
        r = round_values(r, f, resolve_mode(rounding), resolve_overflow(overflow, f),
                         ftz=bool(ftz), rng=g, sr_bits=sr_bits)
    return r


def _model_call(kind: str, a: Any, b: Any, fmt: Any, acc_fmt: Any, order: str, out_fmt: Any,
                model: Any, alpha: Any, beta: Any, c: Any, block: Any, rounding: Any,
                overflow: Any, ftz: bool, daz: bool, rng: Any, sr_bits: Any) -> Any:
    if model is None:
        raise ValueError(f"{kind} without a tensor-core model is floatfmt.{kind}'s "
                         "accumulation orders (floatfmt.arith.accumulate), not this function")
    if order != "sequential":
        raise ValueError(f"order={order!r} does not apply with a tensor-core model: the model "
                         "fixes the order (blocks of L products chained along K)")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive integer, not {block!r}")
    like = next((v for v in (a, b, c) if is_tensor(v)), None)
    xp: Any = NUMPY if like is None else namespace(like)
    if like is not None:
        a, b = xp.operand(a, like), xp.operand(b, like)
    mode = resolve_mode(rounding)
    if mode in STOCHASTIC:  # one generator for the whole call
        g = make_rng(rng) if like is None else xp.generator(rng, like)
    else:
        if sr_bits is not None:
            raise ValueError("sr_bits applies to the stochastic roundings only")
        g = None
    r, acc = tensorcore_product(kind, a, b, fmt, model, "fp32" if acc_fmt is None else acc_fmt,
                                rounding=rounding, overflow=overflow, ftz=ftz, daz=daz, rng=g,
                                sr_bits=sr_bits)
    r = epilogue(kind, r, acc, out_fmt, alpha, beta, c, rounding, overflow, ftz, daz, g, sr_bits)
    if xp is NUMPY and r.ndim == 0:
        return float(r)
    return r


def model_matmul(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
                 out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0,
                 beta: Any = None, c: Any = None, block: int = 32,
                 rounding: str = "nearest_even", overflow: Any = None, ftz: bool = False,
                 daz: bool = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.matmul`` with a tensor-core ``model`` (the rules in the module docstring),
    the same arguments as ``ff.matmul``; numpy arrays or tensors of one device."""
    return _model_call("matmul", a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, c,
                       block, rounding, overflow, ftz, daz, rng, sr_bits)


def model_dot(a: Any, b: Any, fmt: Any, acc_fmt: Any = "fp32", order: str = "sequential",
              out_fmt: Any = None, model: Any = None, *, alpha: float = 1.0,
              beta: Any = None, c: Any = None, block: int = 32,
              rounding: str = "nearest_even", overflow: Any = None, ftz: bool = False,
              daz: bool = False, rng: Any = None, sr_bits: Any = None) -> Any:
    """``ff.dot`` with a tensor-core ``model``: the fused steps along the last axis
    (leading axes broadcast); the same arguments as ``ff.dot``."""
    return _model_call("dot", a, b, fmt, acc_fmt, order, out_fmt, model, alpha, beta, c,
                       block, rounding, overflow, ftz, daz, rng, sr_bits)
