"""Data-parallel training under emulation: every rank's FP8 scales from one amax.

Transformer Engine reduces the amaxes of its delayed-scaling histories over a process
group (``fp8_autocast(fp8_group=...)``, ``DelayedScaling(reduce_amax=True)``) so that
every rank quantises with the same scales; without it each rank scales by its own
batch and the ranks' forward passes differ although DDP keeps their weights equal.
``amax_all_reduce(group)`` is that reduction as ``ff.DelayedScaling``'s
``amax_reduction``; ``emulate(model, recipe, amax_group=group)`` installs it.

Current (per-tensor) scaling, ``scaling="tensor"``: Transformer Engine's
``Float8CurrentScaling`` quantizers take ``with_amax_reduction`` and an
``amax_reduction_group``; its modules set them on the *input* quantizer of a
column-parallel Linear and on the *grad_output* quantizer of a row-parallel one under
sequence parallelism, over the tensor-parallel group, because those tensors are
all-gathered in FP8 and must share one scale (``transformer_engine/pytorch/module/
linear.py``, ``_customize_quantizers_float8_current_scaling``).  Weight quantizers never
reduce, and TE does not reduce current-scaling amaxes over a data-parallel group.  What
``emulate(model, recipe, amax_group=group)`` models with a ``"tensor"`` recipe: every
quantised activation operand of a GEMM (the input of a Linear or convolution, both
operands of a matmul of two activations) and every output gradient has its amax
max-reduced over ``group`` before its scale is computed (``quantize_reduced``), with
one ``all_reduce`` per operand; weights (parameters) keep their own amax.  Pass the
group over which the tensors are gathered (TE: the tensor-parallel group); under plain
DDP the option makes the ranks' scales equal, which TE does not do.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..core.formats import FormatLike
from ..scaling.quantize import quantize

__all__ = ["amax_all_reduce", "quantize_reduced"]


def amax_all_reduce(group: Any = None) -> Callable[[list[float]], list[float]]:
    """A callable that replaces a list of amaxes by their elementwise maximum over every
    rank of ``group`` (a ``torch.distributed`` process group; None: the default group),
    by one ``all_reduce(MAX)`` of a float64 tensor (exact: a maximum rounds nothing;
    an Inf on any rank gives Inf everywhere, as TE's reduction does).  Every rank must
    call it with the same number of amaxes, in the same order: ``ff.DelayedScaling``
    passes them in the order of its sorted tensor names.  ``torch.distributed`` must be
    initialised when it is called; a RuntimeError says so otherwise.

    A separate group for the amaxes (``torch.distributed.new_group()``) keeps their
    all-reduce apart from DDP's gradient buckets on the default group."""
    dist = torch.distributed

    def reduce(amaxes: list[float]) -> list[float]:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("amax_all_reduce: torch.distributed is not initialised "
                               "(call torch.distributed.init_process_group first)")
        t = torch.tensor([float(a) for a in amaxes], dtype=torch.float64)
        if group is None:
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        else:
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        return [float(v) for v in t.tolist()]

    return reduce


def quantize_reduced(v: torch.Tensor, fmt: FormatLike, reduction: Callable[[list[float]], list[float]],
                     **options: Any) -> tuple[torch.Tensor, Any]:
    """(elements, scale) of ``ff.quantize(v, fmt, **options)`` (per-tensor current
    scaling) with the amax of ``v`` replaced by ``reduction([amax])[0]`` (e.g. its maximum
    over the ranks: ``amax_all_reduce(group)``), which must be at least the local amax.

    ``amax`` is the largest ``|v|`` with NaN skipped and Inf kept (TE's amax kernel, as
    ``ff.DelayedScaling`` records it).  The scale then comes from ``quantize``'s own rule
    (every ``scale_convention``, margin, Inf handling): ``v`` is quantised together with
    one more element of magnitude ``amax_reduced``, which sets the tensor's amax, and that
    element is dropped (no element's rounding depends on another's but through the
    scale; under stochastic rounding it takes one more random number, after ``v``'s).
    When the reduced amax is the local one this is ``ff.quantize(v, fmt)`` itself."""
    a = v.detach().abs()
    local = float(a.nan_to_num(nan=0.0, posinf=math.inf).amax()) if a.numel() else 0.0
    got = [float(x) for x in reduction([local])]
    if len(got) != 1:
        raise ValueError(f"amax reduction returned {len(got)} values for 1 amax")
    amax = got[0]
    if amax < local:
        raise ValueError(f"the reduced amax {amax} is below this rank's amax {local}")
    if not amax > local:  # equal (or NaN): the tensor's own amax
        q = quantize(v, fmt, **options)
        return q.elements, q.scale  # type: ignore[return-value]
    flat = torch.cat([v.detach().reshape(-1), v.detach().new_tensor([amax])])
    q = quantize(flat, fmt, **options)
    e: Any = q.elements
    return e[:-1].reshape(v.shape), q.scale
