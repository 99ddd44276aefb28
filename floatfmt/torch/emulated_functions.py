"""The autograd Functions of ``emulate``: emulated GEMMs and convolutions, forward and backward.

``GemmFunction`` computes ``a @ b (+ c)`` and ``ConvFunction`` a convolution as implicit
GEMMs (``floatfmt.torch.implicit_gemm``), each with floatfmt's GEMM
(``floatfmt.torch.emulation.gemm``) in forward and in backward (input and weight
gradients, dgrad and wgrad), by the rules of ``floatfmt.torch.interception``;
``RoundFunction`` rounds an op's output and its gradient (policy ``"pure"``);
``TapFunction`` counts the backward of an op left to torch.  ``Emulation`` is the
state ``emulate`` keeps per model, ``GemmSpec`` what one GEMM needs of it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..backend.fpu import ieee_entry
from ..core.cast import cast
from ..arith.accumulate import sum as ff_sum
from ..training.delayed_scaling import DelayedScaling
from . import implicit_gemm as ig
from .emulation import Operand, as_dtype, gemm, quantize_operand, requantized, values_of
from .recipe import Recipe
from .report import EmulationReport

__all__ = ["Emulation", "GemmSpec", "GemmFunction", "ConvFunction", "RoundFunction", "TapFunction",
           "LOW_FORMATS", "no_autocast", "bias_sum_fast"]

LOW_FORMATS = {torch.bfloat16: "bf16", torch.float16: "fp16"}


# ------------------------------------------------------------------ per-model state
@dataclass
class Emulation:
    """What ``emulate`` keeps for one model: recipe, report, delayed-scaling states."""

    recipe: Recipe
    report: EmulationReport
    delayed: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    hooks: list = field(default_factory=list)
    modes: list = field(default_factory=list)
    under_autocast: dict = field(default_factory=dict)
    warned: bool = False
    #: ``emulate``'s ``amax_group`` as ``DelayedScaling``'s ``amax_reduction`` (or None)
    amax_reduction: Any = None

    def delayed_for(self, p: torch.Tensor | None) -> DelayedScaling | None:
        r = self.recipe
        if p is None or r.scaling != "delayed":
            return None
        if id(p) not in self.delayed:
            self.params[id(p)] = p
            self.delayed[id(p)] = DelayedScaling(history_len=r.history_len, algo=r.amax_algo,
                                                 margin=r.margin, fwd_format=r.fwd_fmt,
                                                 bwd_format=r.bwd_fmt,
                                                 amax_reduction=self.amax_reduction)
        return self.delayed[id(p)]

    def effective(self, t: torch.Tensor) -> tuple[Recipe, torch.dtype | None]:
        """The recipe for an op on ``t``, and the dtype autocast asks for (None: none)."""
        dev = t.device.type
        if dev not in ("cpu", "cuda", "xpu", "mps", "hpu") or not torch.is_autocast_enabled(dev):
            return self.recipe, None
        ad = torch.get_autocast_dtype(dev)
        low = LOW_FORMATS.get(ad)
        if low is None:
            return self.recipe, None
        if low not in self.under_autocast:
            r = self.recipe

            def wide(f: str) -> bool:
                return f in ("fp32", "tf32")
            self.under_autocast[low] = r.replace(
                name=f"{r.name}@autocast({low})", out_fmt=low, wgrad_fmt=low,
                fwd_fmt=low if wide(r.fwd_fmt) else r.fwd_fmt,
                bwd_fmt=low if wide(r.bwd_fmt) else r.bwd_fmt)
        return self.under_autocast[low], ad

    def check(self) -> None:
        """Warn once when more than 1% of the GEMM-like FLOPs counted ran unemulated."""
        frac = self.report.fraction_left()
        if frac > 0.01 and not self.warned:
            self.warned = True
            warnings.warn(f"floatfmt.emulate: {100 * frac:.1f}% of this model's GEMM-like FLOPs "
                          f"ran unemulated (see floatfmt.torch.emulation_report(model))",
                          UserWarning, stacklevel=3)


@dataclass
class GemmSpec:
    """One emulated GEMM: recipe, report entry, formats, delayed scaling, roles."""

    em: Emulation
    r: Recipe
    kind: str
    out_fmt: str
    grad_a_fmt: str
    grad_b_fmt: str
    ds: DelayedScaling | None = None
    name_a: str | None = None
    name_b: str | None = None
    alpha: float = 1.0
    out_dtype: torch.dtype | None = None
    flops: int = 0  # nominal FLOPs of each product (forward, and each backward one)
    weight_a: bool = False  # branch nvfp4: a (b) is a weight (2-D NVFP4 tiles)
    weight_b: bool = False

    @property
    def amax_reduction(self) -> Any:
        """``scaling="tensor"`` with ``emulate``'s ``amax_group``: the amax reduction of the
        activation and gradient operands (weights keep their own: floatfmt.torch.distributed)."""
        return self.em.amax_reduction if self.r.scaling == "tensor" else None


def _t(a: torch.Tensor) -> torch.Tensor:
    return a.transpose(-1, -2)


@contextlib.contextmanager
def no_autocast(t: torch.Tensor) -> Iterator[None]:
    dev = t.device.type
    if dev in ("cpu", "cuda") and torch.is_autocast_enabled(dev):
        with torch.autocast(dev, enabled=False):
            yield
    else:
        yield


def _quant(v: torch.Tensor, fmt: str, s: GemmSpec, axis: int, name: str | None,
           role: str = "forward", weight: bool = False, rht: bool = False) -> Operand:
    return quantize_operand(v, fmt, s.r, axis, s.ds if name else None, name or "", role,
                            weight=weight, rht=rht,
                            amax_reduction=None if weight else s.amax_reduction)


# ------------------------------------------------------------------ autograd Functions
class GemmFunction(torch.autograd.Function):
    """``a (..., M, K) @ b (..., K, N) [+ c]`` emulated forward and backward."""

    @staticmethod
    @ieee_entry  # (IEEE subnormals on a flushing thread: backend.fpu)
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None,
                s: GemmSpec) -> torch.Tensor:
        with no_autocast(a):
            r = s.r
            av, bv = values_of(a), values_of(b)
            qa = _quant(av, r.fwd_fmt, s, -1, s.name_a, weight=s.weight_a)
            qb = _quant(bv, r.fwd_fmt, s, -2, s.name_b, weight=s.weight_b)
            shape = batch_shape(av, bv) + (av.shape[-2], bv.shape[-1])
            cv = None if c is None else values_of(c)  # (gemm='fast' reads c in its own dtype)
            cv = cv if cv is None or r.gemm == "fast" else cv.to(torch.float64)
            y = gemm(qa.times(s.alpha), qb, r, s.out_fmt, None if cv is None else cv.expand(shape))
            s.em.report.emulated(s.kind, "forward", s.flops)
            ctx.s, ctx.saved = s, (av, bv, qa, qb)
            ctx.meta = (a.dtype, b.dtype, None if c is None else (c.dtype, c.shape), shape)
            return as_dtype(y, s.out_dtype or a.dtype)

    @staticmethod
    @ieee_entry
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[Any, ...]:
        s = ctx.s
        r = s.r
        av, bv, qa, qb = ctx.saved
        ad, bd, cm, shape = ctx.meta
        block = requantized(r)
        g = values_of(gy)
        with no_autocast(g):
            ga = gb = gc = None
            need_a, need_b, need_c = ctx.needs_input_grad[:3]
            qg = _quant(g, r.bwd_fmt, s, -1, "grad_output" if s.ds else None, "backward")
            if need_a:  # g @ b^T: reduces over N
                if block and s.weight_a:  # the weight gradient: RHT on both inputs (nvfp4)
                    qg = _quant(g, r.bwd_fmt, s, -1, None, "backward", rht=True)
                bq = _quant(bv, r.fwd_fmt, s, -1, None, weight=s.weight_b,
                            rht=s.weight_a) if block else qb
                ga = gemm(qg.times(s.alpha), bq.mT, r, s.grad_a_fmt)
                ga = as_dtype(_sum_to(ga, av.shape), ad)
                s.em.report.emulated(s.kind, "backward", s.flops)
            if need_b:  # a^T @ g: reduces over M
                gq = _quant(g, r.bwd_fmt, s, -2, None, "backward", rht=s.weight_b) if block else qg
                aq = _quant(av, r.fwd_fmt, s, -2, None, weight=s.weight_a,
                            rht=s.weight_b) if block else qa
                if r.granularity == "rowwise" and s.weight_b:  # torchao: grad_W = g.T @ x, so
                    gb = gemm(gq.mT, aq.times(s.alpha), r, s.grad_b_fmt).transpose(-1, -2)
                else:  # the rowwise epilogue's row / column scales are g's / x's
                    gb = gemm(aq.mT.times(s.alpha), gq, r, s.grad_b_fmt)
                gb = as_dtype(_sum_to(gb, bv.shape), bd)
                s.em.report.emulated(s.kind, "backward", s.flops)
            if need_c and cm is not None:
                cd, cshape = cm
                if len(cshape) == 1 and cshape[0] == shape[-1] and r.gemm == "fast":
                    gc = bias_sum_fast(g.reshape(-1, shape[-1]), r.wgrad_fmt)
                elif len(cshape) == 1 and cshape[0] == shape[-1]:  # a bias: fp32 pairwise over rows
                    gc = ff_sum(g.reshape(-1, shape[-1]), "fp32", acc_fmt="fp32", order="pairwise",
                                axis=0, out_fmt=r.wgrad_fmt)
                else:  # a general C: torch's float64 sum, rounded once
                    gc = cast(g.to(torch.float64).sum_to_size(cshape), r.wgrad_fmt, dtype=torch.float64)
                gc = as_dtype(gc, cd)
            if s.ds is not None:
                s.ds.update()
        return ga, gb, gc, None


def bias_sum_fast(g: torch.Tensor, fmt: str) -> torch.Tensor:
    """``gemm="fast"``'s bias gradient: torch's float32 sum over the rows of ``g`` (M x N),
    rounded once to ``fmt`` (float32 values where float32 holds ``fmt``, else float64)."""
    s32 = g.to(torch.float32).sum(dim=0)
    out: Any = cast(s32, fmt)  # cast's float32 route
    return out


def batch_shape(a: torch.Tensor, b: torch.Tensor) -> torch.Size:
    """The broadcast batch axes of ``a @ b`` (all but the last two of each); equal ones
    without ``torch.broadcast_shapes`` (a Python function: about 20 us a call, and the
    emulation asks for every GEMM)."""
    sa, sb = a.shape[:-2], b.shape[:-2]
    return sa if sa == sb else torch.broadcast_shapes(sa, sb)


def _sum_to(g: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """A batched gradient summed over the axes its operand was broadcast along (exact
    only when one batch entry is nonzero; the emulation broadcasts only expanded views)."""
    return g if g.shape == shape else g.sum_to_size(shape)


class ConvFunction(torch.autograd.Function):
    """A convolution of a padded ``x`` (N, C, *S) with ``w`` (O, C/G, *k) as implicit GEMMs."""

    @staticmethod
    @ieee_entry  # (IEEE subnormals on a flushing thread: backend.fpu)
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
                geom: tuple, s: GemmSpec) -> torch.Tensor:
        stride, dil, groups = geom
        with no_autocast(x):
            r = s.r
            if r.granularity == "rowwise":  # torchao's rowwise recipe converts nn.Linear only
                raise NotImplementedError("granularity='rowwise' applies to linear and matmul "
                                          "GEMMs, not convolutions")
            block = r.scaling == "block"
            xv, wv = values_of(x), values_of(w)
            n, o = xv.shape[0], wv.shape[0]
            k = list(wv.shape[2:])
            d = len(k)
            if block:
                cols, sizes = ig.im2col(xv, k, stride, dil, groups)
                qa = _quant(cols, r.fwd_fmt, s, -1, None)
            else:
                qx = _quant(xv, r.fwd_fmt, s, -1, "input")
                cols, sizes = ig.im2col(qx.values, k, stride, dil, groups)
                qa = Operand(cols, qx.scale, qx.fmt)
            wmat = wv.reshape(groups, o // groups, -1).transpose(-1, -2)
            qb = _quant(wmat, r.fwd_fmt, s, -2, "weight", weight=True)
            m = cols.shape[1]
            c64 = None
            if bias is not None:
                c64 = values_of(bias).to(torch.float64).reshape(groups, 1, o // groups).expand(
                    groups, m, o // groups)
            y = gemm(qa, qb, r, s.out_fmt, c64)  # (G, M, O/G)
            y = y.transpose(0, 1).reshape(n, *sizes, o).permute(0, d + 1, *range(1, d + 1))
            s.em.report.emulated(s.kind, "forward", s.flops)
            ctx.s, ctx.geom, ctx.saved = s, geom, (xv, wv, cols, qa, qb)
            ctx.meta = (x.dtype, w.dtype, None if bias is None else bias.dtype, sizes)
            return as_dtype(y.contiguous(), s.out_dtype or x.dtype)

    @staticmethod
    @ieee_entry
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[Any, ...]:
        s, (stride, dil, groups) = ctx.s, ctx.geom
        r = s.r
        block = r.scaling == "block"
        xv, wv, cols, qa, qb = ctx.saved
        xd, wd, bd, sizes = ctx.meta
        g = values_of(gy)
        n, o = g.shape[:2]
        k = list(wv.shape[2:])
        d = len(k)
        gx = gw = gb = None
        with no_autocast(g):
            qg = None if block else _quant(g, r.bwd_fmt, s, -1, "grad_output" if s.ds else None,
                                           "backward")

            def gmat(t: torch.Tensor) -> torch.Tensor:  # (N, O, L...) -> (G, M, O/G)
                return t.permute(0, *range(2, 2 + d), 1).reshape(-1, groups, o // groups).transpose(0, 1)

            if ctx.needs_input_grad[1]:  # wgrad: g^T @ P, reduces over N*L
                if block:
                    gq = _quant(gmat(g), r.bwd_fmt, s, -2, None, "backward", rht=True)
                    aq = _quant(cols, r.fwd_fmt, s, -2, None, rht=True)
                else:
                    assert qg is not None
                    gq, aq = Operand(gmat(qg.values), qg.scale, qg.fmt), qa
                gw = gemm(aq.mT, gq, r, s.grad_b_fmt)  # (G, K, O/G)
                gw = as_dtype(_t(gw).reshape(wv.shape), wd)
                s.em.report.emulated(s.kind, "backward", s.flops)
            if ctx.needs_input_grad[0]:  # dgrad: g stuffed, padded, with the flipped weights
                gsrc = g if block else qg.values  # type: ignore[union-attr]
                gz = ig.pad(ig.stuff(gsrc, stride), [dl * (kk - 1) for dl, kk in zip(dil, k)],
                            [dl * (kk - 1) for dl, kk in zip(dil, k)])
                cols2, sizes2 = ig.im2col(gz, k, [1] * d, dil, groups)
                wsrc = wv if block else _t(qb.values).reshape(wv.shape)
                w2 = ig.flip_weight(wsrc, groups)  # (C, O/G, k)
                c = w2.shape[0]
                wm2 = w2.reshape(groups, c // groups, -1).transpose(-1, -2)
                if block:
                    a2 = _quant(cols2, r.bwd_fmt, s, -1, None, "backward")
                    b2 = _quant(wm2, r.fwd_fmt, s, -2, None)
                else:
                    assert qg is not None
                    a2, b2 = Operand(cols2, qg.scale, qg.fmt), Operand(wm2, qb.scale, qb.fmt)
                y2 = gemm(a2, b2, r, s.grad_a_fmt)  # (G, M2, C/G)
                y2 = y2.transpose(0, 1).reshape(n, *sizes2, c).permute(0, d + 1, *range(1, d + 1))
                y2 = ig.pad(y2, [0] * d, [sp - l2 for sp, l2 in zip(xv.shape[2:], sizes2)])
                gx = as_dtype(y2.contiguous(), xd)
                s.em.report.emulated(s.kind, "backward", s.flops)
            if ctx.needs_input_grad[2] and r.gemm == "fast":
                gb = as_dtype(bias_sum_fast(g.transpose(0, 1).reshape(o, -1).T, r.wgrad_fmt), bd)
            elif ctx.needs_input_grad[2]:
                gb = ff_sum(g.transpose(0, 1).reshape(o, -1), "fp32", acc_fmt="fp32", order="pairwise",
                            axis=1, out_fmt=r.wgrad_fmt)
                gb = as_dtype(gb, bd)
            if s.ds is not None:
                s.ds.update()
        return gx, gw, gb, None, None


class RoundFunction(torch.autograd.Function):
    """Policy ``"pure"``: an op's output rounded to ``fmt``, and the gradient arriving at it."""

    @staticmethod
    @ieee_entry  # (IEEE subnormals on a flushing thread: backend.fpu)
    def forward(ctx: Any, t: torch.Tensor, fmt: str) -> torch.Tensor:
        ctx.fmt = fmt
        return as_dtype(cast(values_of(t), fmt, dtype=torch.float64), t.dtype)

    @staticmethod
    @ieee_entry
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        return as_dtype(cast(values_of(g), ctx.fmt, dtype=torch.float64), g.dtype), None


class TapFunction(torch.autograd.Function):
    """Identity that counts, in backward, the products torch runs for an op left alone."""

    @staticmethod
    @ieee_entry  # (IEEE subnormals on a flushing thread: backend.fpu)
    def forward(ctx: Any, t: torch.Tensor, em: Emulation, kind: str, flops: int, reason: str) -> torch.Tensor:
        ctx.info = (em, kind, flops, reason)
        return t.view_as(t)

    @staticmethod
    @ieee_entry
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        em, kind, flops, reason = ctx.info
        em.report.left(kind, "backward", flops, reason)
        torch.autograd.Variable._execution_engine.queue_callback(em.check)
        return g, None, None, None, None


