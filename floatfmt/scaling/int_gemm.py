"""Integer matrix products with an int32 accumulator, as INT8 tensor cores compute them.

``int_matmul`` multiplies two integer-quantised tensors exactly, wraps the sums as an
int32 accumulator would (flagging every overflow), and optionally requantises the
accumulator with a multiplier rounded once to fp32.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend.fpu import ieee_entry
from ..core.formats import FormatLike, get_format
from .quantized_tensor import QuantizedTensor
from .quotients import mul_fp64, remainder_kwargs, scaled_product, scaled_quotient
from ..core.rounding import resolve_mode, round_values
from .scales import WIDE_INT, check_zero_point, code_range, given_scale

__all__ = ["int_matmul", "IntMatmulResult"]

_FP32 = get_format("fp32")


@dataclass(repr=False)
class IntMatmulResult:
    """Result of ``int_matmul``.

    acc : int32 accumulator as the hardware holds it (two's-complement wrapped).
    exact : the exact integer sums (int64).
    overflowed : bool mask, True where the exact sum does not fit int32 (acc is wrong there).
    may_overflow : bool mask, True where some summation order could pass through an
        out-of-range partial sum (sum of |products| beyond int32).
    acc_scale : the accumulator's scale ``scale_a * scale_b`` (float64, exact).
    out : the requantised ``QuantizedTensor`` when an output scale was given, else None.
    """

    acc: np.ndarray
    exact: np.ndarray
    overflowed: np.ndarray
    may_overflow: np.ndarray
    acc_scale: np.ndarray | float
    out: QuantizedTensor | None = None

    @property
    def n_overflow(self) -> int:
        return int(self.overflowed.sum())

    def dequantize(self) -> np.ndarray:
        """The requantised output's values, or ``acc * acc_scale`` (rounded once to float64)."""
        if self.out is not None:
            return self.out.dequantize()
        return mul_fp64(self.acc.astype(np.float64), self.acc_scale)

    def __repr__(self):
        o = f", out={self.out!r}" if self.out is not None else ""
        return (f"IntMatmulResult(shape={self.acc.shape}, int32 overflows={self.n_overflow}, "
                f"possible={int(self.may_overflow.sum())}{o})")


def _matmul_operand(q, name, allowed_axis):
    if not isinstance(q, QuantizedTensor):
        raise TypeError(f"int_matmul needs QuantizedTensor operands; {name} is {type(q).__name__}")
    if q.element_format.kind != "int":
        raise ValueError(f"int_matmul multiplies integer-quantised tensors; {name} is {q.fmt}")
    if q.elements.ndim != 2:
        raise ValueError(f"int_matmul needs 2-D operands; {name} has shape {q.shape}")
    if q.granularity in ("group", "block2d"):
        raise ValueError(f"int_matmul needs scales that factor out of the sums (per tensor or per "
                         f"channel); {name} has {q.granularity} scales")
    if q.granularity == "channel" and q.axis != allowed_axis:
        raise ValueError(f"per-channel scales of {name} must run along axis {allowed_axis} "
                         "(rows of A, columns of B) so they factor out of the sums")
    return (q.elements.astype(np.int64) - np.asarray(q.zero_point, np.int64),
            np.asarray(q.scale, np.float64))


@ieee_entry
def int_matmul(qa: QuantizedTensor, qb: QuantizedTensor, out_scale: Any = None,
               out_zero_point: int = 0, out_fmt: FormatLike = "int8",
               rounding: str = "nearest_even") -> IntMatmulResult:
    """Integer matrix product with an int32 accumulator, as INT8 tensor cores do it.

    ``acc[i, j] = sum_k (qa[i, k] - za) * (qb[k, j] - zb)`` is computed exactly; an
    int32 accumulator holds it modulo 2**32, so where the exact sum leaves
    [-2**31, 2**31 - 1] the result is flagged (``overflowed``) and a ``RuntimeWarning``
    says how many.  The accumulator's scale is ``scale_a * scale_b`` (per-row scales of
    A and per-column scales of B factor out).  With ``out_scale`` the accumulator is
    requantised: ``q = clamp(round(acc * m) + out_zero_point)`` with the multiplier
    ``m = fp32(scale_a * scale_b / out_scale)``, the product ``acc * m`` rounded once.

    >>> import floatfmt as ff
    >>> a = ff.quantize([[1.0, 1.5]], "int8", scale=1/64)
    >>> b = ff.quantize([[1.0], [1.0]], "int8", scale=1/64)
    >>> r = int_matmul(a, b)
    >>> int(r.acc[0, 0]), r.dequantize().tolist()
    (10240, [[2.5]])
    """
    a, sa = _matmul_operand(qa, "qa", 0)
    b, sb = _matmul_operand(qb, "qb", 1)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"shapes {qa.shape} and {qb.shape} do not align for a matrix product")
    if max(np.abs(a).max(initial=0), np.abs(b).max(initial=0)) ** 2 * max(a.shape[1], 1) >= 2 ** 62:
        raise ValueError("operands too large for an exact int64 check")
    exact = a @ b
    bound = np.abs(a) @ np.abs(b)
    lo, hi = -(1 << 31), (1 << 31) - 1
    overflowed = (exact < lo) | (exact > hi)
    may = bound > hi
    acc = ((exact - lo) % (1 << 32) + lo).astype(np.int32)
    if overflowed.any():
        warnings.warn(f"int_matmul: {int(overflowed.sum())} int32 accumulator(s) overflowed "
                      "(the wrapped results are wrong)", RuntimeWarning, stacklevel=2)
    acc_scale = mul_fp64(sa, sb)  # 24-bit * 24-bit: exact
    res = IntMatmulResult(acc, exact, overflowed, may,
                          float(acc_scale) if np.ndim(acc_scale) == 0 else acc_scale)
    if out_scale is not None:
        of = get_format(out_fmt)
        if of.kind != "int":
            raise ValueError(f"out_fmt must be an integer format, not {of.name}")
        so = given_scale(out_scale, "out_scale", exact, None)
        mq, mst = scaled_quotient(np.asarray(acc_scale, np.float64), None, so, False, _FP32)
        m = round_values(mq, _FP32, sticky=mst)
        rmode = resolve_mode(rounding)
        p, pst = scaled_product(acc.astype(np.float64), m, rmode == "stochastic")
        n = round_values(p, WIDE_INT, rmode, "saturate", **remainder_kwargs(pst))
        if isinstance(out_zero_point, bool) or not isinstance(out_zero_point, (int, np.integer)):
            raise TypeError(f"out_zero_point must be an integer, not {type(out_zero_point).__name__}")
        check_zero_point(int(out_zero_point), int(out_zero_point), of, "out_zero_point")
        qmin, qmax = code_range(of)
        n = np.clip(n + out_zero_point, qmin, qmax)
        res.out = QuantizedTensor(n, so, int(out_zero_point), of.name, of, "tensor", None,
                                  qmin=qmin, qmax=qmax,
                                  scheme="symmetric" if out_zero_point == 0 else "asymmetric")
    return res
