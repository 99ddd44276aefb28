"""``emulate(model, recipe)``: every GEMM-like op a model runs, forward and backward, through floatfmt.

How it finds the ops: ``emulate`` registers a forward pre-hook and a forward hook
(``always_call``) on each module of the model; while the outermost of them runs its
``forward``, a ``TorchFunctionMode``
(PyTorch's own interception of torch functions, no patching of torch) sees every
torch function any code inside calls -- the model's modules, functional code,
``transformers``' ``Conv1D`` (``addmm``), ``nn.MultiheadAttention``
(``F.multi_head_attention_forward``).  Each GEMM-like op becomes a custom autograd
Function whose forward and backward compute with floatfmt (``floatfmt.torch.emulation``:
the recipe's operand quantisation, matrix unit or accumulator, epilogue and output
rounding), so the backward GEMMs (input and weight gradients, dgrad and wgrad) are
emulated too, wherever ``loss.backward()`` is called.

The ops and what each is:

* ``F.linear(x, W, b)``: the GEMM ``x W^T + b`` of ``floatfmt.torch.emulation``;
* ``matmul`` / ``@`` / ``mm`` / ``bmm`` (batch axes broadcast as torch does),
  ``addmm(c, a, b)`` / ``baddbmm(c, a, b)`` (``c`` the epilogue's C; ``alpha`` and
  ``beta`` other than 1 are left to torch), two-operand ``einsum`` (permuted to a
  batched GEMM; equations with ellipses, repeated indices or an index summed inside
  one operand are left to torch);
* ``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
  enable_gqa)``: ``S = fp32(scale * (q k^T))`` (the scale in the epilogue's alpha;
  rounded to ``out_fmt`` under policy ``"pure"``, else kept fp32), the boolean mask
  (False: -inf) or float mask added, causal mask, ``P = softmax(S)`` in float32
  (rounded to ``out_fmt`` under ``"pure"``), dropout on ``P``, ``O = P v`` (``P`` the
  GEMM's operand in ``fwd_fmt``): two emulated GEMMs, four in backward;
* ``F.multi_head_attention_forward`` (``nn.MultiheadAttention``): its projections
  (one packed GEMM for self-attention, as torch does) and the attention above;
  ``bias_k`` / ``bias_v``, ``add_zero_attn``, ``static_k`` / ``static_v`` are left to torch;
* ``conv1d/2d/3d`` and ``conv_transpose1d/2d/3d``, every stride, padding (numbers,
  ``"same"``, ``"valid"``), dilation, output padding and groups: implicit GEMMs
  (``floatfmt.torch.implicit_gemm``).  Per-tensor scaling quantises ``x`` (``g``)
  as a tensor and gathers the quantised values; block scaling gathers first and
  scales blocks along each GEMM's K.

A linear, ``addmm`` and convolution whose weight is an ``nn.Parameter`` (or a view of
one) treat it as the weight: delayed scaling keeps one ``ff.DelayedScaling`` per
weight (tensors ``"input"``, ``"weight"``, ``"grad_output"``), updated at the end
of each backward that uses it, and the weight gradient is rounded to ``wgrad_fmt``.
Products of two activations (attention) scale from the current amax and round both
gradients to ``out_fmt``.

Policy (``floatfmt.torch.policy``): under ``"pure"`` the other arithmetic ops'
outputs (and the gradients arriving at them in backward) are rounded to ``out_fmt``; in-place ops
(``x += y``, ``relu_``) are not, and are counted in the report as kept.  Under
``torch.autocast`` the GEMMs follow autocast's dtype: ``out_fmt`` and ``wgrad_fmt``
become bf16 / fp16, so do ``fwd_fmt`` / ``bwd_fmt`` where they are wider (fp32,
tf32), and the outputs are tensors of that dtype (torch then runs the other ops
under autocast's own rules).

Report (``floatfmt.torch.report``): every emulated op and every GEMM-like op left to
torch, with its FLOPs and reason; ``emulation_report(model)`` returns it, and a
``UserWarning`` is given once per model when more than 1% of the GEMM-like FLOPs
counted since ``emulate`` ran unemulated.  ``repr(model)`` names the recipe.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .distributed import amax_all_reduce
from .emulated_functions import Emulation, RoundFunction
from .op_handlers import HANDLERS
from .policy import op_class, rounds
from .recipe import Recipe, get_recipe
from .report import EmulationReport

__all__ = ["emulate", "unemulate", "emulating", "emulation_report", "update_scales",
           "delayed_scaling", "EmulationMode"]

_ATTR = "_floatfmt_emulation"


class EmulationMode(TorchFunctionMode):
    """The ``TorchFunctionMode`` active while an emulated model's ``forward`` runs."""

    def __init__(self, em: Emulation) -> None:
        super().__init__()
        self.em = em

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        h = HANDLERS.get(name)
        if h is not None:
            return h(self.em, func, args, kwargs)
        out = func(*args, **kwargs)
        cls = op_class(name) if name else None
        if cls is None or cls == "gemm":
            return out
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            r, _ = self.em.effective(out)
            inplace = name.endswith("_") and not name.endswith("__") or name.startswith("__i")
            if rounds(r.policy, name) and not inplace:
                self.em.report.rounded[name] += 1
                return RoundFunction.apply(out, r.out_fmt)
            self.em.report.kept[name + (" (in-place)" if inplace and r.policy == "pure" else "")] += 1
        return out


# ------------------------------------------------------------------ emulate / unemulate
def emulate(model: nn.Module, recipe: str | Recipe, *, amax_group: Any = None) -> nn.Module:
    """Run every GEMM-like op of ``model`` (forward and backward) under ``recipe`` (a name
    of ``floatfmt.torch.recipes()`` or a ``Recipe``); returns ``model``.

    ``amax_group`` (recipes with ``scaling="delayed"`` or ``"tensor"``, under data or
    tensor parallelism): a ``torch.distributed`` process group over which amaxes are
    max-reduced, or a callable ``list of amaxes -> list``; None: each rank scales by its
    own amaxes.  Delayed scaling: every update of the histories, as Transformer Engine's
    ``fp8_group``; current scaling: the amax of every activation and output-gradient
    operand before its scale is computed, one reduction per operand, weights left alone
    (TE's ``amax_reduction_group`` of its current-scaling input and grad_output
    quantizers; what is modelled: ``floatfmt.torch.distributed``).  So all ranks use the
    same FP8 scales (``floatfmt.torch.amax_all_reduce``).

    The modules and parameters stay the same objects (a forward pre-hook and a forward
    hook on each of its modules switch the interception on and off: the whole model or
    one layer called on its own is emulated), so optimisers,
    ``state_dict`` and DDP wrappers made before or after keep working;
    ``unemulate(model)`` (or the ``emulating`` context manager) removes the hooks.
    What is intercepted and how each op computes: the module docstring;
    ``emulation_report(model)`` says what ran emulated and what did not.

    >>> import torch, floatfmt.torch as fft
    >>> lin = torch.nn.Linear(4, 2)
    >>> _ = fft.emulate(lin, "bf16")
    >>> y = lin(torch.ones(1, 4)); repr(lin)
    'Linear[floatfmt emulated: bf16](in_features=4, out_features=2, bias=True)'
    >>> fft.emulation_report(lin).gemm_flops()
    (16, 0)
    >>> _ = fft.unemulate(lin)
    """
    r = get_recipe(recipe)
    if not isinstance(model, nn.Module):
        raise TypeError(f"emulate takes an nn.Module, not {type(model).__name__}")
    if any(_ATTR in m.__dict__ for m in model.modules()):
        raise ValueError("the model is already emulated: call unemulate(model) first")
    em = Emulation(r, EmulationReport(r.name, r.policy), amax_reduction=_amax_reduction(amax_group))

    depth = [0]  # modules of the model now running: the outermost switches the mode

    def enter(_m: nn.Module, _args: Any) -> None:
        depth[0] += 1
        if depth[0] == 1:
            mode = EmulationMode(em)
            mode.__enter__()
            em.modes.append(mode)

    def leave(_m: nn.Module, _args: Any, _out: Any) -> None:
        depth[0] -= 1
        if depth[0] == 0 and em.modes:
            em.modes.pop().__exit__(None, None, None)
            em.check()

    for m in model.modules():  # every module: a layer called on its own is emulated too
        m.__dict__[_ATTR] = em
        em.hooks += [m.register_forward_pre_hook(enter), m.register_forward_hook(leave, always_call=True)]
    if r.keep_first or r.keep_last:  # branch nvfp4: the recipe's high-precision layers
        _keep_high_precision(model, em, r)
    cls = type(model).__name__
    model.__dict__["_get_name"] = lambda: f"{cls}[floatfmt emulated: {r.name}]"
    return model


def gemm_layers(model: nn.Module) -> list[nn.Module]:
    """The modules of ``model`` with a ``weight`` parameter of two or more dimensions (its
    GEMM and convolution layers; embeddings excepted), in ``model.modules()`` order."""
    out = []
    for m in model.modules():
        w = getattr(m, "weight", None)
        if isinstance(w, nn.Parameter) and w.ndim >= 2 and not isinstance(m, nn.Embedding):
            out.append(m)
    return out


def _keep_high_precision(model: nn.Module, em: Emulation, r: Recipe) -> None:
    """Run the first ``r.keep_first`` and last ``r.keep_last`` of ``gemm_layers(model)``
    under ``r.high_precision`` (a pre-hook swaps the recipe in, a hook swaps it back)."""
    layers = gemm_layers(model)
    first = min(r.keep_first, len(layers))
    keep = layers[:first] + layers[max(len(layers) - r.keep_last, first):]
    hp = get_recipe(r.high_precision)
    for m in keep:
        saved: list = []

        def pre(_m: nn.Module, _a: Any, saved: list = saved) -> None:
            saved.append((em.recipe, em.under_autocast))
            em.recipe, em.under_autocast = hp, {}

        def post(_m: nn.Module, _a: Any, _o: Any, saved: list = saved) -> None:
            em.recipe, em.under_autocast = saved.pop()
        em.hooks += [m.register_forward_pre_hook(pre), m.register_forward_hook(post, always_call=True)]


def unemulate(model: nn.Module) -> nn.Module:
    """Undo ``emulate``: the hooks removed, the model as it was; returns ``model``."""
    em = model.__dict__.get(_ATTR)
    if em is not None:
        for h in em.hooks:
            h.remove()
    for m in model.modules():
        m.__dict__.pop(_ATTR, None)
    model.__dict__.pop("_get_name", None)
    return model


@contextlib.contextmanager
def emulating(model: nn.Module, recipe: str | Recipe, *,
              amax_group: Any = None) -> Iterator[nn.Module]:
    """``with emulating(model, "fp8_tensorwise"): ...``: emulate inside the block, restore after."""
    emulate(model, recipe, amax_group=amax_group)
    try:
        yield model
    finally:
        unemulate(model)


def _amax_reduction(group: Any) -> Any:
    """``emulate``'s ``amax_group`` as a ``DelayedScaling`` ``amax_reduction``."""
    pg = getattr(torch.distributed, "ProcessGroup", None) if torch.distributed.is_available() else None
    if pg is not None and isinstance(group, pg):
        return amax_all_reduce(group)
    if group is None or callable(group):
        return group
    raise TypeError("amax_group must be a torch.distributed process group, a callable or None, "
                    f"not {type(group).__name__}")


def emulation_report(model: nn.Module) -> EmulationReport:
    """The ``EmulationReport`` of an emulated model (``print`` it for the table)."""
    em = model.__dict__.get(_ATTR)
    if em is None:
        raise ValueError("the model is not emulated: call floatfmt.torch.emulate(model, recipe)")
    return em.report


def update_scales(model: nn.Module) -> None:
    """Roll every delayed-scaling history of an emulated model (backward does this itself;
    call it after forward-only steps)."""
    em = model.__dict__.get(_ATTR)
    if em is not None:
        for ds in em.delayed.values():
            ds.update()


def delayed_scaling(module: nn.Module) -> Any:
    """The ``ff.DelayedScaling`` of an emulated layer's ``weight`` (None when its recipe
    has none or the weight has not run yet)."""
    em = module.__dict__.get(_ATTR)
    w = getattr(module, "weight", None)
    if em is None or w is None:
        return None
    return em.delayed.get(id(w))
