"""``QuantizedTensor``'s methods on tensors of any device: ``dequantize``, ``codes`` and
``limits``, written over the array namespace (torch ops on the tensor's device; torch is
never imported here).

``floatfmt.backend.dispatch.tensor_method`` calls these for a ``QuantizedTensor`` whose fields
are tensors that the numpy kernels do not compute (CUDA tensors, or CPU tensors under
``force_namespace``, which the tests use to prove them equal to the numpy methods).
The rules are those of ``floatfmt.scaling.quantized_tensor``:

* ``dequantize``: ``(elements - zero_point) * scale`` (one rounding-free product:
  float64 holds it), the scale expanded to one value an element (per channel by
  broadcasting, per group / 2-D block by repeating the tile grid, per MX / NVFP4 block
  by repeating along ``axis``; NVFP4's block scale times its fp32 tensor scale first);
  a NaN scale makes its block NaN;
* ``codes``: the integers of integer formats (int8 / uint8 / int16 / uint16 tensors),
  bit patterns for float elements (``codec.values_to_codes`` on the device) and
  MXINT8's two's-complement byte;
* ``limits``: the clipping thresholds of the clipped straight-through gradient.
"""

from __future__ import annotations

from typing import Any

from ..core.block_formats import get_block_format
from ..backend.namespace import is_tensor, namespace
from ..core.codec import values_to_codes

__all__ = ["device_dequantize", "device_codes", "device_limits", "expand_tiles"]


def expand_tiles(a: Any, tile: tuple, shape: tuple) -> Any:
    """One value a tile (the grid ``a``) -> one value an element of ``shape`` (a tensor)."""
    for d, n in enumerate(tile):
        if n > 1:
            a = a.repeat_interleave(n, dim=d)
    return a[tuple(slice(0, n) for n in shape)]


def _as_tensor(a: Any, like: Any) -> Any:
    t = namespace(like).t
    if is_tensor(a):
        return a.to(t.float64)
    return t.as_tensor(a, dtype=t.float64, device=like.device)


def _expand(q: Any, a: Any) -> Any:
    """Per-block values -> per-element values (broadcastable to ``q.elements``)."""
    e = q.elements
    a = _as_tensor(a, e)
    if q.block_shape is not None:
        return a if a.ndim == 0 else expand_tiles(a, q.block_shape, tuple(e.shape))
    if q.granularity != "block":
        return a
    rep = a.repeat_interleave(q.block_size, dim=q.axis)
    n = e.shape[q.axis]
    return rep.narrow(q.axis, 0, n) if rep.shape[q.axis] != n else rep


def device_dequantize(q: Any, dtype: Any = None) -> Any:
    """``QuantizedTensor.dequantize`` of a tensor-holding ``q`` on its device: float64
    (exact), or ``dtype`` (a torch dtype or a numpy dtype / name)."""
    xp = namespace(q.elements)
    t = xp.t
    e = q.elements.to(t.float64)
    if q.granularity == "block":
        s = _as_tensor(q.scale, e)
        if q.tensor_scale is not None:
            s = s * q.tensor_scale  # e4m3 * fp32: exact in float64
        out = e * _expand(q, s)  # a NaN scale makes its block NaN
    else:
        zp = _expand(q, q.zero_point)
        sc = _expand(q, q.scale)
        out = (e - zp) * sc if bool((zp != 0).any()) else e * sc
    return out if dtype is None else out.to(xp.dtype_of(dtype))


def device_codes(q: Any) -> Any:
    """``QuantizedTensor.codes`` of a tensor-holding ``q`` on its device."""
    xp = namespace(q.elements)
    t = xp.t
    fmt = q.element_format
    e = q.elements.to(t.float64)
    if q.fmt == "mxint8":
        return values_to_codes(xp.ldexp(e, get_block_format("mxint8").element_shift), fmt)
    if fmt.kind == "int":
        wide = fmt.bits > 8
        dt = (t.int16 if wide else t.int8) if fmt.signed else (t.uint16 if wide else t.uint8)
        return e.to(dt)
    return values_to_codes(e, fmt)


def device_limits(q: Any) -> tuple[Any, Any]:
    """``QuantizedTensor.limits`` of a tensor-holding ``q``: (lo, hi) float64 tensors,
    broadcastable to the input (see ``QuantizedTensor.limits``)."""
    s = _expand(q, q.scale)
    if q.tensor_scale is not None:
        s = s * q.tensor_scale
    f = q.element_format
    if f.kind == "int" and q.fmt != "mxint8":
        zp = _expand(q, q.zero_point)
        return (q.qmin - 0.5 - zp) * s, (q.qmax + 0.5 - zp) * s
    top = (127 + 0.5) / 64 if q.fmt == "mxint8" else f.max + 2.0 ** (f.emax - f.mbits) / 2
    return -top * s, top * s
