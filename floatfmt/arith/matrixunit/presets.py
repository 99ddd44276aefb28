"""The preset matrix units: NVIDIA's table on one screen, as data (AMD and
block-scaled rows: ``fdpa.EXTRA_GPUS`` / ``fdpa.BLOCK_GPUS``), ``tensorcore_models``
and ``get_model``.  A new GPU is a new row.
"""

from __future__ import annotations

from . import cpuunits, fdpa
from ...core.block_formats import get_block_format, is_block_format
from ...core.formats import get_format
from ...core.names import unknown_name

from .model import TensorCoreModel

__all__ = ['GPU_ALIASES', 'PRESETS', 'ALL_GPUS', 'tensorcore_models', 'get_model']


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
GPU_ALIASES = {"h200": "h100", "h800": "h100", "a30": "a100", "a2": "a100", "l40s": "ada",
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
    # AMD CDNA1-3, Blackwell block-scaled and Intel CPU presets: data in fdpa and cpuunits
    for gpu, (desc, fields) in {**fdpa.EXTRA_GPUS, **cpuunits.CPU_UNITS}.items():
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


PRESETS = _build_presets()
ALL_GPUS = {*_GPUS, *fdpa.EXTRA_GPUS, *fdpa.BLOCK_GPUS, *cpuunits.CPU_UNITS}
GPU_ALIASES.update(fdpa.EXTRA_ALIASES)
GPU_ALIASES.update(cpuunits.CPU_ALIASES)


def tensorcore_models() -> dict:
    """Every preset model by name (``"gpu/format"``); h200 and h800 are the h100 models.

    >>> sorted(k for k in tensorcore_models() if k.startswith("h100"))
    ['h100/bf16', 'h100/fp16', 'h100/fp8_e4m3', 'h100/fp8_e5m2', 'h100/int8', 'h100/tf32']
    """
    return dict(PRESETS)


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
        gpu = GPU_ALIASES.get(gpu, gpu)
        if gpu not in ALL_GPUS:
            raise unknown_name("tensor-core model", model, [*sorted(ALL_GPUS), *GPU_ALIASES],
                               match=gpu, note=" (or a TensorCoreModel)")
        if given_fmt:
            key_fmt = given_fmt if f"{gpu}/{given_fmt}" in PRESETS else \
                get_format(given_fmt).name
        key = f"{gpu}/{key_fmt}"
        if key not in PRESETS:
            have = sorted(k.split("/")[1] for k in PRESETS if k.startswith(gpu + "/"))
            raise ValueError(f"the {gpu} model has no {key_fmt} inputs; it supports "
                             f"{', '.join(have)}")
        m = PRESETS[key]
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
