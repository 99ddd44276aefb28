"""The emulated GEMM: what every GEMM of ``emulate(model, recipe)`` computes.

``floatfmt.torch.interception`` finds the GEMM-like ops of an emulated model (linear,
matmul, addmm, einsum, attention, convolutions as implicit GEMMs) and computes each
with the functions here; a linear layer (and every call of the functional ``matmul``
below) computes, in forward, with ``r = get_recipe(recipe)``:

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

Rowwise scaling (``granularity="rowwise"``, torchao's AXISWISE, preset ``"fp8_rowwise"``):
every operand gets one scale per row along the axis its GEMM reduces over (x per row and
W per output channel in forward; in backward g, W, x quantised again along each GEMM's
K, the weight gradient computed as ``g.T @ x`` as torchao does); the codes' products are
summed to the fp32 accumulator as above and the epilogue is the rowwise one of
``torch._scaled_mm``'s CUTLASS kernel, ``fp32(s_a[m] * fp32(s_b[n] * acc))``
(``_rowwise_gemm``).  Linear and matmul GEMMs only (convolutions: NotImplementedError).

With ``gemm="fast"`` (``fast_gemm``) steps 2 and 4 sum the same operands with torch's
float32 ``matmul`` instead of the model, then apply the same epilogue in IEEE float32
and the same output rounding; step 5 is torch's float32 sum, rounded once.

Which ``fmt`` ``ff.matmul`` gets: without a model, the operands' format (``"fp32"`` when
the two differ or are block-scaled: the products are exact either way, only the
accumulator rounds); with a model and two formats (E5M2 gradients times E4M3 weights)
the preset's unit with inputs of the smallest format holding both (``e5m3``).  The
exponent the unit gives an E4M3 subnormal operand is then that format's (-14), not
E4M3's (-6): mixed-format FP8 units are not characterised by measurements (a
modelling choice).

Delayed scaling keeps one ``ff.DelayedScaling`` per weight (tensors ``"input"``,
``"weight"``, ``"grad_output"``); its ``update()`` runs at the end of each backward
that uses the weight (or call ``update_scales(model)``).  Under DDP every rank keeps its own
history unless ``emulate(..., amax_group=)`` reduces the amaxes over the ranks, as
Transformer Engine does; with ``scaling="tensor"`` that group max-reduces the current
amax of every activation and output gradient operand (``floatfmt.torch.distributed``).
The functional ``matmul`` has no state: a delayed recipe scales its operands from their
current amax.

Block recipes with a block-scaled unit (``model="b200"``, ``"b200_mxf4nvf4"``, a preset
such as ``"b200/mxfp8_e4m3"``): each GEMM's operands are quantised along its K as above,
and steps 2 and 4 run on the unit, ``block_unit_gemm``: the elements and block scales
through ``tensorcore.block_scaled_mma`` from a zero accumulator (E5M2 gradients times
E4M3 weights: operands of two formats, which ``kind::mxf8f6f4`` takes), then the same
epilogue, ``alpha = fp32(s_a * s_b)`` being NVFP4's tensor scales (1 for MX).
``gemm="fast"`` sums the dequantised operands by the BLAS instead.

The numbers are computed by floatfmt's tensor functions (``ff.cast``, ``ff.quantize``,
``ff.matmul``, ``ff.sum``) on the tensors themselves, which ``floatfmt.backend.dispatch`` sends
to the numpy kernels on zero-copy views for CPU tensors and to the device code for
tensors on another device (CUDA): a model on a GPU is emulated there, never copied to
the host.  A step without device code would raise ``NotImplementedError`` naming the
function and the device (every named recipe runs on the device path today).  Results come back in the
input's dtype, checked to hold them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dataclasses

import torch

from ..core.block_formats import get_block_format
from ..core.cast import cast
from ..core.formats import get_format
from ..core.intake import holds
from ..arith.accumulate import matmul as ff_matmul, sum as ff_sum
from ..backend.fpu import ieee_entry
from ..backend.dispatch import host_kernels
from ..arith.ops import add as ff_add, mul as ff_mul
from ..scaling.quantize import quantize
from ..arith.matrixunit.gemm import epilogue
from ..arith.matrixunit.tensorcore import TensorCoreModel, block_scaled_mma, get_model
from .recipe import Recipe, get_recipe
from .distributed import quantize_reduced
from .nvfp4_operands import nvfp4_te_values

__all__ = ["matmul", "unscale_grads", "Operand", "quantize_operand", "requantized", "gemm", "fast_gemm",
           "block_unit_gemm",
           "linear_forward", "linear_backward", "matmul_forward", "matmul_backward",
           "values_of", "as_dtype"]


# ------------------------------------------------------------------ tensors in and out
def values_of(t: torch.Tensor) -> torch.Tensor:
    """The values of a floating-point tensor, detached, on its own device."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"emulated GEMMs take floating-point tensors, not {t.dtype}")
    return t.detach()


def as_dtype(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``a`` as a tensor of ``dtype``; refuses a value that dtype would round (``a``
    itself when it is of ``dtype`` already: nothing can round)."""
    if a.dtype == dtype:
        return a
    src = a.to(torch.float64)
    out = src.to(dtype)
    back = out.to(torch.float64)
    if not torch.equal(back, src) and not bool(((back == src) | torch.isnan(src)).all()):
        raise ValueError(f"an emulated result does not fit {dtype} exactly; use formats no "
                         f"wider than the tensor's dtype (and power-of-two loss scales)")
    return out


# ------------------------------------------------------------------ operands and GEMMs
def _f32_holds(fmt: str) -> bool:
    """Whether float32 holds every value of ``fmt``."""
    return holds(get_format("fp32"), get_format(fmt))


def carrier(r: Recipe, fmt: str) -> torch.dtype:
    """The dtype an operand of ``fmt`` is carried in between its quantisation and its GEMM:
    float32 under ``gemm="fast"`` when float32 holds every value of ``fmt`` (the BLAS
    reads float32, so converting there and back would only cost time), float64 otherwise
    (``gemm="exact"``: the matrix-unit model reads float64).  Either holds the values
    exactly."""
    if r.gemm == "fast" and _f32_holds(fmt):
        return torch.float32
    return torch.float64


@dataclass
class Operand:
    """The values a matrix unit reads (a float64 tensor; float32 under ``gemm="fast"``
    where it holds the format: ``carrier``), their tensor scale, and their format.
    Rowwise scaling (``granularity="rowwise"``): ``scale`` is a float64 tensor shaped like
    ``values`` with the reduction axis of size 1 (one scale a row along K).  Block-scaled
    operands of a recipe with a block-scaled unit also keep ``blocks``: (the elements, the
    block scales) as ``ff.quantize(v, fmt, axis=k)`` lays them out (float64 tensors), which
    the unit reads instead of ``values`` (``gemm``)."""

    values: torch.Tensor
    scale: Any
    fmt: str
    blocks: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def mT(self) -> "Operand":
        """The operand with its last two axes swapped (values, a rowwise scale, and block
        elements and scales alike)."""
        b = None if self.blocks is None else tuple(t.transpose(-1, -2) for t in self.blocks)
        sc = self.scale.transpose(-1, -2) if isinstance(self.scale, torch.Tensor) else self.scale
        return Operand(self.values.transpose(-1, -2), sc, self.fmt, b)  # type: ignore[arg-type]

    def times(self, extra: float) -> "Operand":
        """The operand with its tensor scale multiplied by ``extra`` (exact: a GEMM's alpha)."""
        return self if extra == 1.0 else dataclasses.replace(self, scale=self.scale * extra)


def requantized(r: Recipe) -> bool:
    """Whether backward GEMMs quantise their operands again along their own reduction axis
    (block scaling and rowwise scaling) rather than reuse the forward's."""
    return r.scaling == "block" or r.granularity == "rowwise"


def _rowwise(v: torch.Tensor, fmt: str, axis: int, opts: dict) -> Operand:
    """One scale per row along ``axis`` (every other index): ``ff.quantize`` per channel of
    ``v`` with ``axis`` moved last and the other axes flattened to rows."""
    ax = axis % v.ndim
    vm = v.movedim(ax, -1)
    q = quantize(vm.reshape(-1, vm.shape[-1]), fmt, granularity="channel", axis=0, **opts)
    e: Any = q.elements
    sc: Any = q.scale
    scale = torch.as_tensor(sc, dtype=torch.float64, device=v.device)
    return Operand(e.to(torch.float64).reshape(vm.shape).movedim(-1, ax),
                   scale.reshape(vm.shape[:-1] + (1,)).movedim(-1, ax), fmt)


def quantize_operand(v: torch.Tensor, fmt: str, r: Recipe, axis: int,
                     state: Any = None, name: str = "", role: str = "forward", *,
                     weight: bool = False, rht: bool = False,
                     amax_reduction: Any = None) -> Operand:
    """``v`` brought into ``fmt`` by ``r.scaling`` (``axis``: the GEMM's reduction axis,
    used by block scaling; ``state``: an ``ff.DelayedScaling`` for ``"delayed"``; the
    recipe's quantiser options: ``r.operand_options(role)``).  NVFP4 by Transformer
    Engine's convention (``scale_convention="te"``): ``floatfmt.torch.nvfp4_operands``
    (``weight``: ``v`` is a weight, for 2-D tiles; ``rht``: an input of a weight-gradient
    GEMM, for the Hadamard transform).  ``amax_reduction`` (``scaling="tensor"``): the
    amax of ``v`` is replaced by what it returns before the scale is computed
    (``floatfmt.torch.distributed.quantize_reduced``)."""
    if r.scaling == "block" and fmt == "nvfp4" and r.scale_convention == "te":  # branch nvfp4
        vals, ts = nvfp4_te_values(v, r, axis, role, weight, rht)
        return Operand(vals, ts, fmt)
    opts = r.operand_options(role)
    if r.scaling == "none":
        # a tensor in, a tensor out (float32 CPU tensors take cast's float32 route)
        c: Any = cast(v, fmt, dtype=carrier(r, fmt), **opts)
        return Operand(c, 1.0, fmt)
    if r.scaling == "block":
        q = quantize(v, fmt, axis=axis, **opts)
        ts = 1.0 if q.tensor_scale is None else float(q.tensor_scale)
        d: Any = q.dequantize(torch.float64)
        blocks = None
        if r.model is not None:  # the block-scaled unit reads elements and block scales
            e: Any = q.elements
            sc: Any = q.scale
            blocks = (e.to(torch.float64), sc.to(torch.float64))
        return Operand(d / ts if ts != 1.0 else d, ts, fmt, blocks)  # exact: ts is a factor of d
    if r.granularity == "rowwise":
        if amax_reduction is not None:
            raise NotImplementedError("amax_group with granularity='rowwise': the row amaxes are "
                                      "not reduced over ranks; use per-tensor scaling")
        return _rowwise(v, fmt, axis, opts)
    if r.scaling == "tensor" and amax_reduction is not None:  # one amax over the ranks
        er, sr = quantize_reduced(v, fmt, amax_reduction, **opts)
        return Operand(er.to(carrier(r, fmt)), float(sr), fmt)
    if r.scaling == "delayed" and state is not None:
        q = state.quantize(name, v, role, **opts)
    else:  # "tensor", or a delayed recipe without state: current amax
        q = quantize(v, fmt, **opts)
    el: Any = q.elements  # a tensor (q was made from one)
    return Operand(el.to(carrier(r, fmt)), float(q.scale), fmt)


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
    if r.scaling == "block" and model is not None and r.gemm == "exact":
        return block_unit_gemm(a, b, r, out_fmt, c)
    if r.scaling == "block" or (model is None and a.fmt != b.fmt):
        fmt = "fp32"
    elif model is None or a.fmt == b.fmt:
        fmt = a.fmt
    else:
        fmt = _union_name(a.fmt, b.fmt)
        m = get_model(model, a.fmt, r.acc_fmt)
        model = m.replace(name=f"{m.name}x{b.fmt}", fmt=fmt)
    if isinstance(a.scale, torch.Tensor) or isinstance(b.scale, torch.Tensor):
        return _rowwise_gemm(a, b, r, fmt, model, out_fmt, c)
    alpha = 1.0 if a.scale == 1.0 and b.scale == 1.0 else \
        float(cast(a.scale * b.scale, "fp32"))  # exact product of two fp32, rounded once
    if r.gemm == "fast":
        return fast_gemm(a.values, b.values, alpha, c, out_fmt)
    kw: dict[str, Any] = dict(acc_fmt=r.acc_fmt, out_fmt=out_fmt, model=model)
    if alpha != 1.0:  # 1.0 is matmul's own default (no epilogue multiply)
        kw["alpha"] = alpha
    if model is None:
        kw["order"] = r.order
    if c is not None:
        kw["c"] = c
    return ff_matmul(a.values, b.values, fmt, **kw).to(torch.float64)


def _rowwise_gemm(a: Operand, b: Operand, r: Recipe, fmt: str, model: Any, out_fmt: str,
                  c: torch.Tensor | None) -> torch.Tensor:
    """The GEMM of rowwise-scaled operands: the codes' products summed as ``gemm`` sums them
    (the model / accumulator, or ``gemm="fast"``'s BLAS) to the fp32 accumulator, then the
    epilogue of torch._scaled_mm's rowwise CUTLASS kernel (``RowwiseScaledMM.cu``, FBGEMM's
    ``f8f8bf16_rowwise``: ``EVTCompute0 = WScale * Accum``, then ``XScale * EVTCompute0``,
    each an fp32 multiply rounded to nearest): ``fp32(s_a[m] * fp32(s_b[n] * acc))``; then
    ``c`` (bias) as in ``gemm``: ``fp32(c_out + .)`` with ``c`` cast to ``out_fmt`` first,
    and one rounding to ``out_fmt``."""
    if r.gemm == "fast":
        acc = fast_gemm(a.values, b.values, 1.0, None, "fp32")
    else:
        kw: dict[str, Any] = dict(acc_fmt=r.acc_fmt, out_fmt="fp32", model=model)
        if model is None:
            kw["order"] = r.order
        acc = ff_matmul(a.values, b.values, fmt, **kw).to(torch.float64)
    y: Any = acc
    for s in (b.scale, a.scale):  # the column (W) scale first, then the row (x) scale
        if isinstance(s, torch.Tensor) or s != 1.0:
            y = ff_mul(s, y, "fp32")
    if c is not None:
        y = ff_add(cast(c, out_fmt, dtype=torch.float64), y, "fp32")
    out: Any = cast(y, out_fmt, dtype=torch.float64)
    return out


def block_unit_gemm(a: Operand, b: Operand, r: Recipe, out_fmt: str,
                    c: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` on the recipe's block-scaled unit (``r.model``: ``"b200"`` ...): the
    elements and block scales of both operands through ``block_scaled_mma`` from a zero
    accumulator (B of another block format than A where the unit mixes them:
    ``tensorcore.mixed_block_format``), then the epilogue of every other model
    (``matrixunit.gemm.epilogue``): ``fp32(alpha * acc)`` with ``alpha = fp32(s_a * s_b)``
    (NVFP4's tensor scales; 1 for MX), ``fp32(acc + c)`` with ``c`` cast to ``out_fmt``
    first, one rounding to ``out_fmt``."""
    if a.blocks is None or b.blocks is None:
        raise ValueError("a block-scaled unit needs block-scaled operands (Operand.blocks)")
    (ea, sa), (eb, sb) = a.blocks, b.blocks
    unit: Any = r.model
    if isinstance(unit, str):  # the GPU: A's preset comes from its format
        unit = unit.partition("/")[0]
    elif get_block_format(a.fmt).name != unit.block_fmt:  # a user's model, read for A's format
        bf = get_block_format(a.fmt)
        unit = unit.replace(fmt=bf.element, block_fmt=bf.name, scale_fmt=bf.scale,
                            scale_block=bf.block_size)
    acc: Any = block_scaled_mma(ea, sa, eb, sb, 0.0, unit, a.fmt,
                                b_block_fmt=None if b.fmt == a.fmt else b.fmt)
    alpha = 1.0 if a.scale == 1.0 and b.scale == 1.0 else float(cast(a.scale * b.scale, "fp32"))
    out: Any = epilogue("matmul", acc, "fp32", out_fmt, alpha, None, c, "nearest_even", None,
                        False, False)
    return out.to(torch.float64)


_ML_DTYPES = ("bf16", "fp16")


def _compact(t: torch.Tensor) -> torch.Tensor:
    """``t`` with every broadcast axis (stride 0: ``expand``'s) cut to size 1: the same
    values, which broadcasting against the full shape gives back."""
    if all(st != 0 or n == 1 for st, n in zip(t.stride(), t.shape)):
        return t
    return t[tuple(slice(0, 1) if st == 0 else slice(None) for st in t.stride())]


def _c_in(c: torch.Tensor, out_fmt: str, dtype: torch.dtype) -> torch.Tensor:
    """``c`` cast to ``out_fmt`` (values of ``dtype``, which holds them), from float32 when
    that holds ``c`` exactly (cast's float32 route: the same value, faster)."""
    c32 = c.to(torch.float32)
    src = c32 if c.dtype == torch.float32 or torch.equal(c32.to(c.dtype), c) else c
    out: Any = cast(src, out_fmt, dtype=dtype)
    return out


def fast_gemm(a: torch.Tensor, b: torch.Tensor, alpha: float, c: torch.Tensor | None,
              out_fmt: str) -> torch.Tensor:
    """A recipe's ``gemm="fast"``: the quantised operands ``a @ b`` summed by torch's
    float32 ``matmul`` (the BLAS; on CUDA with TF32 off), then
    the exact GEMM's epilogue: ``fp32(alpha * acc)``, ``fp32(acc + c)`` with ``c``
    cast to ``out_fmt`` first, and one rounding to ``out_fmt``.  Only the sum differs
    from ``gemm="exact"``: the BLAS's order and fused multiply-adds instead of the
    matrix unit's alignment and truncation (the operands are exact in float32).
    The result is float32 when both operands are (``carrier``) and float32 holds
    ``out_fmt``, else float64.  A broadcast ``c`` (a bias ``expand``-ed to the output)
    is cast once per distinct value (``_compact``), in any float dtype."""
    f32 = torch.float32
    held = _f32_holds(out_fmt)
    out_dtype = f32 if a.dtype == b.dtype == f32 and held else torch.float64
    cq = None if c is None else _c_in(_compact(c), out_fmt, f32 if held else torch.float64)
    if host_kernels(a):  # IEEE float32 arithmetic in numpy: each step rounded once
        import numpy as np
        acc32 = torch.matmul(a.to(f32), b.to(f32)).numpy()
        if alpha != 1.0:
            np.multiply(acc32, np.float32(alpha), out=acc32)  # (matmul's own fresh array)
            alpha = 1.0
        if cq is not None and held:  # c is exact in float32: fp32(c + acc) is numpy's add
            c32 = cq.numpy()
            full = c32.ndim <= acc32.ndim and all(  # (c broadcasts to acc's shape)
                n in (1, m) for n, m in zip(c32.shape[::-1], acc32.shape[::-1]))
            acc32 = np.add(c32, acc32, out=acc32 if full else None)
            cq = None
        acc = torch.from_numpy(np.ascontiguousarray(acc32, np.float32))
        if cq is None:
            res: Any = cast(acc, out_fmt, dtype=out_dtype)
            return res
    else:
        keep = torch.backends.cuda.matmul.allow_tf32  # the device path (CUDA, or forced on CPU)
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            acc = torch.matmul(a.to(f32), b.to(f32))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = keep
    acc = acc.to(torch.float64)
    if alpha != 1.0:
        acc = ff_mul(alpha, acc, "fp32")
    if cq is not None:  # (c held only by float64: its exact sum with acc, rounded to fp32)
        acc = ff_add(cq, acc, "fp32")
    out: Any = cast(acc, out_fmt, dtype=out_dtype)
    return out


def linear_forward(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, r: Recipe,
                   state: Any = None) -> tuple[torch.Tensor, Operand, Operand]:
    """Forward of an emulated Linear on M x K inputs: (y, x operand, W operand)."""
    qx = quantize_operand(x, r.fwd_fmt, r, -1, state, "input")
    qw = quantize_operand(w, r.fwd_fmt, r, -1, state, "weight")
    c = None if b is None else b.to(torch.float64).expand(x.shape[0], w.shape[0])
    return gemm(qx, qw.mT, r, r.out_fmt, c), qx, qw


def linear_backward(g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, qx: Operand, qw: Operand,
                    r: Recipe, state: Any = None, need_x: bool = True, need_b: bool = True
                    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
    """Backward of an emulated Linear: (grad_x, grad_W, grad_b) from g (M x N)."""
    block = requantized(r)
    qg = quantize_operand(g, r.bwd_fmt, r, -1, state, "grad_output", "backward")
    gx = None
    if need_x:
        wq = quantize_operand(w, r.fwd_fmt, r, 0) if block else qw
        gx = gemm(qg, wq, r, r.out_fmt)
    gq = quantize_operand(g, r.bwd_fmt, r, 0, None, "", "backward") if block else qg
    xq = quantize_operand(x, r.fwd_fmt, r, 0) if block else qx
    gw = gemm(gq.mT, xq, r, r.wgrad_fmt)
    gb = None
    if need_b:
        gb = ff_sum(g, "fp32", acc_fmt="fp32", order="pairwise", axis=0,
                    out_fmt=r.wgrad_fmt).to(torch.float64)
    if state is not None:
        state.update()
    return gx, gw, gb


def matmul_forward(a: torch.Tensor, b: torch.Tensor, r: Recipe) -> tuple[torch.Tensor, Operand, Operand]:
    """Forward of the functional ``matmul``: a (..., M, K) @ b (..., K, N), both ``fwd_fmt``."""
    qa = quantize_operand(a, r.fwd_fmt, r, -1)
    qb = quantize_operand(b, r.fwd_fmt, r, -2)
    return gemm(qa, qb, r, r.out_fmt), qa, qb


def matmul_backward(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor, qa: Operand, qb: Operand,
                    r: Recipe) -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_a, grad_b) of the functional ``matmul``: g @ b^T (reduces over N) and a^T @ g
    (over M), both rounded to ``out_fmt``."""
    block = requantized(r)
    qg = quantize_operand(g, r.bwd_fmt, r, -1, None, "", "backward")
    bq = quantize_operand(b, r.fwd_fmt, r, -1) if block else qb
    ga = gemm(qg, bq.mT, r, r.out_fmt)
    gq = quantize_operand(g, r.bwd_fmt, r, -2, None, "", "backward") if block else qg
    aq = quantize_operand(a, r.fwd_fmt, r, -2) if block else qa
    gb = gemm(aq.mT, gq, r, r.out_fmt)
    return ga, gb


# ------------------------------------------------------------------ autograd
class _MatmulFn(torch.autograd.Function):
    @staticmethod
    @ieee_entry  # (IEEE subnormals on a flushing thread: backend.fpu)
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, r: Recipe) -> torch.Tensor:
        av, bv = values_of(a), values_of(b)
        y, qa, qb = matmul_forward(av, bv, r)
        ctx.r, ctx.np, ctx.dtypes = r, (av, bv, qa, qb), (a.dtype, b.dtype)
        return as_dtype(y, a.dtype)

    @staticmethod
    @ieee_entry
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        av, bv, qa, qb = ctx.np
        ga, gb = matmul_backward(values_of(g), av, bv, qa, qb, ctx.r)
        ad, bd = ctx.dtypes
        return as_dtype(ga, ad), as_dtype(gb, bd), None


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


def unscale_grads(scaler: Any, parameters: Any) -> bool:
    """Unscale the gradients of ``parameters`` in place with an ``ff.LossScaler``
    (``grad * fp32(1/S)``); returns whether any is Inf/NaN (then skip the step, and
    call ``scaler.update()`` either way).  For ``torch.amp.GradScaler`` use its own
    ``unscale_`` / ``step`` / ``update``."""
    params = [p for p in parameters if p.grad is not None]
    grads, found = scaler.unscale([values_of(p.grad) for p in params])
    for p, gv in zip(params, grads):
        p.grad.copy_(as_dtype(gv.reshape(p.grad.shape), p.grad.dtype))
    return bool(found)
