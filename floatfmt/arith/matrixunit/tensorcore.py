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

A ``TensorCoreModel`` holds those parameters as data, so a new GPU is a new
record.  ``tensorcore_models()`` lists the presets (``"h100/bf16"`` ...);
``ff.matmul(a, b, "bf16", model="h100")`` picks the one for the format.

>>> import floatfmt as ff
>>> a, b = [1.0, 1.0, 1.0, 1.0], [2.0, 2.0**-23 + 2.0**-24, 0.0, 0.0]
>>> ff.dot(a, b, "fp16", model="a100"), ff.dot(a, b, "fp16")   # RZ vs a rounded fp32 sum
(2.0, 2.000000238418579)
"""

# size: the matrix-unit model is one rule (align, truncate, sum, round per block of L products):
# the presets, the reference steps and the fast kernel that must equal them bit for bit
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import eft
from . import fdpa
from ...core.block_formats import get_block_format, is_block_format
from ...backend.dispatch import tensor_entry
from ...core.formats import Format, FormatLike, get_format
from ...core.names import unknown_name
from ...core.types import Values
from ...core.rounding import STOCHASTIC, make_rng, resolve_mode, round_values
from ...core.threads import limit_threads, run_parts

__all__ = ["TensorCoreModel", "tensorcore_models", "get_model", "tensorcore_product",
           "fused_dot", "mma", "block_scaled_mma", "get_block_model", "TF32_OPERANDS",
           "C_ENTRIES", "matmul_shapes", "mma_shapes", "check_int_operands"]

TF32_OPERANDS = {"truncate": "toward_zero", "rne": "nearest_even", "rna": "nearest_away"}
C_ENTRIES = ("aligned", "after")


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
    c_entry : where the accumulator input c enters a step: ``"aligned"`` (a term of the
        fused sum: it takes part in e_max and is truncated like the products) or
        ``"after"`` (the products are fused and rounded without c, then c is added by
        one round-to-nearest-even addition in the step format).
    description : free text (GPUs, sources, evidence).
    algorithm : MMA-Sim's name of the step (``floatfmt.arith.matrixunit.fdpa.ALGORITHMS``): ``"t_fdpa"``
        (NVIDIA, the rule above), ``"e_fdpa"``, ``"ftz_addmul"``, ``"tr_fdpa"``,
        ``"gtr_fdpa"`` (AMD CDNA1-3), ``"st_fdpa"``, ``"gst_fdpa"`` (Blackwell block-scaled).
    F2, interleave, group_rounding, combine_rounding, c_cutoff, product_overflow, ftz :
        parameters of the AMD steps (see ``floatfmt.arith.matrixunit.fdpa``).
    block_fmt, scale_fmt, scale_block, group : block-scaled models: the block format
        (``"mxfp8_e4m3"``, ``"nvfp4"``), the scales' format (``"e8m0"`` or ``"fp8_e4m3"``
        read as ue4m3), products per scale, products summed exactly before scaling (GST).

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
    c_entry: str = "aligned"
    description: str = ""
    algorithm: str = "t_fdpa"
    F2: int = 0
    interleave: int = 1
    group_rounding: str = "floor"
    combine_rounding: str = "floor"
    c_cutoff: int | None = None
    product_overflow: bool = False
    ftz: bool = False
    block_fmt: str | None = None
    scale_fmt: str | None = None
    scale_block: int = 0
    group: int = 1

    def __post_init__(self):
        if not isinstance(self.L, int) or self.L < 1:
            raise ValueError(f"L must be a positive integer, not {self.L!r}")
        if self.algorithm not in fdpa.ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(fdpa.ALGORITHMS)}, "
                             f"not {self.algorithm!r}")
        uses_f = self.algorithm not in ("e_fdpa", "ftz_addmul")
        if self.fmt != "int8" and uses_f and (not isinstance(self.F, int)
                                              or not 1 <= self.F <= 40):
            raise ValueError(f"F must be an integer in 1..40, not {self.F!r}")
        self._check_extra()
        if self.acc_fmt not in ("fp32", "fp16"):
            raise ValueError(f"acc_fmt must be 'fp32' or 'fp16', not {self.acc_fmt!r}")
        if self.tf32_operands not in TF32_OPERANDS:
            raise ValueError(f"tf32_operands must be one of {', '.join(TF32_OPERANDS)}, "
                             f"not {self.tf32_operands!r}")
        if self.overflow not in ("inf", "saturate"):
            raise ValueError(f"overflow must be 'inf' or 'saturate', not {self.overflow!r}")
        if self.c_entry not in C_ENTRIES:
            raise ValueError(f"c_entry must be one of {', '.join(C_ENTRIES)}, "
                             f"not {self.c_entry!r}")
        get_format(self.fmt)
        get_format(self.step_fmt or self.acc_fmt)

    def _check_extra(self):
        """Validate the fields of the AMD and block-scaled steps."""
        for what in ("group_rounding", "combine_rounding"):
            if getattr(self, what) not in fdpa.STEP_ROUNDINGS:
                raise ValueError(f"{what} must be one of {', '.join(fdpa.STEP_ROUNDINGS)}, "
                                 f"not {getattr(self, what)!r}")
        if self.algorithm in ("tr_fdpa", "gtr_fdpa") and not self.F <= self.F2 <= 40:
            raise ValueError(f"F2 must be an integer in F..40, not {self.F2!r}")
        if not isinstance(self.interleave, int) or self.interleave < 1:
            raise ValueError(f"interleave must be a positive integer, not {self.interleave!r}")
        if self.c_cutoff is not None and (not isinstance(self.c_cutoff, int) or self.c_cutoff < 0):
            raise ValueError(f"c_cutoff must be None or a non-negative integer, not {self.c_cutoff!r}")
        scaled = self.algorithm in ("st_fdpa", "gst_fdpa")
        if scaled != (self.scale_fmt is not None):
            raise ValueError("scale_fmt is required by st_fdpa / gst_fdpa and only by them")
        if scaled:
            get_format(self.scale_fmt)
            g = self.group
            if not (isinstance(g, int) and g >= 1 and self.L % g == 0
                    and isinstance(self.scale_block, int) and self.scale_block % g == 0
                    and self.scale_block >= 1):
                raise ValueError(f"group ({g!r}) must divide L ({self.L}) and scale_block "
                                 f"({self.scale_block!r})")

    def replace(self, **changes) -> "TensorCoreModel":
        """A copy with some fields changed (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    @property
    def output_format(self) -> Format:
        return get_format(self.step_fmt or self.acc_fmt)


# Where c enters on B200 FP8 (c_entry="after"), and the evidence for it.  The B200 rows of
# the measured data of Khattak and Mikaitis (tests/data/hardware/, 5,000 single-instruction
# dot products d = a.b + c per input format, K = 32, c != 0 in every row) are reproduced
# bit for bit, all 10,000 rows of E4M3 and E5M2 to fp32, when the 32 products are fused and
# truncated with F = 25 *without* c, the sum truncated to fp32, and c then added by an
# ordinary fp32 round-to-nearest-even addition; with c aligned as one more term (the rule
# of every other preset) 1,793 E4M3 and 1,764 E5M2 rows differ by one unit in the last
# place.  Whether the unit or the measurement harness adds c that way is not known: the data
# cannot tell them apart (an fp32 epilogue d = acc + c rounds the same way).
_B200_FP8 = ("NVIDIA B200 (Blackwell); FP8: c added after the fused products with one fp32 "
             "round-to-nearest-even addition (c_entry='after'), the rule that reproduces "
             "every measured B200 FP8-to-fp32 row of Khattak & Mikaitis")

_GPUS: dict[str, tuple[str, dict[str, tuple]]] = {
    # gpu: (description, {input format group: (F, L, step_fmt[, c_entry[, description]])})
    "v100": ("NVIDIA V100 (Volta)", {"fp16": (23, 4, None)}),
    "t4": ("NVIDIA T4 (Turing)", {"fp16": (24, 8, None), "int8": (0, 16, None)}),
    "a100": ("NVIDIA A100 / A30 / A2 (Ampere)",
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
              "fp8_e4m3": (25, 32, None, "after", _B200_FP8),
              "fp8_e5m2": (25, 32, None, "after", _B200_FP8), "int8": (0, 32, None)}),
}
_GPU_ALIASES = {"h200": "h100", "h800": "h100", "a30": "a100", "a2": "a100", "l40s": "ada",
                "rtx40": "ada",
                "volta": "v100", "turing": "t4", "ampere": "a100", "hopper": "h100",
                "blackwell": "b200", "lovelace": "ada"}


def _build_presets() -> dict:
    out = {}
    for gpu, (desc, table) in _GPUS.items():
        for fmt, (F, L, step, *rest) in table.items():
            c_entry = rest[0] if rest else "aligned"
            out[f"{gpu}/{fmt}"] = TensorCoreModel(
                name=f"{gpu}/{fmt}", fmt=fmt, F=F, L=L, step_fmt=step, c_entry=c_entry,
                description=rest[1] if len(rest) > 1 else desc)
    # AMD CDNA1-3 and Blackwell block-scaled presets: their fields are data in floatfmt.arith.matrixunit.fdpa
    for gpu, (desc, fields) in fdpa.EXTRA_GPUS.items():
        for fmt, kw in fields.items():
            out[f"{gpu}/{fmt}"] = TensorCoreModel(name=f"{gpu}/{fmt}", fmt=fmt,
                                                  description=desc, **kw)
    for gpu, (desc, fields) in fdpa.BLOCK_GPUS.items():
        for bfmt, kw in fields.items():
            bf = get_block_format(bfmt)  # elements, scales and block size from the registry
            out[f"{gpu}/{bfmt}"] = TensorCoreModel(
                name=f"{gpu}/{bfmt}", fmt=bf.element, block_fmt=bfmt, scale_fmt=bf.scale,
                scale_block=bf.block_size, description=desc, **kw)
    return out


_PRESETS = _build_presets()
_ALL_GPUS = {*_GPUS, *fdpa.EXTRA_GPUS, *fdpa.BLOCK_GPUS}
_GPU_ALIASES.update(fdpa.EXTRA_ALIASES)


def tensorcore_models() -> dict:
    """Every preset model by name (``"gpu/format"``); h200 and h800 are the h100 models.

    >>> sorted(k for k in tensorcore_models() if k.startswith("h100"))
    ['h100/bf16', 'h100/fp16', 'h100/fp8_e4m3', 'h100/fp8_e5m2', 'h100/int8', 'h100/tf32']
    """
    return dict(_PRESETS)


def get_model(model, fmt, acc_fmt="fp32") -> TensorCoreModel:
    """Resolve ``model`` (a ``TensorCoreModel``, ``"h100"`` or ``"h100/bf16"``) for inputs
    of ``fmt`` and an accumulator ``acc_fmt`` (``"fp32"`` or ``"fp16"``)."""
    if isinstance(fmt, str) and is_block_format(fmt):
        raise ValueError(f"{fmt!r} is a block format: its scales are applied inside the "
                         "unit; call ff.block_scaled_matmul(a, b, fmt, model=...)")
    fmt = get_format(fmt)
    key_fmt = "tf32" if fmt.name in ("tf32", "fp32") else fmt.name
    if isinstance(model, TensorCoreModel):
        m = model
    elif isinstance(model, str):
        name = model.strip().lower()
        gpu, _, given_fmt = name.partition("/")
        gpu = _GPU_ALIASES.get(gpu, gpu)
        if gpu not in _ALL_GPUS:
            raise unknown_name("tensor-core model", model, [*sorted(_ALL_GPUS), *_GPU_ALIASES],
                               match=gpu, note=" (or a TensorCoreModel)")
        if given_fmt:
            key_fmt = given_fmt if f"{gpu}/{given_fmt}" in _PRESETS else \
                get_format(given_fmt).name
        key = f"{gpu}/{key_fmt}"
        if key not in _PRESETS:
            have = sorted(k.split("/")[1] for k in _PRESETS if k.startswith(gpu + "/"))
            raise ValueError(f"the {gpu} model has no {key_fmt} inputs; it supports "
                             f"{', '.join(have)}")
        m = _PRESETS[key]
    else:
        raise TypeError(f"model must be a preset name or a TensorCoreModel, not "
                        f"{type(model).__name__}")
    if m.block_fmt is not None:
        raise ValueError(f"model {m.name} is block-scaled ({m.block_fmt}): call "
                         "ff.block_scaled_matmul (or tensorcore.block_scaled_mma) with its "
                         "operands and scales")
    if m.fmt != key_fmt:
        raise ValueError(f"model {m.name} takes {m.fmt} inputs, not {fmt.name}")
    acc = get_format(acc_fmt).name if acc_fmt is not None else "fp32"
    if acc != m.acc_fmt:
        if acc == "fp16" and m.fmt in ("fp16", "fp8_e4m3", "fp8_e5m2") \
                and m.algorithm == "t_fdpa":
            m = m.replace(acc_fmt="fp16", step_fmt=None, rounding="nearest_even",
                          name=m.name + "+fp16acc")
        elif m.fmt == "int8":
            pass  # int8 always accumulates exactly in int32
        else:
            valid = [m.acc_fmt] + (["fp16"] if m.fmt in ("fp16", "fp8_e4m3", "fp8_e5m2")
                                   and m.algorithm == "t_fdpa" and m.acc_fmt != "fp16" else [])
            raise ValueError(f"model {m.name} accumulates in {m.acc_fmt}: acc_fmt must be "
                             + " or ".join(repr(v) for v in valid) + f", not {acc_fmt!r}")
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
    """One step over the last axis of the products P (exponents EP) with accumulator c
    (values of ``cfmt``), c entering where ``model.c_entry`` says.  Steps other than
    T-FDPA (AMD) are ``floatfmt.arith.matrixunit.fdpa.step``."""
    if model.algorithm in ("e_fdpa", "ftz_addmul", "tr_fdpa", "gtr_fdpa"):
        return fdpa.step(P, EP, c, model, cfmt, ofmt)
    if model.c_entry == "aligned":
        return _fused(P, EP, c, model, cfmt, ofmt)
    s = _fused(P, EP, np.zeros(np.shape(c)), model, cfmt, ofmt)  # the products alone
    t, cls = eft.exact_sum(s, c)  # then one addition, rounded to nearest-even
    policy = "inf" if model.overflow == "inf" and ofmt.inf else "saturate"
    return round_values(t, ofmt, "nearest_even", policy, sticky=cls)


def _fused(P, EP, c, model: TensorCoreModel, cfmt: Format, ofmt: Format):
    """Steps 2-5 of the module docstring: c is one term of the fused sum."""
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
    return _finish(S, val, special, total, model, ofmt)


def _finish(S, val, special, total, model: TensorCoreModel, ofmt: Format):
    """Step 5: the exact sum val (the integer sum S of the aligned terms times
    2**(e_max - F)) rounded once to the step format; +0 for an exact zero; ``total``
    (Inf or NaN) where ``special`` (None: nowhere)."""
    mode = model.rounding
    r = round_values(val, ofmt, mode, "inf" if ofmt.inf else "saturate")
    if model.overflow == "inf":
        big = np.abs(val) >= 2.0 ** (ofmt.emax + 1)
        if big.any():
            r = np.where(big, np.copysign(np.inf, val), r)
    else:
        r = np.clip(r, -ofmt.max, ofmt.max)
    r = np.where(S == 0, 0.0, r)  # exact zero: +0
    if special is None:
        return r
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
    if model.ftz:
        acc = fdpa.flush_to_plus_zero(acc, cfmt)
    for k0 in range(0, max(K, 1), model.L):
        if K == 0:
            break
        acc = _step(P[..., k0:k0 + model.L], EP[..., k0:k0 + model.L], acc, model, cfmt, ofmt)
        cfmt = ofmt
    return acc


def _cast_inputs(a, b, fmt, model, rounding, overflow, ftz, daz, rng, sr_bits=None):
    """a, then b, cast to the model's input format (tf32 models: to fp32 in ``rounding``,
    then to tf32 by the model's ``tf32_operands`` rule)."""
    from ...core.cast import cast
    fmt = get_format(fmt)
    in_fmt = get_format(model.fmt)
    opts = dict(overflow=overflow, ftz=ftz, daz=daz, rng=rng, sr_bits=sr_bits, dtype=np.float64)
    if model.fmt == "tf32":
        x = cast(cast(a, "fp32", rounding, **opts), "tf32",
                 TF32_OPERANDS[model.tf32_operands], dtype=np.float64)
        y = cast(cast(b, "fp32", rounding, **opts), "tf32",
                 TF32_OPERANDS[model.tf32_operands], dtype=np.float64)
    else:
        x = cast(a, in_fmt, rounding, **opts)
        y = cast(b, in_fmt, rounding, **opts)
    if model.ftz:  # the unit flushes subnormal inputs to +0 (CDNA2)
        x, y = fdpa.flush_to_plus_zero(x, in_fmt), fdpa.flush_to_plus_zero(y, in_fmt)
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if in_fmt.kind == "int":
        check_int_operands(model, bool(np.isnan(x).any()), bool(np.isnan(y).any()))
    return x, y, in_fmt


def check_int_operands(model: TensorCoreModel, nan_a: bool, nan_b: bool) -> None:
    """Refuse NaN operands of an integer-input unit (``*/int8`` presets, or any model
    whose input format is an integer format): ValueError when the cast operand ``a``
    (``nan_a``) or ``b`` (``nan_b``) holds a NaN.  An integer format has no code for
    NaN (``ff.encode(nan, "int8")`` refuses it too), so the unit cannot be given one;
    without this check a NaN would become some integer, a different one per path.
    +-Inf is no error: the operands' cast saturates it to the format's extremes (what
    ``ff.cast(inf, "int8")`` gives under every overflow policy it accepts).  The host
    (``tensorcore``) and device (``tensorcore_device``) paths both call this, so the
    error is the same on both.

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


def _int_dot(x, y, kind):
    xi, yi = x.astype(np.int64), y.astype(np.int64)
    r = (xi * yi).sum(-1) if kind == "dot" else np.matmul(xi, yi)
    r = (r + 2 ** 31) % 2 ** 32 - 2 ** 31  # int32 wrap-around
    return r.astype(np.float64)


_ROWS_ELEMS = 1 << 21


def _chain_matmul(x, ex, y, ey, m: TensorCoreModel, c=None, fmt=None):
    """``x @ y`` (values with exponents ex, ey; at least 2-D) through the model's steps in
    K order, starting from the accumulator c (values of ``m.acc_fmt``, broadcast to the
    output shape; None: +0).  Works on a few output rows at a time to bound memory."""
    out_shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    if fmt is not None and _fast_ok(x, y, m):
        return _chain_matmul_fast(x, y, fmt, m, c, out_shape)
    yt, eyt = np.swapaxes(y, -1, -2), np.swapaxes(ey, -1, -2)  # (..., N, K)
    K = x.shape[-1]
    c = np.zeros(out_shape) if c is None else np.broadcast_to(c, out_shape)
    out = np.empty(out_shape)
    rows = out_shape[-2]
    per_row = max(1, int(np.prod(out_shape[:-2], dtype=np.int64)) * out_shape[-1] * min(K, m.L))
    step = max(1, _ROWS_ELEMS // per_row)
    def tile(t):  # a few output rows (tiles run on threads: floatfmt.core.threads)
        r0 = t * step
        xs, exs = x[..., r0:r0 + step, None, :], ex[..., r0:r0 + step, None, :]
        acc = np.array(c[..., r0:r0 + step, :], np.float64)
        cfmt, ofmt = get_format(m.acc_fmt), m.output_format
        for k0 in range(0, K, m.L):
            sl = slice(k0, k0 + m.L)
            with np.errstate(invalid="ignore", over="ignore"):
                P = xs[..., sl] * yt[..., None, :, sl]
            EP = exs[..., sl] + eyt[..., None, :, sl]
            acc = _step(P, EP, acc, m, cfmt, ofmt)
            cfmt = ofmt
        out[..., r0:r0 + step, :] = acc

    with limit_threads(1):  # 2 threads measured slower here (h100 256^3: 94 -> 128 ms)
        run_parts(-(-rows // step), tile)
    return out


# Products held at once by the fast kernel (one step of L products for a tile of outputs):
# small enough that its three buffers stay in a core's cache.
_TILE_TERMS = 1 << 16
_ZERO_EXP = -16000  # int16 exponent of a zero input: its products never set e_max


def _fast_ok(x, y, m: TensorCoreModel) -> bool:
    """Whether ``_chain_matmul_fast`` applies: finite inputs, and a zero-term floor that
    only matters when c is zero (it is at most the accumulator's and the step format's
    smallest normal exponent, as in every preset), within int16 reach."""
    floor = m.zero_exponent
    if m.algorithm != "t_fdpa":  # the AMD steps run on the generic path
        return False
    if m.c_entry == "aligned" and floor > min(get_format(m.acc_fmt).emin,
                                              m.output_format.emin):
        return False
    if not -900 <= floor <= 900:  # 2**(F - e_max) stays a normal double
        return False
    return bool(np.isfinite(x).all() and np.isfinite(y).all())


def _pow2(k):
    """2.0**k for int64 k in -1022..1023, from the exponent bits."""
    return ((k + 1023) << 52).view(np.float64)


def _exponents_bits(v, fmt: Format):
    """``_exponents`` of finite values that are normal doubles (or zero), from the
    exponent bits: max(floor(log2|v|), emin)."""
    e = (v.view(np.int64) >> 52) & 0x7FF
    return np.maximum(e - 1023, fmt.emin)


def _exponents16(v, fmt: Format, k_axis):
    """The exponents of ``_exponents`` as int16 with ``_ZERO_EXP`` for zeros, the K axis
    moved to the front (contiguous)."""
    e = np.where(v != 0, _exponents(v, fmt), _ZERO_EXP).astype(np.int16)
    return np.ascontiguousarray(np.moveaxis(e, k_axis, 0))


# size: one kernel: buffers, per-block alignment and the accumulator chain share the
# tile's state; the tiles run on threads
def _chain_matmul_fast(x, y, in_fmt: Format, m: TensorCoreModel, c, out_shape):
    """``_chain_matmul`` for finite inputs (see ``_fast_ok``), bit for bit the same steps.

    Per tile of output rows and block of L products along K: the L products and their
    exponents e_a + e_b are formed in buffers of L x tile (int16 exponents), e_max is
    one maximum over the block, and the unit of the alignment is q = 2**(e_max - F).
    A product whose last bit (at least 2**(e_a + e_b - 2 mbits)) is not below q is a
    multiple of q already; only the others are scaled to units by 2**(F - e_max),
    truncated toward zero by ``round_values`` and scaled back (all exact).  Every term
    is then a multiple of q below 2**(F + 2) q, so their float64 sum is exact.  Products
    of finite inputs are finite, so only the accumulator can carry Inf or NaN."""
    if out_shape[-1] < out_shape[-2] and out_shape[-1] < 64:
        # few columns: work on the transpose (the model is symmetric in a and b), so that
        # numpy's inner loops run along the long axis
        ct = None if c is None else np.swapaxes(np.broadcast_to(c, out_shape), -1, -2)
        tshape = out_shape[:-2] + (out_shape[-1], out_shape[-2])
        return np.swapaxes(_chain_matmul_fast(np.swapaxes(y, -1, -2), np.swapaxes(x, -1, -2),
                                              in_fmt, m, ct, tshape), -1, -2)
    nb = len(out_shape) - 2
    x = x.reshape((1,) * (nb - (x.ndim - 2)) + x.shape)
    y = y.reshape((1,) * (nb - (y.ndim - 2)) + y.shape)
    K = x.shape[-1]
    xK = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # (K, ..., M)
    yK = np.ascontiguousarray(np.moveaxis(y, -2, 0))  # (K, ..., N)
    exK, eyK = _exponents16(x, in_fmt, -1), _exponents16(y, in_fmt, -2)
    F, L, floor = m.F, m.L, m.zero_exponent
    thr = F - 2 * in_fmt.mbits
    batch, rows, cols = out_shape[:-2], out_shape[-2], out_shape[-1]
    per_row = max(1, int(np.prod(batch, dtype=np.int64)) * cols)
    step = max(1, _TILE_TERMS // (per_row * min(L, max(K, 1))))
    out = np.empty(out_shape)
    c = np.zeros(out_shape) if c is None else np.broadcast_to(c, out_shape)
    acc_fmt, ofmt = get_format(m.acc_fmt), m.output_format
    after = m.c_entry == "after"
    policy = "inf" if m.overflow == "inf" and ofmt.inf else "saturate"

    def tile(ti):  # one tile of output rows (tiles run on threads: floatfmt.core.threads)
        r0 = ti * step
        r1 = min(rows, r0 + step)
        tshape = batch + (r1 - r0, cols)
        nl = min(L, K)
        E = np.empty((nl,) + tshape, np.int16)
        P = np.empty((nl,) + tshape)
        D = np.empty((nl,) + tshape, np.int16)
        acc = np.array(c[..., r0:r1, :], np.float64)
        cfmt = acc_fmt
        for k0 in range(0, K, L):
            k1 = min(K, k0 + L)
            e, p, d = E[:k1 - k0], P[:k1 - k0], D
            np.add(exK[k0:k1, ..., r0:r1, None], eyK[k0:k1, ..., None, :], out=e)
            with np.errstate(under="ignore"):
                np.multiply(xK[k0:k1, ..., r0:r1, None], yK[k0:k1, ..., None, :], out=p)
            em = np.maximum.reduce(e, axis=0).astype(np.int64)
            if after:
                cv = None
                e_max = np.maximum(em, floor)
            else:
                fin = np.isfinite(acc)
                cv = np.where(fin, acc, 0.0)
                e_max = np.maximum(em, np.where(cv != 0, _exponents_bits(cv, cfmt), floor))
            scale = F - e_max
            # d = e_max - e_a - e_b - (F - 2 mbits) - 1: where it is negative the product
            # is a multiple of the unit q = 2**(e_max - F) already (its last bit is at
            # least 2**(e_a + e_b - 2 mbits)), and zero products have d >= 8000; only
            # the others are truncated, scaled to units by 2**scale and back (exact).
            np.subtract((e_max - (thr + 1)).astype(np.int16), e, out=d[:k1 - k0])
            need = np.flatnonzero(d[:k1 - k0].view(np.uint16) < 8000)
            if need.size:
                pf, at = p.reshape(-1), need % scale.size
                sf = scale.reshape(-1)[at]
                with np.errstate(under="ignore"):
                    y = pf[need] * _pow2(sf)
                pf[need] = round_values(y, _ALIGNED, "toward_zero", "saturate", out=y) \
                    * _pow2(-sf)
            # every term is now a multiple of q below 2**(F + 2) q: the float64 sum of up
            # to 33 of them is exact in any order
            val = np.add.reduce(p, axis=0)
            if after:
                s = _finish(val, val, None, None, m, ofmt)
                t, cls = eft.exact_sum(s, acc)
                acc = round_values(t, ofmt, "nearest_even", policy, sticky=cls)
            else:
                yc = cv * _pow2(scale)  # exact: |c| < 2**(e_max + 1)
                val += round_values(yc, _ALIGNED, "toward_zero", "saturate", out=yc) \
                    * _pow2(-scale)
                acc = _finish(val, val, ~fin, acc, m, ofmt)
            cfmt = ofmt
        out[..., r0:r1, :] = acc

    with limit_threads(1):  # 2 threads measured slower here (h100 256^3: 94 -> 128 ms)
        run_parts(-(-rows // step), tile)
    return out


def tensorcore_product(kind, a, b, fmt, model, acc_fmt="fp32", *, rounding="nearest_even",
                       overflow=None, ftz=False, daz=False, rng=None, sr_bits=None):
    """``dot`` (kind "dot": last axes, leading axes broadcast) or ``matmul`` of a and b
    through the tensor-core ``model``.  Returns (values, accumulator format name).

    The operands' casts to the model's input format take ``rounding`` (stochastic
    included: a and then b draw from the one generator ``make_rng(rng)``, with
    ``sr_bits``); the unit's own steps are deterministic."""
    m = get_model(model, fmt, acc_fmt)
    if resolve_mode(rounding) in STOCHASTIC:
        rng = make_rng(rng)  # one stream for both operands (an int seed is not reused)
    x, y, in_fmt = _cast_inputs(a, b, fmt, m, rounding, overflow, ftz, daz, rng, sr_bits)
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
    _, res_shape = matmul_shapes(x.shape, y.shape)
    if x.ndim == 1:
        x, ex = x[None, :], ex[None, :]
    if y.ndim == 1:
        y, ey = y[:, None], ey[:, None]
    return _chain_matmul(x, ex, y, ey, m, fmt=in_fmt).reshape(res_shape), m.acc_fmt


def matmul_shapes(xshape: tuple, yshape: tuple, kind: str = "matmul") -> tuple[tuple, tuple]:
    """The shapes of ``x @ y`` by numpy's rules, for the host and the device kernels
    (``floatfmt.arith.matrixunit.tensorcore_device``) alike: (the product's shape with a 1-D x read as
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


@tensor_entry('mma', ('a', 'b', 'c'), device_impl="floatfmt.arith.matrixunit.tensorcore_device:device_mma")
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
    x, y, in_fmt = _cast_inputs(a, b, fmt, m, "nearest_even", None, False, False, None)
    out_shape = mma_shapes(x.shape, y.shape)
    cv = _accumulator_input(c, m, out_shape)
    if m.fmt == "int8":
        r = np.matmul(x.astype(np.int64), y.astype(np.int64)) + cv.astype(np.int64)
        return ((r + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.float64)
    return _chain_matmul(x, _exponents(x, in_fmt), y, _exponents(y, in_fmt), m, cv, in_fmt)


def _accumulator_input(c, m: TensorCoreModel, out_shape):
    """c as values of the model's accumulator, broadcast to out_shape (checked)."""
    from ...core.cast import cast
    if isinstance(c, (str, bytes)) or c is None:
        raise TypeError(f"mma: c must be a number or an array of numbers, not {type(c).__name__}")
    if m.fmt == "int8":
        cv = np.asarray(c, np.float64)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(cv) & (cv == np.round(cv)) & (np.abs(cv + 0.5) <= 2.0 ** 31)
        if not ok.all():
            raise ValueError("mma: an int8 model's c must hold integers in the int32 range")
    else:
        cv = np.asarray(cast(c, m.acc_fmt, dtype=np.float64), np.float64)
        if m.ftz:
            cv = fdpa.flush_to_plus_zero(cv, get_format(m.acc_fmt))
    try:
        fits = np.broadcast_shapes(cv.shape, out_shape) == tuple(out_shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"mma: c of shape {cv.shape} does not broadcast to the result shape "
                         f"{tuple(out_shape)}")
    return np.broadcast_to(cv, out_shape)


def get_block_model(model: "str | TensorCoreModel", block_fmt: str | None = None) -> TensorCoreModel:
    """A block-scaled model from a ``TensorCoreModel``, ``"b200/mxfp8_e4m3"``, or a GPU
    name (``"b200"``, ``"b200_mxf4nvf4"``) and the block format (``"mxfp8_e4m3"``,
    ``"mxfp8_e5m2"``, ``"mxfp6_e2m3"``, ``"mxfp6_e3m2"``, ``"mxfp4_e2m1"``, ``"nvfp4"``)."""
    if isinstance(model, TensorCoreModel):
        m = model
    elif isinstance(model, str):
        gpu, _, given = model.strip().lower().partition("/")
        gpu = _GPU_ALIASES.get(gpu, gpu)
        bname = given or (block_fmt or "").strip().lower()
        if is_block_format(bname):
            bname = get_block_format(bname).name
        key = f"{gpu}/{bname}"
        if key not in _PRESETS or _PRESETS[key].block_fmt is None:
            valid = sorted(k for k, v in _PRESETS.items() if v.block_fmt is not None)
            raise unknown_name("block-scaled model", key, valid, note=" (or a TensorCoreModel)")
        m = _PRESETS[key]
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


@tensor_entry('block_scaled_mma', ('a', 'a_scale', 'b', 'b_scale', 'c'),
              device_impl="floatfmt.arith.matrixunit.tensorcore_device:device_block_scaled_mma")
def block_scaled_mma(a: Values, a_scale: Values, b: Values, b_scale: Values, c: Values = 0.0,
                     model: "str | TensorCoreModel" = "b200",
                     block_fmt: str | None = None) -> Values:
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
    times |s_a|*|s_b|, has the exponent e(s_a) + e(s_b).  Those terms then go through
    T-FDPA steps (``L / group`` terms and c per step, F bits, RZ to fp32) in K order.
    Returns the float64 values of the fp32 result.  ``ff.block_scaled_matmul`` does
    the quantisation and NVFP4's per-tensor scale.

    >>> a, b = [[1.0, 2.0**-24]], [[1.0], [1.0]]          # e4m3 elements, k = 2
    >>> s1 = [[1.0]]                                      # ue8m0 scales 2**0
    >>> float(block_scaled_mma(a, s1, b, s1, 0.0, "b200", "mxfp8_e4m3")[0, 0])
    1.0
    """
    from ...core.cast import cast
    m = get_block_model(model, block_fmt)
    elem, sfmt = get_format(m.fmt), get_format(m.scale_fmt or "e8m0")
    x = np.asarray(cast(a, elem, dtype=np.float64), np.float64)
    y = np.asarray(cast(b, elem, dtype=np.float64), np.float64)
    sx, sy = np.asarray(a_scale, np.float64), np.asarray(b_scale, np.float64)
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise ValueError(f"block_scaled_mma: shapes {x.shape} and {y.shape} do not align "
                         "as (..., M, K) and (..., K, N)")
    nb = -(-x.shape[-1] // m.scale_block)
    if sx.shape != x.shape[:-1] + (nb,) or sy.shape != y.shape[:-2] + (nb, y.shape[-1]):
        raise ValueError(f"block_scaled_mma: scales of shapes {sx.shape} and {sy.shape}; "
                         f"{m.name} needs {x.shape[:-1] + (nb,)} and "
                         f"{y.shape[:-2] + (nb, y.shape[-1])} (one per {m.scale_block} along K)")
    out_shape = np.broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (x.shape[-2], y.shape[-1])
    cv = _accumulator_input(c, m, out_shape)
    T, ET = fdpa.scaled_terms(x, sx, y, sy, elem, sfmt, m.scale_block, m.group)
    return fused_dot(T, ET, m.replace(L=m.L // m.group, group=1), cv)  # terms per step
