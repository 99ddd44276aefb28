"""Run a PyTorch model's GEMMs as hardware would: ``emulate(model, recipe)``.

Every ``nn.Linear`` of the model (and every call of the functional ``matmul`` below)
computes, in forward, with ``r = get_recipe(recipe)``:

1. ``x`` (flattened to M x K) and ``W`` (N x K) brought into ``r.fwd_fmt`` by
   ``r.scaling`` (cast, per-tensor scale, delayed scale, or MX / NVFP4 blocks along
   K, the axis the GEMM reduces over); each gives the values the matrix unit reads
   and a tensor scale (1 for cast and MX; the per-tensor scale; NVFP4's fp32 scale);
2. ``y = ff.matmul(xq, Wq.T, fmt, model=r.model, acc_fmt=r.acc_fmt, order=r.order,
   alpha=fp32(s_x * s_W), c=bias, out_fmt=r.out_fmt)``: the GEMM under the
   accumulation model, then the epilogue ``fp32(alpha * acc)``, ``fp32(acc + bias)``
   (bias cast to ``out_fmt`` first, as cuBLAS reads C in the output type) and one
   rounding to ``out_fmt``.

In backward, with ``g`` the output gradient (M x N):

3. ``g`` brought into ``r.bwd_fmt`` (delayed scaling: tensor ``"grad_output"``);
4. ``grad_x = ff.matmul(gq, Wq, ..., alpha=fp32(s_g * s_W), out_fmt=r.out_fmt)``
   (reduces over N) and ``grad_W = ff.matmul(gq.T, xq, ..., alpha=fp32(s_g * s_x),
   out_fmt=r.wgrad_fmt)`` (reduces over M).  Per-tensor operands are the forward's
   (as Transformer Engine keeps the FP8 copies); block-scaled operands are quantised
   again along the axis each backward GEMM reduces over (W along N, x and g along M,
   g along N for grad_x);
5. ``grad_b = ff.sum(g, "fp32", acc_fmt="fp32", order="pairwise", axis=0,
   out_fmt=r.wgrad_fmt)``.

Which ``fmt`` ``ff.matmul`` gets: without a model, the operands' format (``"fp32"`` when
the two differ or are block-scaled: the products are exact either way, only the
accumulator rounds); with a model and two formats (E5M2 gradients times E4M3 weights)
the preset's unit with inputs of the smallest format holding both (``e5m3``).  The
exponent the unit gives an E4M3 subnormal operand is then that format's (-14), not
E4M3's (-6): mixed-format FP8 units are not characterised by measurements (a
modelling choice).

Delayed scaling keeps one ``ff.DelayedScaling`` per layer (tensors ``"input"``,
``"weight"``, ``"grad_output"``); its ``update()`` runs at the end of the layer's
backward (or call ``update_scales(model)``).  Under DDP every rank keeps its own
history (Transformer Engine reduces amax across ranks; this does not).  The
functional ``matmul`` has no state: a delayed recipe scales its operands from their
current amax.

The numbers are computed by floatfmt's tensor functions (``ff.cast``, ``ff.quantize``,
``ff.matmul``, ``ff.sum``) on the tensors themselves, which ``floatfmt.backend.dispatch`` sends
to the numpy kernels on zero-copy views for CPU tensors and to the device code for
tensors on another device (CUDA): a model on a GPU is emulated there, never copied to
the host.  A step without device code would raise ``NotImplementedError`` naming the
function and the device (every named recipe runs on the device path today).  Results come back in the
input's dtype, checked to hold them exactly.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..core.cast import cast
from ..core.formats import get_format
from ..arith.accumulate import matmul as ff_matmul, sum as ff_sum
from ..training.delayed_scaling import DelayedScaling
from ..scaling.quantize import quantize
from ..arith.matrixunit.tensorcore import TensorCoreModel, get_model
from .recipe import Recipe, get_recipe

__all__ = ["emulate", "unemulate", "emulating", "matmul", "update_scales", "unscale_grads",
           "delayed_scaling", "Operand", "quantize_operand", "gemm",
           "linear_forward", "linear_backward", "matmul_forward", "matmul_backward"]

_ATTR = "_floatfmt_emulation"


# ------------------------------------------------------------------ tensors in and out
def _values(t: torch.Tensor) -> torch.Tensor:
    """The values of a floating-point tensor, detached, on its own device."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"emulated GEMMs take floating-point tensors, not {t.dtype}")
    return t.detach()


def _tensor(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``a`` as a tensor of ``dtype``; refuses a value that dtype would round."""
    src = a.to(torch.float64)
    out = src.to(dtype)
    if not bool(((out.to(torch.float64) == src) | torch.isnan(src)).all()):
        raise ValueError(f"an emulated result does not fit {dtype} exactly; use formats no "
                         f"wider than the tensor's dtype (and power-of-two loss scales)")
    return out


# ------------------------------------------------------------------ operands and GEMMs
@dataclass
class Operand:
    """The values a matrix unit reads (a float64 tensor), their tensor scale, and their format."""

    values: torch.Tensor
    scale: float
    fmt: str


def quantize_operand(v: torch.Tensor, fmt: str, r: Recipe, axis: int,
                     state: Any = None, name: str = "", role: str = "forward") -> Operand:
    """``v`` brought into ``fmt`` by ``r.scaling`` (``axis``: the GEMM's reduction axis,
    used by block scaling; ``state``: an ``ff.DelayedScaling`` for ``"delayed"``)."""
    if r.scaling == "none":
        c: Any = cast(v, fmt, dtype=torch.float64)  # a tensor in, a tensor out
        return Operand(c, 1.0, fmt)
    if r.scaling == "block":
        q = quantize(v, fmt, axis=axis)
        ts = 1.0 if q.tensor_scale is None else float(q.tensor_scale)
        d: Any = q.dequantize(torch.float64)
        return Operand(d / ts if ts != 1.0 else d, ts, fmt)  # exact: ts is a factor of d
    if r.scaling == "delayed" and state is not None:
        q = state.quantize(name, v, role)
    else:  # "tensor", or a delayed recipe without state: current amax
        q = quantize(v, fmt)
    e: Any = q.elements  # a tensor (q was made from one)
    return Operand(e.to(torch.float64), float(q.scale), fmt)


def _union_name(a: str, b: str) -> str:
    fa, fb = get_format(a), get_format(b)
    name = f"e{max(fa.ebits, fb.ebits)}m{max(fa.mbits, fb.mbits)}"
    get_format(name)
    return name


def gemm(a: Operand, b: Operand, r: Recipe, out_fmt: str,
         c: torch.Tensor | None = None) -> torch.Tensor:
    """``a.values @ b.values`` under ``r``'s model (or accumulator), times
    ``fp32(a.scale * b.scale)``, plus ``c``, rounded to ``out_fmt`` (see the module docstring)."""
    model: str | TensorCoreModel | None = r.model
    if r.scaling == "block" or (model is None and a.fmt != b.fmt):
        fmt = "fp32"
    elif model is None or a.fmt == b.fmt:
        fmt = a.fmt
    else:
        fmt = _union_name(a.fmt, b.fmt)
        m = get_model(model, a.fmt, r.acc_fmt)
        model = m.replace(name=f"{m.name}x{b.fmt}", fmt=fmt)
    alpha = float(cast(a.scale * b.scale, "fp32"))  # exact product of two fp32, rounded once
    kw: dict[str, Any] = dict(acc_fmt=r.acc_fmt, out_fmt=out_fmt, model=model)
    if alpha != 1.0:  # 1.0 is matmul's own default (no epilogue multiply)
        kw["alpha"] = alpha
    if model is None:
        kw["order"] = r.order
    if c is not None:
        kw["c"] = c
    return ff_matmul(a.values, b.values, fmt, **kw).to(torch.float64)


def linear_forward(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, r: Recipe,
                   state: Any = None) -> tuple[torch.Tensor, Operand, Operand]:
    """Forward of an emulated Linear on M x K inputs: (y, x operand, W operand)."""
    qx = quantize_operand(x, r.fwd_fmt, r, -1, state, "input")
    qw = quantize_operand(w, r.fwd_fmt, r, -1, state, "weight")
    c = None if b is None else b.to(torch.float64).expand(x.shape[0], w.shape[0])
    return gemm(qx, Operand(qw.values.T, qw.scale, qw.fmt), r, r.out_fmt, c), qx, qw


def linear_backward(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, qx: Operand, qw: Operand,
                    r: Recipe, state: Any = None, need_x: bool = True, need_b: bool = True
                    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """Backward of an emulated Linear: (grad_x, grad_W, grad_b) from g (M x N)."""
    block = r.scaling == "block"
    qg = quantize_operand(g, r.bwd_fmt, r, -1, state, "grad_output", "backward")
    gx = None
    if need_x:
        wq = quantize_operand(w, r.fwd_fmt, r, 0) if block else qw
        gx = gemm(qg, wq, r, r.out_fmt)
    gq = quantize_operand(g, r.bwd_fmt, r, 0) if block else qg
    xq = quantize_operand(x, r.fwd_fmt, r, 0) if block else qx
    gw = gemm(Operand(gq.values.T, gq.scale, gq.fmt), xq, r, r.wgrad_fmt)
    gb = None
    if need_b:
        gb = ff_sum(g, "fp32", acc_fmt="fp32", order="pairwise", axis=0,
                    out_fmt=r.wgrad_fmt).to(torch.float64)
    if state is not None:
        state.update()
    return gx, gw, gb


def _t(a: torch.Tensor) -> torch.Tensor:
    return a.transpose(-1, -2)


def matmul_forward(a: torch.Tensor, b: torch.Tensor, r: Recipe) -> tuple[torch.Tensor, Operand, Operand]:
    """Forward of the functional ``matmul``: a (..., M, K) @ b (..., K, N), both ``fwd_fmt``."""
    qa = quantize_operand(a, r.fwd_fmt, r, -1)
    qb = quantize_operand(b, r.fwd_fmt, r, -2)
    return gemm(qa, qb, r, r.out_fmt), qa, qb


def matmul_backward(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor, qa: Operand, qb: Operand,
                    r: Recipe) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_a, grad_b) of the functional ``matmul``: g @ b^T (reduces over N) and a^T @ g
    (over M), both rounded to ``out_fmt``."""
    block = r.scaling == "block"
    qg = quantize_operand(g, r.bwd_fmt, r, -1, None, "", "backward")
    bq = quantize_operand(b, r.fwd_fmt, r, -1) if block else qb
    ga = gemm(qg, Operand(_t(bq.values), bq.scale, bq.fmt), r, r.out_fmt)
    gq = quantize_operand(g, r.bwd_fmt, r, -2) if block else qg
    aq = quantize_operand(a, r.fwd_fmt, r, -2) if block else qa
    gb = gemm(Operand(_t(aq.values), aq.scale, aq.fmt), gq, r, r.out_fmt)
    return ga, gb


# ------------------------------------------------------------------ autograd
@dataclass
class _State:
    recipe: Recipe
    delayed: Any = None


class _LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
                st: _State) -> torch.Tensor:
        x2 = _values(x).reshape(-1, x.shape[-1])
        wv = _values(w)
        bv = None if b is None else _values(b)
        y, qx, qw = linear_forward(x2, wv, bv, st.recipe, st.delayed)
        ctx.st, ctx.np = st, (x2, wv, qx, qw)
        ctx.meta = (x.shape, x.dtype, w.dtype, None if b is None else b.dtype)
        return _tensor(y.reshape(*x.shape[:-1], w.shape[0]), x.dtype)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[Any, ...]:
        x2, wv, qx, qw = ctx.np
        shape, xd, wd, bd = ctx.meta
        g = _values(gy).reshape(-1, wv.shape[0])
        gx, gw, gb = linear_backward(g, x2, wv, qx, qw, ctx.st.recipe, ctx.st.delayed,
                                     need_x=ctx.needs_input_grad[0], need_b=bd is not None)
        return (None if gx is None else _tensor(gx.reshape(shape), xd), _tensor(gw, wd),
                None if gb is None else _tensor(gb, bd), None)


class _MatmulFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, r: Recipe) -> torch.Tensor:
        av, bv = _values(a), _values(b)
        y, qa, qb = matmul_forward(av, bv, r)
        ctx.r, ctx.np, ctx.dtypes = r, (av, bv, qa, qb), (a.dtype, b.dtype)
        return _tensor(y, a.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        av, bv, qa, qb = ctx.np
        ga, gb = matmul_backward(_values(g), av, bv, qa, qb, ctx.r)
        ad, bd = ctx.dtypes
        return _tensor(ga, ad), _tensor(gb, bd), None


def matmul(a: torch.Tensor, b: torch.Tensor, recipe: str | Recipe = "bf16") -> torch.Tensor:
    """``a @ b`` (``(..., M, K) @ (..., K, N)``, equal batch shapes) as the recipe's hardware
    computes it, differentiable: for attention-style products (``q @ k.transpose(-2, -1)``,
    ``p @ v``).  Both operands use ``fwd_fmt`` (block scaling along K), the result and
    both input gradients ``out_fmt``; gradients by the rules of the module docstring."""
    r = get_recipe(recipe)
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(f"matmul takes two torch.Tensors, not {type(a).__name__} and {type(b).__name__}")
    if a.ndim < 2 or b.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul needs (..., M, K) and (..., K, N) with equal batch shapes, not "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"matmul: tensors on two devices ({a.device} and {b.device})")
    return _MatmulFn.apply(a, b, r)


# ------------------------------------------------------------------ emulate / unemulate
def _emulated_forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return _LinearFn.apply(x, self.weight, self.bias, self.__dict__[_ATTR])


def emulate(model: nn.Module, recipe: str | Recipe) -> nn.Module:
    """Make every ``nn.Linear`` of ``model`` (the model itself included) run under
    ``recipe`` (a name of ``floatfmt.torch.recipes()`` or a ``Recipe``); returns ``model``.

    The modules and parameters stay the same objects (only each Linear's ``forward`` is
    replaced), so optimisers, ``state_dict`` and DDP wrappers made before or after keep
    working; ``unemulate(model)`` (or the ``emulating`` context manager) restores them.
    Layers that do not call ``Linear.forward`` (``nn.MultiheadAttention`` reads its
    projection weights directly) are not changed: use ``matmul`` in your own attention.

    >>> import torch, floatfmt.torch as fft
    >>> lin = torch.nn.Linear(4, 2)
    >>> _ = fft.emulate(lin, "bf16")
    >>> y = lin(torch.ones(1, 4)); _ = fft.unemulate(lin)
    """
    r = get_recipe(recipe)
    if not isinstance(model, nn.Module):
        raise TypeError(f"emulate takes an nn.Module, not {type(model).__name__}")
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if any(_ATTR in m.__dict__ for m in linears):
        raise ValueError("the model is already emulated: call unemulate(model) first")
    for m in linears:
        delayed = None
        if r.scaling == "delayed":
            delayed = DelayedScaling(history_len=r.history_len, algo=r.amax_algo, margin=r.margin,
                                        fwd_format=r.fwd_fmt, bwd_format=r.bwd_fmt)
        m.__dict__[_ATTR] = _State(r, delayed)
        m.__dict__["forward"] = types.MethodType(_emulated_forward, m)
    return model


def unemulate(model: nn.Module) -> nn.Module:
    """Undo ``emulate``: every Linear gets its own ``forward`` back; returns ``model``."""
    for m in model.modules():
        if _ATTR in m.__dict__:
            del m.__dict__[_ATTR]
            m.__dict__.pop("forward", None)
    return model


@contextlib.contextmanager
def emulating(model: nn.Module, recipe: str | Recipe) -> Iterator[nn.Module]:
    """``with emulating(model, "fp8_tensorwise"): ...``: emulate inside the block, restore after."""
    emulate(model, recipe)
    try:
        yield model
    finally:
        unemulate(model)


def update_scales(model: nn.Module) -> None:
    """Roll every delayed-scaling history of an emulated model (backward does this itself;
    call it after forward-only steps)."""
    for m in model.modules():
        st = m.__dict__.get(_ATTR)
        if st is not None and st.delayed is not None:
            st.delayed.update()


def delayed_scaling(module: nn.Module) -> Any:
    """The ``ff.DelayedScaling`` of an emulated Linear (None when its recipe has none)."""
    st = module.__dict__.get(_ATTR)
    return None if st is None else st.delayed


def unscale_grads(scaler: Any, parameters: Any) -> bool:
    """Unscale the gradients of ``parameters`` in place with an ``ff.LossScaler``
    (``grad * fp32(1/S)``); returns whether any is Inf/NaN (then skip the step, and
    call ``scaler.update()`` either way).  For ``torch.amp.GradScaler`` use its own
    ``unscale_`` / ``step`` / ``update``."""
    params = [p for p in parameters if p.grad is not None]
    grads, found = scaler.unscale([_values(p.grad) for p in params])
    for p, gv in zip(params, grads):
        p.grad.copy_(_tensor(gv.reshape(p.grad.shape), p.grad.dtype))
    return bool(found)
