"""NVFP4 operands of ``emulate`` by Transformer Engine's arithmetic (branch nvfp4).

A recipe with ``scaling="block"``, NVFP4 operands and ``scale_convention="te"``
(``"nvfp4_training"``) brings each GEMM operand into NVFP4 with
``floatfmt.scaling.nvfp4_te.nvfp4_te_quantize``: weights in 16 x 16 tiles when the
recipe says ``weight_block_2d`` (each matrix of a stacked weight its own tiles, one
tensor amax), everything else in 1 x 16 blocks along the GEMM's K; output gradients
rounded by ``grad_rounding`` (stochastic rounding seeded from torch's generator, so
``torch.manual_seed`` repeats a run); with ``wgrad_rht`` the two inputs of a weight-gradient
GEMM first go through the random Hadamard transform along K
(``floatfmt.scaling.hadamard``; K padded with zeros to a multiple of 16, both
operands alike).  The operand's values are ``q * s_b`` (E2M1 times E4M3, exact) and
its tensor scale ``S_dec = fp32(1 / S_enc)``, so the GEMM's alpha is
``fp32(S_dec_a * S_dec_b)`` (TE's cuBLAS alpha is made from the two amaxes instead,
``floatfmt.scaling.nvfp4_te.te_gemm_alpha``: a difference in the last bit of alpha).
Host (CPU) tensors only: the TE arithmetic has no device code yet.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..scaling.hadamard import random_hadamard_transform
from ..scaling.nvfp4_te import nvfp4_te_quantize

__all__ = ["nvfp4_te_values"]


def nvfp4_te_values(v: torch.Tensor, r: Any, axis: int, role: str, weight: bool,
                    rht: bool) -> tuple[torch.Tensor, float]:
    """(``q * s_b`` as a float64 tensor, ``S_dec``) of ``v`` under recipe ``r`` (the module
    docstring); ``axis``: the GEMM's K; ``role``: ``"forward"`` or ``"backward"`` (the
    output gradient); ``weight``: ``v`` is a weight; ``rht``: an input of a weight-gradient GEMM."""
    if v.device.type != "cpu":
        raise NotImplementedError(f"scale_convention='te' NVFP4 operands run on CPU tensors, "
                                  f"not {v.device.type}")
    a = v.detach().to(torch.float64).numpy()
    if rht and r.wgrad_rht:
        a = random_hadamard_transform(a, axis)
    mode = r.grad_rounding if role == "backward" else "nearest_even"
    # stochastic rounding's seed from torch's generator: torch.manual_seed repeats a run
    rng = int(torch.randint(0, 2 ** 62, (1,)).item()) if mode == "stochastic" else None
    amax = float(np.max(np.abs(a.astype(np.float32)))) if a.size else 0.0
    if weight and r.weight_block_2d and a.ndim >= 2:
        mats = a.reshape((-1,) + a.shape[-2:])
        ax = axis % a.ndim - (a.ndim - 2)
        if ax < 0:
            raise ValueError("a 2-D weight tile needs K among the last two axes")
        qs = [nvfp4_te_quantize(m, ax, tile=(16, 16), rounding=mode, amax=amax,
                                rng=None if rng is None else rng + i) for i, m in enumerate(mats)]
        ts = float(qs[0].tensor_scale)  # type: ignore[arg-type]  # NVFP4 has one
        out = np.stack([q.dequantize() / ts for q in qs]).reshape(a.shape)
    else:
        q = nvfp4_te_quantize(a, axis, rounding=mode, amax=amax, rng=rng)
        ts = float(q.tensor_scale)  # type: ignore[arg-type]  # NVFP4 has one
        out = q.dequantize() / ts
    return torch.from_numpy(np.ascontiguousarray(out)), ts
