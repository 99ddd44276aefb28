"""The random Hadamard transform (RHT) of NVFP4 training: 16 x 16 blocks, fixed signs.

NVIDIA's NVFP4 recipe multiplies the inputs of the weight-gradient GEMM (the
activations and the output gradients, along the axis that GEMM reduces over) by an
orthogonal matrix ``T = diag(s) @ H16 / 4`` block by block, ``x_block @ T``
(``H16`` the Sylvester Hadamard matrix, ``H16[i, j] = (-1)**popcount(i & j)``, ``s``
a fixed vector of signs), so that outliers spread over 16 elements before the
NVFP4 quantisation; as both operands get the same ``T`` and ``T @ T.T = I``, the
GEMM ``(A T)(B T)^T = A B^T`` is unchanged up to the rounding of what is quantised.

Sources: NVIDIA, "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149,
section 4.1: RHT on Wgrad inputs, 16 x 16, one fixed random sign vector);
Transformer Engine ``transformer_engine/pytorch/tensor/nvfp4_tensor.py``
(``get_wgrad_sign_vector``, ``get_hadamard_matrix``, ``get_rht_matrix``: ``diag(signs) @ H
/ sqrt(16)``, stored as bfloat16: the entries +-1/4 are exact) and
``transformer_engine/common/recipe/__init__.py`` (``NVFP4BlockScaling``: RHT on the
column-wise, i.e. Wgrad, copies of inputs and gradients).

floatfmt's model of the transform: each output is the exact sum of its 16 products
(``x`` taken to fp32; the entries are +-1/4) rounded once to ``fmt`` (fp32: TE's
transform runs on the tensor core with fp32 accumulation, whose own sum order is
not modelled).

    >>> import numpy as np
    >>> T = rht_matrix()
    >>> bool((T @ T.T == np.eye(16)).all()), float(T[0, 0])
    (True, 0.25)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arith.accumulate import matmul
from ..core.cast import cast

__all__ = ["RHT_SIZE", "TE_WGRAD_SIGNS", "hadamard_matrix", "rht_matrix", "random_hadamard_transform"]

#: The block of NVFP4's transform.
RHT_SIZE = 16
#: Transformer Engine's fixed sign vector of the Wgrad RHT (``get_wgrad_sign_vector``).
TE_WGRAD_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


def hadamard_matrix(n: int = RHT_SIZE) -> np.ndarray:
    """The Sylvester Hadamard matrix of order ``n`` (a power of two) scaled by ``1/sqrt(n)``:
    ``H[i, j] = (-1)**popcount(i & j) / sqrt(n)`` (orthogonal; exact for ``n = 4**k``).

    >>> (hadamard_matrix(4) * 2).astype(int).tolist()[1]
    [1, -1, 1, -1]
    """
    if not isinstance(n, int) or n < 1 or n & (n - 1):
        raise ValueError(f"the Hadamard order must be a power of two, not {n!r}")
    i = np.arange(n)
    par = np.vectorize(lambda v: bin(v).count("1") & 1)(i[:, None] & i[None, :])
    return np.where(par == 1, -1.0, 1.0) / np.sqrt(n)


def rht_matrix(signs: Any = TE_WGRAD_SIGNS) -> np.ndarray:
    """``diag(signs) @ hadamard_matrix(len(signs))``: the RHT's matrix (rows scaled by the signs)."""
    s = np.asarray(signs, np.float64)
    if s.ndim != 1 or not np.isin(s, (-1.0, 1.0)).all():
        raise ValueError("signs must be a 1-D sequence of +1 and -1")
    return s[:, None] * hadamard_matrix(s.size)


def random_hadamard_transform(x: Any, axis: int = -1, signs: Any = TE_WGRAD_SIGNS,
                              fmt: str = "fp32") -> np.ndarray:
    """``x`` with every block of 16 along ``axis`` multiplied by ``rht_matrix(signs)``
    (``x_block @ T``), each output the exact sum rounded once to ``fmt``.  An axis whose
    length is not a multiple of the block is padded with zeros first (the result is
    longer: pad the other GEMM operand the same way, the transform of zeros is zero).

    >>> x = np.zeros((2, 16)); x[0, 0] = 4.0
    >>> random_hadamard_transform(x)[0, :4].tolist()    # row 0 of T, times 4
    [1.0, 1.0, 1.0, 1.0]
    """
    T = rht_matrix(signs)
    n = T.shape[0]
    v = np.asarray(x, np.float64).astype(np.float32).astype(np.float64)
    if v.ndim == 0:
        raise ValueError("the transform needs an array with at least one dimension")
    v = np.moveaxis(v, axis, -1)
    length = v.shape[-1]
    pad = -length % n
    if pad:
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (pad,))], axis=-1)
    blocks = v.reshape(-1, n)
    out = np.asarray(cast(_exact_sums(blocks, T), fmt), np.float64)
    bad = ~_float64_exact(blocks)
    if bad.any():  # blocks whose float64 sums may round: the exact accumulator
        out[bad] = np.asarray(matmul(blocks[bad], T, "fp32", acc_fmt="fp32", order="exact",
                                     out_fmt=fmt), np.float64)
    return np.moveaxis(out.reshape(v.shape), -1, axis)


def _exact_sums(blocks: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``blocks @ T`` summed in float64 (exact where ``_float64_exact`` says so)."""
    return (blocks[:, :, None] * T[None, :, :]).sum(axis=1)


def _float64_exact(blocks: np.ndarray) -> np.ndarray:
    """Rows of fp32 values whose float64 sums of +-x/4 are exact: every term is a multiple
    of 2**(e_min - 26) and the total is below 2**(e_max + 3), so a span of exponents
    ``e_max - e_min <= 25`` fits float64's 53 bits."""
    _, e = np.frexp(blocks)
    nz = blocks != 0
    hi = np.where(nz, e, -10**6).max(axis=1)
    lo = np.where(nz, e, 10**6).min(axis=1)
    return ~nz.any(axis=1) | (hi - lo <= 25)
