"""``TensorCoreModel``: one matrix unit for one input format, as data.

Its fields are the parameters of the fused step (F, L, the step and accumulator
formats, where c enters, the AMD and block-scaled variants); ``presets`` holds the
records of real GPUs, ``tfdpa`` and ``fdpa`` the steps that read them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import cpuunits, fdpa
from ...core.formats import Format, get_format

__all__ = ['TF32_OPERANDS', 'C_ENTRIES', 'TensorCoreModel']

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
        ``"gtr_fdpa"`` (AMD CDNA1-3), ``"st_fdpa"``, ``"gst_fdpa"`` (Blackwell block-scaled);
        ``"amx_bf16"``, ``"vdpbf16"`` (Intel AMX / AVX512-BF16: ``floatfmt.arith.matrixunit.cpuunits``).
    F2, interleave, group_rounding, combine_rounding, c_cutoff, product_overflow, ftz :
        parameters of the AMD steps (see ``floatfmt.arith.matrixunit.fdpa``).
    daz : the unit reads subnormal operands (and accumulator inputs) as zeros of their
        sign (Intel's DAZ; the CPU presets of ``floatfmt.arith.matrixunit.cpuunits``).
    block_fmt, scale_fmt, scale_block, group : block-scaled models: the block format
        (``"mxfp8_e4m3"``, ``"nvfp4"``), the scales' format (``"e8m0"`` or ``"fp8_e4m3"``
        read as ue4m3), products per scale, products summed exactly before scaling (GST).

    >>> from floatfmt.arith.matrixunit.presets import tensorcore_models
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
    daz: bool = False

    def __post_init__(self):
        if not isinstance(self.L, int) or self.L < 1:
            raise ValueError(f"L must be a positive integer, not {self.L!r}")
        algorithms = {**fdpa.ALGORITHMS, **cpuunits.ALGORITHMS}
        if self.algorithm not in algorithms:
            raise ValueError(f"algorithm must be one of {', '.join(algorithms)}, "
                             f"not {self.algorithm!r}")
        uses_f = self.algorithm not in ("e_fdpa", "ftz_addmul", *cpuunits.ALGORITHMS)
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
