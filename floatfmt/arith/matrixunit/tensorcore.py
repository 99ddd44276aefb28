"""Tensor-core models: the truncated fused dot-product-add of NVIDIA matrix units.

One fused step takes L products a_i * b_i and an accumulator c
(see ``reference/tensor_cores.md`` and Khattak & Mikaitis, Xie et al.):

1. every product is exact and keeps its unnormalised significand in [0, 4):
   its exponent is ``e_a + e_b``, where a value's exponent is
   ``max(floor(log2|x|), emin)`` of its format (subnormals are used as they are);
2. ``e_max`` is the largest exponent among the products and c; a zero term has
   the exponent ``zero_exponent`` (a floor, about -133 on Hopper);
3. every term, c included, is truncated toward zero to a multiple of
   ``2**(e_max - F)``;
4. the truncated terms are added exactly;
5. the sum is rounded once to the step's output format: toward zero to fp32
   (``e8m13``, 13 fraction bits, for FP8 on Ada / Hopper), or to nearest-even
   fp16 for an fp16 accumulator.  A result past the output range is +-Inf, a NaN
   result is the canonical NaN, an exact zero is +0.

Where c enters is a model parameter, ``c_entry``.  ``"aligned"`` (every preset
but B200 FP8) is the rule above: c is one more term of the fused sum.  ``"after"``:
steps 2-5 run on the products with a zero accumulator (c does not set e_max
and is not truncated), and c is then added to that rounded sum by one ordinary
IEEE addition in the step format, rounded to nearest-even.  The B200 FP8 presets
use ``"after"``: it is what the measured B200 data shows (the evidence is in
their ``description``).

K longer than L is processed in blocks of L in K order, each result feeding
the next step as c.  INT8 inputs are summed exactly in int32 (wrapping).

``mma(a, b, c, fmt, model)`` is D = A.B + C as the matrix unit computes it, C
entering the unit as its accumulator input; ``matmul(..., model=..., beta=1.0,
c=C)`` instead adds C afterwards in a cuBLAS-style epilogue (see ``mma``).

A ``TensorCoreModel`` (``model``) holds those parameters as data, so a new GPU is a new
record (``presets``).  The step itself is ``tfdpa``, its fast kernel ``tensorcore_fast``;
this module holds the entry points, written once over the array namespace
(``floatfmt.backend.namespace``): ``mma`` and ``block_scaled_mma`` take numpy arrays and
tensors of any device alike (``tensor_entry(portable=True)``: CPU tensors run the numpy
path, other devices the same body on torch ops); ``choose_kernel`` is the one place that
picks the K chain's kernel.  ``matmul`` / ``dot`` with a model, the epilogue included,
are ``gemm``'s.  ``tensorcore_models()`` lists the presets (``"h100/bf16"`` ...);
``ff.matmul(a, b, "bf16", model="h100")`` picks the one for the format.

>>> import floatfmt as ff
>>> a, b = [1.0, 1.0, 1.0, 1.0], [2.0, 2.0**-23 + 2.0**-24, 0.0, 0.0]
>>> ff.dot(a, b, "fp16", model="a100"), ff.dot(a, b, "fp16")   # RZ vs a rounded fp32 sum
(2.0, 2.000000238418579)
"""

from __future__ import annotations

import math

import numpy as np

from . import cpuunits, fdpa
from ...core.block_formats import get_block_format, is_block_format
from ...backend.dispatch import tensor_entry
from ...backend.namespace import NUMPY, is_tensor, namespace
from ...core.formats import FormatLike, get_format
from ...core.names import unknown_name
from ...core.types import Values
from ...core.rounding import STOCHASTIC, make_rng, resolve_mode
from ...core.threads import limit_threads, run_parts

from .model import C_ENTRIES, TF32_OPERANDS, TensorCoreModel
from .presets import GPU_ALIASES, PRESETS, get_model, tensorcore_models
from .tensorcore_fast import chain_matmul_fast, fast_ok
from .tensorcore_fused import chain_matmul_fused, use_compiled
from .tfdpa import ZERO_OPERAND, exponents, fused_dot, lean_ok, tfdpa_step

__all__ = ["TensorCoreModel", "tensorcore_models", "get_model", "tensorcore_product",
           "fused_dot", "mma", "block_scaled_mma", "get_block_model", "mixed_block_format", "TF32_OPERANDS",
           "C_ENTRIES", "matmul_shapes", "mma_shapes", "check_int_operands"]



def _xp(*vs):
    """The namespace of the first tensor among vs, else numpy's."""
    for v in vs:
        if is_tensor(v):
            return namespace(v)
    return NUMPY


def _cast_inputs(a, b, fmt, model, rounding, overflow, ftz, daz, rng, sr_bits=None):
    """a, then b, cast to the model's input format (tf32 models: to fp32 in ``rounding``,
    then to tf32 by the model's ``tf32_operands`` rule), as float64 arrays or tensors;
    under stochastic rounding a and then b draw one number per element from ``rng``
    (a numpy Generator, or a torch.Generator on the tensors' device)."""
    from ...core.cast import cast
    xp = _xp(a, b)
    if xp is not NUMPY:  # numbers and lists beside a tensor: tensors on its device
        like = a if is_tensor(a) else b
        a, b = xp.operand(a, like), xp.operand(b, like)
    in_fmt = get_format(model.fmt)
    opts = dict(overflow=overflow, ftz=ftz, daz=daz, rng=rng, sr_bits=sr_bits, dtype=xp.float64)
    if model.fmt == "tf32":
        rule = TF32_OPERANDS[model.tf32_operands]
        x = cast(cast(a, "fp32", rounding, **opts), "tf32", rule, dtype=xp.float64)
        y = cast(cast(b, "fp32", rounding, **opts), "tf32", rule, dtype=xp.float64)
    else:
        x = cast(a, in_fmt, rounding, **opts)
        y = cast(b, in_fmt, rounding, **opts)
    x, y = xp.values(x), xp.values(y)
    if model.ftz:  # the unit flushes subnormal inputs to +0 (CDNA2)
        x, y = fdpa.flush_to_plus_zero(x, in_fmt), fdpa.flush_to_plus_zero(y, in_fmt)
    if model.daz:  # subnormal inputs read as zeros of their sign (Intel)
        x, y = cpuunits.read_as_zero(x, in_fmt), cpuunits.read_as_zero(y, in_fmt)
    if in_fmt.kind == "int":
        check_int_operands(model, xp.any(xp.isnan(x)), xp.any(xp.isnan(y)))
    return x, y, in_fmt


def check_int_operands(model: TensorCoreModel, nan_a: bool, nan_b: bool) -> None:
    """Refuse NaN operands of an integer-input unit (``*/int8`` presets, or any model
    whose input format is an integer format): ValueError when the cast operand ``a``
    (``nan_a``) or ``b`` (``nan_b``) holds a NaN.  An integer format has no code for
    NaN (``ff.encode(nan, "int8")`` refuses it too), so the unit cannot be given one;
    without this check a NaN would become some integer, a different one per path.
    +-Inf is no error: the operands' cast saturates it to the format's extremes (what
    ``ff.cast(inf, "int8")`` gives under every overflow policy it accepts).  The host
    one body (``_cast_inputs``) serves numpy arrays and tensors, so the error is the
    same on both.

    >>> check_int_operands(get_model("h100", "int8"), False, True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: int8 has no NaN, but operand b of the h100/int8 unit is NaN (replace NaN ...
    """
    which = [w for w, bad in (("a", nan_a), ("b", nan_b)) if bad]
    if which:
        raise ValueError(f"{model.fmt} has no NaN, but operand {' and '.join(which)} of the "
                         f"{model.name} unit {'is' if len(which) == 1 else 'are'} NaN (replace "
                         "NaN first, or use a floating-point model)")


def _int32_wrap(r):
    """Exact integer values (float64) wrapped to int32, as float64 (exact: |r| < 2**53)."""
    return (r + 2.0 ** 31) % 2.0 ** 32 - 2.0 ** 31


def _int_dot(x, y, kind, c=None):
    """The int8 unit: integer products summed exactly (float64 holds every partial sum
    of integers below 2**53 exactly, in any order), plus c, wrapped to int32."""
    xp = namespace(x)
    if kind == "dot":
        r = (x * y).sum(-1)
    elif x.shape[-1]:
        r = xp.matmul(x, y)
    else:  # K = 0
        r = xp.zeros(tuple(np.broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2])))
                     + (x.shape[-2], y.shape[-1]), x)
    return _int32_wrap(r if c is None else r + c)


_ROWS_ELEMS = 1 << 21


def tile_terms(x) -> int:
    """Products (rows x N x L) formed at once by the reference chain: 2**21 for numpy
    arrays (the tiles run on threads), 2**26 on a GPU (few, large kernels; about ten
    float64 temporaries of that size), 2**20 for tensors elsewhere (cache-sized)."""
    if not is_tensor(x):
        return _ROWS_ELEMS
    return 1 << 26 if x.device.type == "cuda" else 1 << 20


#: The kernels of a model's K chain (``_chain_matmul``): numpy's fast one, the fused steps
#: (``tensorcore_fused``) compiled by torch or run on numpy, and the two strategies of the
#: reference step (``tfdpa._fused``); all give the same bits.
KERNELS = ("fast", "compiled", "fused", "general", "lean")


def choose_kernel(x, y, m: TensorCoreModel, fmt, c=None) -> str:
    """The one place that chooses the kernel of the K chain: numpy arrays take the
    compiled fused kernel where ``ff.set_matmul_kernel("compiled")`` asks for it and
    ``tensorcore_fused.fused_ok`` admits the product (c: the initial accumulator),
    else ``tensorcore_fast`` where ``fast_ok`` admits them, else the reference steps
    (``tfdpa``, strategy ``"general"``); tensors take the reference steps, strategy
    ``"lean"`` where ``tfdpa.lean_ok`` admits the model (the same bits, fewer passes on
    a device)."""
    if not is_tensor(x):
        if fmt is not None and use_compiled(x, y, m, c):
            return "compiled"
        return "fast" if fmt is not None and fast_ok(x, y, m) else "general"
    return "lean" if fmt is not None and lean_ok(m, fmt) else "general"


def _chain_matmul(x, ex, y, ey, m: TensorCoreModel, c=None, fmt=None, kernel=None):
    """``x @ y`` (values with exponents ex, ey of format ``fmt``, None: computed here if the
    kernel reads them; at least 2-D) through the model's steps in
    K order, starting from the accumulator c (values of ``m.acc_fmt``, broadcast to the
    output shape; None: +0).  Works on a few output rows at a time to bound memory.
    ``kernel``: one of ``KERNELS`` (None: ``choose_kernel``'s; "fast" on numpy only,
    "lean" only where ``tfdpa.lean_ok`` holds)."""
    xp = namespace(x)
    out_shape = tuple(np.broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2]))) \
        + (x.shape[-2], y.shape[-1])
    strategy = choose_kernel(x, y, m, fmt, c) if kernel is None else kernel
    if strategy == "fast":
        return chain_matmul_fast(x, y, fmt, m, c, out_shape)
    if strategy in ("compiled", "fused"):  # torch.compile'd, or the same steps on numpy
        return chain_matmul_fused(x, y, fmt, m, c, out_shape, compiled=strategy == "compiled")
    if strategy not in KERNELS:
        raise unknown_name("tensor-core kernel", strategy, list(KERNELS))
    if ex is None:  # the reference steps need the operands' exponents (the fast kernel not)
        ex, ey = exponents(x, fmt), exponents(y, fmt)
    if strategy == "lean":  # zero operands: an exponent no product with them raises to e_max
        ex, ey = xp.where(x == 0, ZERO_OPERAND, ex), xp.where(y == 0, ZERO_OPERAND, ey)
    yt, eyt = xp.swapaxes(y, -1, -2), xp.swapaxes(ey, -1, -2)  # (..., N, K)
    K = x.shape[-1]
    c = xp.zeros(out_shape, x) if c is None else xp.broadcast_to(c, out_shape)
    out = xp.empty(out_shape, x)
    rows = out_shape[-2]
    per_row = max(1, math.prod(out_shape[:-2]) * out_shape[-1] * min(K, m.L))
    step = max(1, tile_terms(x) // per_row)

    def tile(t):  # a few output rows (tiles run on threads: floatfmt.core.threads)
        r0 = t * step
        xs, exs = x[..., r0:r0 + step, None, :], ex[..., r0:r0 + step, None, :]
        acc = xp.copy(c[..., r0:r0 + step, :])
        cfmt, ofmt = get_format(m.acc_fmt), m.output_format
        for k0 in range(0, K, m.L):
            sl = slice(k0, k0 + m.L)
            with xp.quiet():
                P = xs[..., sl] * yt[..., None, :, sl]
            EP = exs[..., sl] + eyt[..., None, :, sl]
            acc = tfdpa_step(P, EP, acc, m, cfmt, ofmt, strategy=strategy)
            cfmt = ofmt
        out[..., r0:r0 + step, :] = acc

    n = -(-rows // step)
    if xp is NUMPY:
        with limit_threads(1):  # 2 threads measured slower here (h100 256^3: 94 -> 128 ms)
            run_parts(n, tile)
    else:
        for t in range(n):
            tile(t)
    return out


def tensorcore_product(kind, a, b, fmt, model, acc_fmt="fp32", *, rounding="nearest_even",
                       overflow=None, ftz=False, daz=False, rng=None, sr_bits=None):
    """``dot`` (kind "dot": last axes, leading axes broadcast) or ``matmul`` of a and b
    through the tensor-core ``model``.  Returns (values, accumulator format name):
    float64 arrays for numpy operands, float64 tensors on the operands' device for
    tensors (one body, over the array namespace).

    The operands' casts to the model's input format take ``rounding`` (stochastic
    included: a and then b draw from the one generator ``rng``: numpy arrays
    ``make_rng(rng)``, tensors a ``torch.Generator`` on their device, with ``sr_bits``);
    the unit's own steps are deterministic."""
    m = get_model(model, fmt, acc_fmt)
    xp = _xp(a, b)
    if resolve_mode(rounding) in STOCHASTIC and xp is NUMPY:
        rng = make_rng(rng)  # one stream for both operands (an int seed is not reused)
    x, y, in_fmt = _cast_inputs(a, b, fmt, m, rounding, overflow, ftz, daz, rng, sr_bits)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"{kind} needs arrays, not scalars")
    if kind == "dot" and x.shape[-1] != y.shape[-1]:
        raise ValueError(f"dot: last axes differ ({x.shape[-1]} and {y.shape[-1]})")
    if m.fmt == "int8":
        if kind == "matmul":
            _, res_shape = matmul_shapes(x.shape, y.shape)
            x2 = x[None, :] if x.ndim == 1 else x
            y2 = y[:, None] if y.ndim == 1 else y
            return _int_dot(x2, y2, kind).reshape(res_shape), "fp32"
        return _int_dot(x, y, kind), "fp32"
    if kind == "dot":
        with xp.quiet():
            P = x * y
        EP = exponents(x, in_fmt) + exponents(y, in_fmt)
        r = fused_dot(P, xp.broadcast_to(EP, P.shape), m)
        return r, m.acc_fmt
    _, res_shape = matmul_shapes(x.shape, y.shape)
    if x.ndim == 1:
        x = x[None, :]
    if y.ndim == 1:
        y = y[:, None]
    return _chain_matmul(x, None, y, None, m, fmt=in_fmt).reshape(res_shape), m.acc_fmt


def matmul_shapes(xshape: tuple, yshape: tuple, kind: str = "matmul") -> tuple[tuple, tuple]:
    """The shapes of ``x @ y`` by numpy's rules, for numpy arrays and tensors alike
    (``gemm``, ``block_scaled_mma``): (the product's shape with a 1-D x read as
    (1, K) and a 1-D y as (K, 1), the result's shape without those axes).  ValueError
    for scalars, a K that differs, or batch axes that do not broadcast.

    >>> matmul_shapes((3,), (2, 3, 4))
    ((2, 1, 4), (2, 4))
    """
    xshape, yshape = tuple(xshape), tuple(yshape)
    if not xshape or not yshape:
        raise ValueError(f"{kind} needs arrays, not scalars")
    xs = (1,) + xshape if len(xshape) == 1 else xshape
    ys = yshape + (1,) if len(yshape) == 1 else yshape
    if xs[-1] != ys[-2]:
        raise ValueError(f"{kind}: shapes {xs} and {ys} do not align ({xs[-1]} != {ys[-2]})")
    try:
        batch = tuple(np.broadcast_shapes(xs[:-2], ys[:-2]))
    except ValueError:
        raise ValueError(f"{kind}: the batch axes of {xs} and {ys} do not broadcast") from None
    res = batch + xs[-2:-1] * (len(xshape) > 1) + ys[-1:] * (len(yshape) > 1)
    return batch + (xs[-2], ys[-1]), res


def mma_shapes(xshape: tuple, yshape: tuple) -> tuple:
    """The result shape (..., M, N) of ``mma`` for a of shape (..., M, K) and b of shape
    (..., K, N) (host and device); ValueError for fewer than 2 axes, a K that differs or
    batch axes that do not broadcast."""
    xshape, yshape = tuple(xshape), tuple(yshape)
    if len(xshape) < 2 or len(yshape) < 2:
        raise ValueError(f"mma: a and b must have at least 2 dimensions ((..., M, K) and "
                         f"(..., K, N)), not shapes {xshape} and {yshape}")
    return matmul_shapes(xshape, yshape, "mma")[0]


@tensor_entry('mma', ('a', 'b', 'c'), portable=True)
def mma(a: Values, b: Values, c: Values, fmt: FormatLike, model: str | TensorCoreModel,
        acc_fmt: FormatLike = "fp32") -> Values:
    """D = A.B + C as one matrix unit computes it: C is the accumulator input of the unit.

    ``a``: (..., M, K), ``b``: (..., K, N), ``c``: an array that broadcasts to the result
    shape (..., M, N) (leading batch axes broadcast, numpy rules).  ``a`` and ``b`` are
    cast to ``fmt`` (round to nearest even; tf32 models read fp32 operands by their
    ``tf32_operands`` rule), ``c`` to the accumulator format ``acc_fmt`` (``"fp32"``, or
    ``"fp16"`` where the model allows an fp16 accumulator), also round to nearest even.
    ``model`` is a preset name (``"h100"``, ``"b200/fp8_e4m3"``) or a ``TensorCoreModel``.

    The K products are taken in blocks of the model's L in K order; the first step gets
    C as its accumulator, every later step the previous result.  C enters each step
    where ``model.c_entry`` says: ``"aligned"`` (a term of the truncated fused sum) or
    ``"after"`` (added to the fused sum of the products by one round-to-nearest-even
    addition).  INT8 models add C (integers in the int32 range) exactly, wrapping in
    int32.  Returns a float64 array of the result's values (in the model's step format).

    How it differs from ``matmul(a, b, fmt, model=..., beta=1.0, c=C)``: matmul runs the
    unit from a zero accumulator and adds C afterwards in a cuBLAS-style epilogue,
    ``alpha * acc + beta * C`` rounded to nearest-even in fp32; ``mma`` puts C into the
    unit, where (with ``c_entry="aligned"``) it is aligned and truncated with the
    products.  Below, the product 1.5 * 2**-24 and C = 1: the H100 unit keeps
    F = 25 bits below 2**0, so the sum 1 + 3 * 2**-25 is truncated to 1; the epilogue
    rounds 1 + 1.5 * 2**-24 to nearest and gets 1 + 2**-23.  The B200 FP8 unit adds C
    after the products (``c_entry="after"``), like an epilogue:

    >>> import floatfmt as ff
    >>> a, b, C = [[1.5 * 2.0**-24]], [[1.0]], [[1.0]]
    >>> float(ff.mma(a, b, C, "bf16", "h100")[0, 0])
    1.0
    >>> float(ff.matmul(a, b, "bf16", model="h100", beta=1.0, c=C)[0, 0])
    1.0000001192092896
    >>> float(ff.mma([[1.5 * 2.0**-12]], [[2.0**-12]], C, "fp8_e5m2", "b200")[0, 0])
    1.0000001192092896
    """
    m = get_model(model, fmt, acc_fmt)
    xp = _xp(a, b, c)
    if xp is not NUMPY:  # numbers and lists beside a tensor c: tensors on its device
        like = next(v for v in (a, b, c) if is_tensor(v))
        a, b = xp.operand(a, like), xp.operand(b, like)
    x, y, in_fmt = _cast_inputs(a, b, fmt, m, "nearest_even", None, False, False, None)
    out_shape = mma_shapes(x.shape, y.shape)
    cv = _accumulator_input(c, m, out_shape, x)
    if m.fmt == "int8":
        return _int_dot(x, y, "matmul", cv)
    return _chain_matmul(x, None, y, None, m, cv, in_fmt)


def _accumulator_input(c, m: TensorCoreModel, out_shape, like):
    """c as values of the model's accumulator (on ``like``'s namespace and device),
    broadcast to out_shape (checked)."""
    from ...core.cast import cast
    if isinstance(c, (str, bytes)) or c is None:
        raise TypeError(f"mma: c must be a number or an array of numbers, not {type(c).__name__}")
    xp = namespace(like)
    c = xp.operand(c, like)
    if m.fmt == "int8":
        cv = xp.values(c)
        with xp.quiet():
            ok = xp.isfinite(cv) & (cv == xp.rint(cv)) & (xp.abs(cv + 0.5) <= 2.0 ** 31)
        if not xp.all(ok):
            raise ValueError("mma: an int8 model's c must hold integers in the int32 range")
    else:
        cv = xp.values(cast(c, m.acc_fmt, dtype=xp.float64))
        if m.ftz:
            cv = fdpa.flush_to_plus_zero(cv, get_format(m.acc_fmt))
    try:
        fits = np.broadcast_shapes(tuple(cv.shape), tuple(out_shape)) == tuple(out_shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"mma: c of shape {tuple(cv.shape)} does not broadcast to the result "
                         f"shape {tuple(out_shape)}")
    return xp.broadcast_to(cv, out_shape)


def get_block_model(model: "str | TensorCoreModel", block_fmt: str | None = None) -> TensorCoreModel:
    """A block-scaled model from a ``TensorCoreModel``, ``"b200/mxfp8_e4m3"``, or a GPU
    name (``"b200"``, ``"b200_mxf4nvf4"``) and the block format (``"mxfp8_e4m3"``,
    ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``, ``"mxfp6_e3m2"``, ``"mxfp4_e2m1"``, ``"nvfp4"``)."""
    if isinstance(model, TensorCoreModel):
        m = model
    elif isinstance(model, str):
        gpu, _, given = model.strip().lower().partition("/")
        gpu = GPU_ALIASES.get(gpu, gpu)
        bname = given or (block_fmt or "").strip().lower()
        if is_block_format(bname):
            bname = get_block_format(bname).name
        key = f"{gpu}/{bname}"
        if key not in PRESETS or PRESETS[key].block_fmt is None:
            valid = sorted(k for k, v in PRESETS.items() if v.block_fmt is not None)
            raise unknown_name("block-scaled model", key, valid, note=" (or a TensorCoreModel)")
        m = PRESETS[key]
    else:
        raise TypeError(f"model must be a preset name or a TensorCoreModel, not "
                        f"{type(model).__name__}")
    if m.block_fmt is None:
        raise ValueError(f"model {m.name} is not block-scaled (no scale_fmt)")
    if block_fmt is not None and is_block_format(block_fmt):
        block_fmt = get_block_format(block_fmt).name
    if block_fmt is not None and block_fmt.strip().lower() != m.block_fmt:
        raise ValueError(f"model {m.name} takes {m.block_fmt} operands, not {block_fmt}")
    return m


#: The fields two block-scaled presets must share for one instruction to take an operand
#: of each (the unit's arithmetic, scales and block size; only the element format differs).
_SHARED = ("algorithm", "F", "L", "acc_fmt", "step_fmt", "rounding", "zero_exponent",
           "c_entry", "scale_fmt", "scale_block", "group")


def mixed_block_format(model: "str | TensorCoreModel", a_fmt: str, b_fmt: str) -> str:
    """The element format of B when A is ``a_fmt`` and B ``b_fmt`` on one block-scaled unit
    (``model``: a GPU name such as ``"b200"`` or a ``TensorCoreModel`` for A).

    Blackwell's ``kind::mxf8f6f4`` takes the types of A and B independently (e4m3, e5m2,
    e2m3, e3m2, e2m1: PTX ISA, tcgen05.mma), all with ue8m0 scales per 32; so two block
    formats mix when the unit has a preset for each and the two presets share every field
    of the arithmetic and the scales (``_SHARED``).  NVFP4 (ue4m3 per 16) mixes with
    nothing, nor does ``kind::mxf4nvf4`` MXFP4 with an ``mxf8f6f4`` format.  Refusals name
    the formats the unit takes and which of them mix.

    >>> mixed_block_format("b200", "mxfp8_e4m3", "mxfp8_e5m2")
    'fp8_e5m2'
    """
    ma = get_block_model(model, a_fmt)
    if isinstance(model, TensorCoreModel):
        bf = get_block_format(b_fmt)
        mb = ma.replace(fmt=bf.element, block_fmt=bf.name, scale_fmt=bf.scale,
                        scale_block=bf.block_size)
    else:
        gpu = ma.name.split("/")[0]
        try:
            mb = get_block_model(gpu, b_fmt)
        except ValueError:
            have = sorted(k.split("/")[1] for k, v in PRESETS.items()
                          if k.startswith(gpu + "/") and v.block_fmt is not None)
            raise ValueError(f"the {gpu} block-scaled unit has no {b_fmt} operands; it takes "
                             f"{', '.join(have)}") from None
    if any(getattr(ma, f) != getattr(mb, f) for f in _SHARED):
        gpu = ma.name.split("/")[0]
        peers = sorted(k.split("/")[1] for k, v in PRESETS.items()
                       if k.startswith(gpu + "/") and v.block_fmt is not None
                       and all(getattr(v, f) == getattr(ma, f) for f in _SHARED))
        raise ValueError(f"{ma.name} cannot take a {mb.block_fmt} operand with its "
                         f"{ma.block_fmt} one (another kind of instruction, other scales); "
                         f"{ma.block_fmt} mixes with: {', '.join(peers)}")
    return mb.fmt


@tensor_entry('block_scaled_mma', ('a', 'a_scale', 'b', 'b_scale', 'c'), portable=True)
def block_scaled_mma(a: Values, a_scale: Values, b: Values, b_scale: Values, c: Values = 0.0,
                     model: "str | TensorCoreModel" = "b200",
                     block_fmt: str | None = None, b_block_fmt: str | None = None) -> Values:
    """D = A.B + C on a block-scaled matrix unit (Blackwell ST-FDPA / GST-FDPA), the
    block scales applied inside the instruction.

    ``a``: (..., M, K) and ``b``: (..., K, N) element values (cast to the model's element
    format, RNE); ``a_scale``: (..., M, ceil(K / B)) and ``b_scale``: (..., ceil(K / B), N)
    scale values, one per B = ``model.scale_block`` consecutive elements along K (the
    layout ``ff.quantize(a, "mxfp8_e4m3", axis=-1).scale`` and ``axis=-2`` give);
    ``c``: the fp32 accumulator input, broadcast to (..., M, N).  The sign of a scale is
    ignored (ue8m0 / ue4m3); a NaN scale gives NaN.

    ST-FDPA (``group == 1``): each product a*b*|s_a|*|s_b| has the exponent
    e_a + e_b + e(s_a) + e(s_b); GST-FDPA (``group == G``): each sum of G products,
    times |s_a|*|s_b|, has the exponent e(s_a) + e(s_b), also when the sum is exactly 0
    (MMA-Sim's ``nv_fused_dot_add_with_block_scale``; a zero scale has the exponent
    ``zero_exponent`` there).  Those terms then go through
    T-FDPA steps (``L / group`` terms and c per step, F bits, RZ to fp32) in K order.
    Returns the float64 values of the fp32 result.  ``ff.block_scaled_matmul`` does
    the quantisation and NVFP4's per-tensor scale.

    ``b_block_fmt``: B's block format when it differs from A's (``block_fmt``, or the
    model's): ``kind::mxf8f6f4`` takes A and B types independently
    (``mixed_block_format`` says which mix).  Each operand is then read in its own element
    format: a product's exponent is e_a (A's format) + e_b (B's format) + the scales'.
    Mixed formats on the unit are not characterised by measurements (a modelling choice:
    the rule above with each operand's own exponent).

    >>> a, b = [[1.0, 2.0**-24]], [[1.0], [1.0]]          # e4m3 elements, k = 2
    >>> s1 = [[1.0]]                                      # ue8m0 scales 2**0
    >>> float(block_scaled_mma(a, s1, b, s1, 0.0, "b200", "mxfp8_e4m3")[0, 0])
    1.0
    """
    from ...core.cast import cast
    m = get_block_model(model, block_fmt)
    elem, sfmt = get_format(m.fmt), get_format(m.scale_fmt or "e8m0")
    elem_b = elem if b_block_fmt is None else \
        get_format(mixed_block_format(model if isinstance(model, TensorCoreModel) else
                                      m.name.split("/")[0], m.block_fmt or "", b_block_fmt))
    xp = _xp(a, a_scale, b, b_scale, c)
    like = next((v for v in (a, a_scale, b, b_scale, c) if is_tensor(v)), None)
    a, a_scale, b, b_scale = (xp.operand(v, like) for v in (a, a_scale, b, b_scale))
    x = xp.values(cast(a, elem, dtype=xp.float64))
    y = xp.values(cast(b, elem_b, dtype=xp.float64))
    sx, sy = xp.values(a_scale), xp.values(b_scale)
    xs, ys = tuple(x.shape), tuple(y.shape)
    if x.ndim < 2 or y.ndim < 2 or xs[-1] != ys[-2]:
        raise ValueError(f"block_scaled_mma: shapes {xs} and {ys} do not align "
                         "as (..., M, K) and (..., K, N)")
    nb = -(-xs[-1] // m.scale_block)
    want_x, want_y = xs[:-1] + (nb,), ys[:-2] + (nb, ys[-1])
    if tuple(sx.shape) != want_x or tuple(sy.shape) != want_y:
        raise ValueError(f"block_scaled_mma: scales of shapes {tuple(sx.shape)} and "
                         f"{tuple(sy.shape)}; {m.name} needs {want_x} and {want_y} (one per "
                         f"{m.scale_block} along K)")
    out_shape = tuple(np.broadcast_shapes(xs[:-2], ys[:-2])) + (xs[-2], ys[-1])
    cv = _accumulator_input(c, m, out_shape, x)
    T, ET = fdpa.scaled_terms(x, sx, y, sy, elem, sfmt, m.scale_block, m.group, m.zero_exponent,
                              elem_y=elem_b)
    return fused_dot(T, ET, m.replace(L=m.L // m.group, group=1), cv,  # terms per step
                     keep=m.group > 1)
