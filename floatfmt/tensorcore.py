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

K longer than L is processed in blocks of L in K order, each result feeding
the next step as c.  INT8 inputs are summed exactly in int32 (wrapping).

A ``TensorCoreModel`` holds those parameters as data, so a new GPU is a new
record.  ``tensorcore_models()`` lists the presets (``"h100/bf16"`` ...);
``ff.matmul(a, b, "bf16", model="h100")`` picks the one for the format.

>>> import floatfmt as ff
>>> a, b = [1.0, 1.0, 1.0, 1.0], [2.0, 2.0**-23 + 2.0**-24, 0.0, 0.0]
>>> ff.dot(a, b, "fp16", model="a100"), ff.dot(a, b, "fp16")   # RZ vs a rounded fp32 sum
(2.0, 2.000000238418579)
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass

import numpy as np

from .formats import Format, get_format
from .rounding import round_values

__all__ = ["TensorCoreModel", "tensorcore_models", "get_model", "tensorcore_product",
           "fused_dot", "TF32_OPERANDS"]

TF32_OPERANDS = {"truncate": "toward_zero", "rne": "nearest_even", "rna": "nearest_away"}


@dataclass(frozen=True)
class TensorCoreModel:
    """One matrix unit for one input format, as data.

    Fields
    ------
    name : e.g. ``"h100/bf16"``.
    fmt : input format name (``fp16``, ``bf16``, ``tf32``, ``fp8_e4m3``, ``fp8_e5m2``, ``int8``).
    F : fraction bits kept below ``2**e_max`` after alignment (ignored for int8).
    L : products fused in one step.
    acc_fmt : accumulator format, ``"fp32"`` or ``"fp16"`` (c and the result).
    step_fmt : format each step's sum is rounded to (None: acc_fmt; ``"e8m13"`` for
        FP8 on Ada / Hopper: fp32 range, 13 fraction bits).
    rounding : rounding of each step's sum (``toward_zero``; ``nearest_even`` for fp16
        accumulators).
    zero_exponent : exponent given to zero terms so that they (almost) never set e_max.
    tf32_operands : how fp32 operands become tf32 (``truncate`` as the unit reads them,
        ``rne`` or ``rna`` if the library rounds them first); tf32 models only.
    overflow : ``"inf"``: a sum past the step format's range gives +-Inf;
        ``"saturate"``: +-max.
    description : free text (GPUs, sources).

    >>> m = tensorcore_models()["h100/fp8_e4m3"]
    >>> m.F, m.L, m.step_fmt
    (13, 32, 'e8m13')
    >>> my_gpu = m.replace(name="next/fp8_e4m3", F=25, step_fmt=None)
    """

    name: str
    fmt: str
    F: int
    L: int
    acc_fmt: str = "fp32"
    step_fmt: str | None = None
    rounding: str = "toward_zero"
    zero_exponent: int = -133
    tf32_operands: str = "truncate"
    overflow: str = "inf"
    description: str = ""

    def __post_init__(self):
        if not isinstance(self.L, int) or self.L < 1:
            raise ValueError(f"L must be a positive integer, not {self.L!r}")
        if self.fmt != "int8" and (not isinstance(self.F, int) or not 1 <= self.F <= 40):
            raise ValueError(f"F must be an integer in 1..40, not {self.F!r}")
        if self.acc_fmt not in ("fp32", "fp16"):
            raise ValueError(f"acc_fmt must be 'fp32' or 'fp16', not {self.acc_fmt!r}")
        if self.tf32_operands not in TF32_OPERANDS:
            raise ValueError(f"tf32_operands must be one of {', '.join(TF32_OPERANDS)}, "
                             f"not {self.tf32_operands!r}")
        if self.overflow not in ("inf", "saturate"):
            raise ValueError(f"overflow must be 'inf' or 'saturate', not {self.overflow!r}")
        get_format(self.fmt)
        get_format(self.step_fmt or self.acc_fmt)

    def replace(self, **changes) -> "TensorCoreModel":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @property
    def output_format(self) -> Format:
        return get_format(self.step_fmt or self.acc_fmt)


_GPUS = {
    # gpu: (description, {input format group: (F, L, step_fmt)})
    "v100": ("NVIDIA V100 (Volta)", {"fp16": (23, 4, None)}),
    "t4": ("NVIDIA T4 (Turing)", {"fp16": (24, 8, None), "int8": (0, 16, None)}),
    "a100": ("NVIDIA A100 / A30 (Ampere)",
             {"fp16": (24, 8, None), "bf16": (24, 8, None), "tf32": (24, 4, None),
              "int8": (0, 16, None)}),
    "ada": ("NVIDIA Ada Lovelace (L40S, RTX 40)",
            {"fp16": (24, 8, None), "bf16": (24, 8, None), "tf32": (24, 4, None),
             "fp8_e4m3": (13, 16, "e8m13"), "fp8_e5m2": (13, 16, "e8m13"), "int8": (0, 16, None)}),
    "h100": ("NVIDIA H100 / H200 / H800 (Hopper)",
             {"fp16": (25, 16, None), "bf16": (25, 16, None), "tf32": (25, 8, None),
              "fp8_e4m3": (13, 32, "e8m13"), "fp8_e5m2": (13, 32, "e8m13"), "int8": (0, 32, None)}),
    "b200": ("NVIDIA B200 (Blackwell)",
             {"fp16": (25, 16, None), "bf16": (25, 16, None), "tf32": (25, 8, None),
              "fp8_e4m3": (25, 32, None), "fp8_e5m2": (25, 32, None), "int8": (0, 32, None)}),
}
_GPU_ALIASES = {"h200": "h100", "h800": "h100", "a30": "a100", "l40s": "ada", "rtx40": "ada",
                "volta": "v100", "turing": "t4", "ampere": "a100", "hopper": "h100",
                "blackwell": "b200", "lovelace": "ada"}


def _build_presets() -> dict:
    out = {}
    for gpu, (desc, table) in _GPUS.items():
        for fmt, (F, L, step) in table.items():
            out[f"{gpu}/{fmt}"] = TensorCoreModel(
                name=f"{gpu}/{fmt}", fmt=fmt, F=F, L=L,
                step_fmt=step, description=desc)
    return out


_PRESETS = _build_presets()


def tensorcore_models() -> dict:
    """Every preset model by name (``"gpu/format"``); h200 and h800 are the h100 models.

    >>> sorted(k for k in tensorcore_models() if k.startswith("h100"))
    ['h100/bf16', 'h100/fp16', 'h100/fp8_e4m3', 'h100/fp8_e5m2', 'h100/int8', 'h100/tf32']
    """
    return dict(_PRESETS)


def get_model(model, fmt, acc_fmt="fp32") -> TensorCoreModel:
    """Resolve ``model`` (a ``TensorCoreModel``, ``"h100"`` or ``"h100/bf16"``) for inputs
    of ``fmt`` and an accumulator ``acc_fmt`` (``"fp32"`` or ``"fp16"``)."""
    fmt = get_format(fmt)
    key_fmt = "tf32" if fmt.name in ("tf32", "fp32") else fmt.name
    if isinstance(model, TensorCoreModel):
        m = model
    elif isinstance(model, str):
        name = model.strip().lower()
        gpu, _, given_fmt = name.partition("/")
        gpu = _GPU_ALIASES.get(gpu, gpu)
        if gpu not in _GPUS:
            valid = list(_GPUS) + list(_GPU_ALIASES)
            close = difflib.get_close_matches(gpu, valid, n=3, cutoff=0.4)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"unknown tensor-core model {model!r}.{hint} "
                             f"Valid: {', '.join(valid)} (or a TensorCoreModel).")
        if given_fmt:
            key_fmt = get_format(given_fmt).name
        key = f"{gpu}/{key_fmt}"
        if key not in _PRESETS:
            have = sorted(k.split("/")[1] for k in _PRESETS if k.startswith(gpu + "/"))
            raise ValueError(f"the {gpu} model has no {key_fmt} inputs; it supports "
                             f"{', '.join(have)}")
        m = _PRESETS[key]
    else:
        raise TypeError(f"model must be a preset name or a TensorCoreModel, not "
                        f"{type(model).__name__}")
    if m.fmt != key_fmt:
        raise ValueError(f"model {m.name} takes {m.fmt} inputs, not {fmt.name}")
    acc = get_format(acc_fmt).name if acc_fmt is not None else "fp32"
    if acc != m.acc_fmt:
        if acc == "fp16" and m.fmt in ("fp16", "fp8_e4m3", "fp8_e5m2"):
            m = m.replace(acc_fmt="fp16", step_fmt=None, rounding="nearest_even",
                          name=m.name + "+fp16acc")
        elif m.fmt == "int8":
            pass  # int8 always accumulates exactly in int32
        else:
            raise ValueError(f"model {m.name}: acc_fmt must be 'fp32'"
                             + (" or 'fp16'" if m.fmt in ("fp16", "fp8_e4m3", "fp8_e5m2") else "")
                             + f", not {acc_fmt!r}")
    return m


# ---------------------------------------------------------------------------------------------
def _exponents(v, fmt: Format):
    """max(floor(log2|v|), emin) for nonzero finite v (int64), 0 elsewhere."""
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.where(np.isfinite(v), v, 0.0))
    return np.maximum(e.astype(np.int64) - 1, fmt.emin)


# The aligned terms as integers: a term times 2**(F - e_max) is below 2**(F + 2) <= 2**42 in
# magnitude (F <= 40), so a 53-bit integer format holds every one and never saturates.
_ALIGNED = Format("aligned", kind="int", bits=53)


def _align(v, scale):
    """Step 3: ``v * 2**scale`` truncated toward zero to an integer, by the one rounding routine.

    The scaling is exact wherever the result can be nonzero (it only underflows for
    terms far below one unit, which truncate to 0 either way)."""
    y = np.ldexp(v, scale)
    return round_values(y, _ALIGNED, "toward_zero", "saturate", out=y)


def _step(P, EP, c, model: TensorCoreModel, cfmt: Format, ofmt: Format):
    """One fused step over the last axis of the products P (exponents EP) with accumulator c."""
    F = model.F
    floor = model.zero_exponent
    with np.errstate(invalid="ignore", over="ignore"):
        total = P.sum(-1) + c  # NaN / Inf detection (finite terms cannot overflow float64)
    special = ~np.isfinite(total)
    fin_p = np.isfinite(P)
    nzp = (P != 0) & fin_p
    ec = np.where((c != 0) & np.isfinite(c), _exponents(c, cfmt), floor)
    e_max = np.maximum(np.where(nzp, EP, floor).max(-1), ec)
    scale = (F - e_max).astype(np.int64)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        y = _align(np.where(fin_p, P, 0.0), scale[..., None])
        yc = _align(np.where(np.isfinite(c), c, 0.0), scale)
        S = y.sum(-1) + yc  # integers below 2**(F+8): exact
        val = np.ldexp(S, -scale)
    mode = model.rounding
    r = round_values(val, ofmt, mode, "inf" if ofmt.inf else "saturate")
    if model.overflow == "inf":
        big = np.abs(val) >= 2.0 ** (ofmt.emax + 1)
        if big.any():
            r = np.where(big, np.copysign(np.inf, val), r)
    else:
        r = np.clip(r, -ofmt.max, ofmt.max)
    r = np.where(S == 0, 0.0, r)  # exact zero: +0
    return np.where(special, np.where(np.isnan(total), np.nan, total), r)


def fused_dot(P, EP, model: TensorCoreModel, c=None):
    """Chain fused steps over the last axis of exact products P with exponents EP.

    P, EP: arrays (..., K).  c: initial accumulator (default +0).  Returns the
    accumulator values (float64, in the model's step format)."""
    cfmt = get_format(model.acc_fmt)
    ofmt = model.output_format
    K = P.shape[-1]
    acc = np.zeros(P.shape[:-1]) if c is None else np.broadcast_to(np.asarray(c, np.float64),
                                                                     P.shape[:-1]).copy()
    for k0 in range(0, max(K, 1), model.L):
        if K == 0:
            break
        acc = _step(P[..., k0:k0 + model.L], EP[..., k0:k0 + model.L], acc, model, cfmt, ofmt)
        cfmt = ofmt
    return acc


def _cast_inputs(a, b, fmt, model, rounding, overflow, ftz, daz, rng):
    from .cast import cast
    fmt = get_format(fmt)
    in_fmt = get_format(model.fmt)
    if model.fmt == "tf32":
        opts = dict(overflow=overflow, ftz=ftz, daz=daz, rng=rng)
        x = cast(cast(a, "fp32", rounding, **opts, dtype=np.float64), "tf32",
                 TF32_OPERANDS[model.tf32_operands], dtype=np.float64)
        y = cast(cast(b, "fp32", rounding, **opts, dtype=np.float64), "tf32",
                 TF32_OPERANDS[model.tf32_operands], dtype=np.float64)
    else:
        x = cast(a, in_fmt, rounding, overflow, ftz, daz, rng, dtype=np.float64)
        y = cast(b, in_fmt, rounding, overflow, ftz, daz, rng, dtype=np.float64)
    return np.asarray(x, np.float64), np.asarray(y, np.float64), in_fmt


def _int_dot(x, y, kind):
    xi, yi = x.astype(np.int64), y.astype(np.int64)
    r = (xi * yi).sum(-1) if kind == "dot" else np.matmul(xi, yi)
    r = (r + 2 ** 31) % 2 ** 32 - 2 ** 31  # int32 wrap-around
    return r.astype(np.float64)


_ROWS_ELEMS = 1 << 21


def tensorcore_product(kind, a, b, fmt, model, acc_fmt="fp32", *, rounding="nearest_even",
                       overflow=None, ftz=False, daz=False, rng=None):
    """``dot`` (kind "dot": last axes, leading axes broadcast) or ``matmul`` of a and b
    through the tensor-core ``model``.  Returns (values, accumulator format name)."""
    m = get_model(model, fmt, acc_fmt)
    x, y, in_fmt = _cast_inputs(a, b, fmt, m, rounding, overflow, ftz, daz, rng)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"{kind} needs arrays, not scalars")
    if m.fmt == "int8":
        if kind == "matmul":
            return _int_dot(x, y, kind), "fp32"
        return _int_dot(*np.broadcast_arrays(x, y), kind), "fp32"
    ex, ey = _exponents(x, in_fmt), _exponents(y, in_fmt)
    if kind == "dot":
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"dot: last axes differ ({x.shape[-1]} and {y.shape[-1]})")
        with np.errstate(invalid="ignore", over="ignore"):
            P = x * y
        EP = ex + ey
        r = fused_dot(P, np.broadcast_to(EP, P.shape), m)
        return r, m.acc_fmt
    x1, y1 = x.ndim == 1, y.ndim == 1
    if x1:
        x, ex = x[None, :], ex[None, :]
    if y1:
        y, ey = y[:, None], ey[:, None]
    if x.shape[-1] != y.shape[-2]:
        raise ValueError(f"matmul: shapes {x.shape} and {y.shape} do not align")
    out_shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    yt, eyt = np.swapaxes(y, -1, -2), np.swapaxes(ey, -1, -2)  # (..., N, K)
    K = x.shape[-1]
    out = np.empty(out_shape)
    rows = out_shape[-2]
    per_row = max(1, int(np.prod(out_shape[:-2], dtype=np.int64)) * out_shape[-1] * min(K, m.L))
    step = max(1, _ROWS_ELEMS // per_row)
    for r0 in range(0, rows, step):
        xs, exs = x[..., r0:r0 + step, None, :], ex[..., r0:r0 + step, None, :]
        acc = np.zeros(np.broadcast_shapes(xs.shape[:-1], yt[..., None, :, :].shape[:-1]))
        cfmt, ofmt = get_format(m.acc_fmt), m.output_format
        for k0 in range(0, K, m.L):
            sl = slice(k0, k0 + m.L)
            with np.errstate(invalid="ignore", over="ignore"):
                P = xs[..., sl] * yt[..., None, :, sl]
            EP = exs[..., sl] + eyt[..., None, :, sl]
            acc = _step(P, EP, acc, m, cfmt, ofmt)
            cfmt = ofmt
        out[..., r0:r0 + step, :] = acc
    if x1:
        out = out[..., 0, :]
    if y1:
        out = out[..., 0]
    return out, m.acc_fmt
