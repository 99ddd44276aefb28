"""Data-parallel training under emulation: every rank's FP8 scales from one amax.

Transformer Engine reduces the amaxes of its delayed-scaling histories over a process
group (``fp8_autocast(fp8_group=...)``, ``DelayedScaling(reduce_amax=True)``) so that
every rank quantises with the same scales; without it each rank scales by its own
batch and the ranks' forward passes differ although DDP keeps their weights equal.
``amax_all_reduce(group)`` is that reduction as ``ff.DelayedScaling``'s
``amax_reduction``; ``emulate(model, recipe, amax_group=group)`` installs it.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

__all__ = ["amax_all_reduce"]


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
