"""Each built-in exercise's task, written for one student's parameters.

``task(exercise_id, student)`` is the text an assignment's setup cell prints: the
question with that student's format, data and numbers in it, so no student reads a
question about a format (or a value) they do not get.  The notebook's markdown says
the same thing in terms of ``P`` (the parameters), never naming a format or a number
that only the lesson's version has.
"""

from __future__ import annotations

import math
import textwrap
from typing import Callable

from ..core.formats import get_format
from .registry import exercise

__all__ = ["task", "TASKS"]


def _max(fmt) -> str:
    return f"{get_format(fmt).max:.10g}"


def _emax(fmt) -> int:
    return math.frexp(get_format(fmt).max)[1] - 1


def _mx_elem(fmt) -> str:
    return fmt[2:]  # "mxfp8_e4m3" -> "fp8_e4m3"


TASKS: dict[str, Callable[[dict], str]] = {
    "fp16-one-plus-x": lambda p: (
        f"Find the smallest {p['fmt']} value x > 0 such that 1 + x, computed exactly and rounded once "
        f"to {p['fmt']} (nearest, ties to even), is not 1.0. Give x as a number or as its {p['fmt']} code."),
    "bf16-consecutive-integers": lambda p: (
        f"Find the largest N such that every integer 0, 1, 2, ..., N is exactly representable in "
        f"{p['fmt']}."),
    "fp16-overflow-threshold": lambda p: (
        f"{p['fmt']}'s largest finite value is {_max(p['fmt'])}. Find the smallest positive integer "
        f"that becomes +Inf when converted to {p['fmt']} with round-to-nearest-even."),
    "fp16-loss-scale": lambda p: (
        f"Your gradients g = course.gradient_sample(seed={p['seed']}, center={p['center']}) have "
        f"magnitudes around 10**{p['center']}. Choose a loss scale S such that, of g * S converted to "
        f"{p['fmt']}, at least 99.9% are not zero and none is Inf."),
    "bf16-rne-bits": lambda p: (
        "Write answer = a function from float32 bit patterns (uint32 array) to bf16 codes (uint16), "
        "round to nearest, ties to even, NaN stays NaN, with integer operations only (no float "
        f"arithmetic, no ff.cast / ml_dtypes / astype to a float type). It is checked on 100,000 inputs "
        f"(seed {p.get('seed', 11)})."),
    "e4m3-code": lambda p: (
        "Predict by hand the fp8_e4m3 codes of " + ", ".join(repr(v) for v in p["values_"])
        + " (round to nearest even, the format's own overflow: past the largest value it is NaN); "
          "a list of three codes."),
    "master-weights": lambda p: (
        f"A weight starts at 1.0 and receives {p['steps']} updates of +{p['update']!r}, each update "
        "rounded to the weight's format and every addition rounded to it. Give (w_fp16, w_fp32)."),
    "fp8-scale": lambda p: (
        f"x = course.activation_sample(seed={p['seed']}) * {p['gain']!r}. Find the largest power of two "
        f"S with max|x| * S <= {_max(p['fmt'])} (the largest {p['fmt']} value)."),
    "dynamic-loss-scale": lambda p: (
        f"gmax = course.grad_max_per_step(seed={p['seed']}, spikes={tuple(p['spikes'])}). Simulate "
        "dynamic loss scaling in fp16 from S = 2^16 (Inf: skip the step, halve S, reset the count; "
        "4 good steps in a row: double S, reset the count). Give (final S, skipped steps)."),
    "mx-scale-code": lambda p: (
        f"block = course.mx_block(seed={p['seed']}, top={p['top']!r}). Give the E8M0 scale code "
        f"(0..255) that {p['fmt']} stores for it: E = floor(log2 max|v|) - {_emax(_mx_elem(p['fmt']))} "
        f"({_emax(_mx_elem(p['fmt']))} is the largest exponent of its elements, "
        f"{_mx_elem(p['fmt'])}), code = E + 127."),
    "int8-codes": lambda p: (
        f"x = course.activation_sample(seed={p['seed']}). Quantise it to INT8, symmetric, per tensor "
        "(scale = fp32(amax / 127), code = round(x / scale), ties to even, clamped to -127..127) and "
        "give the codes of x[:8]."),
    "tensorcore-probe": lambda p: (
        f"On the model {p['model']}/{p['fmt']}, predict a @ b for a, b = course.probe_vectors(d, pos), "
        f"for each d in {tuple(p['ds'])}, with pos = "
        f"{'2 (all three products in one block)' if p['same_block'] else 'L (the -1 starts the next block)'}."),
    "sr-sum-moments": lambda p: (
        f"x = course.sr_values({p['seed']}); each value is rounded to {p['fmt']} stochastically and the "
        "results are added exactly. Give (E, Var) of the sum."),
    "int8-zero-point": lambda p: (
        f"x = course.zp_data({p['seed']}), quantised to uint8, asymmetric, per tensor. Give (z, code of "
        f"{p['probe']!r})."),
    "mx-outlier": lambda p: (
        f"block = course.mx_outlier_block({p['seed']}, {p['outlier']!r}), quantised to "
        f"{p.get('fmt', 'mxfp4_e2m1')}. Give (scale code, number of nonzero values that become 0)."),
    "fp8-delayed-scaling": lambda p: (
        f"amax = course.amax_history({p['seed']}), cast to {p.get('fmt', 'fp8_e4m3')} with "
        f"ff.DelayedScaling(history_len={p['history_len']}, algo={p['algo']!r}). Give (scale in force "
        "at the last step, number of steps at which some value saturated)."),
    "emulate-layer": lambda p: (
        f"x, W, b = course.layer_data({p['seed']}). Compute relu({p['fmt']}({p['fmt']}(x @ W) + "
        f"{p['fmt']}(b))) with x and W rounded to {p['fmt']} and the product accumulated in fp32, bit "
        "for bit (a 4 x 8 array)."),
}


def task(exercise_id: str, student=None, *, width: int = 96) -> str:
    """The task of ``exercise_id`` for ``student`` (the lesson's version when None),
    with that student's parameters written into it, wrapped to ``width`` columns.

    An exercise registered by a teacher may carry its own ``task`` (a function of the
    parameters returning the text); one without any gets a line naming its parameters.

    >>> print(task("fp16-one-plus-x"))   # doctest: +NORMALIZE_WHITESPACE
    Your task (fp16-one-plus-x): Find the smallest fp16 value x > 0 such that 1 + x, computed
    exactly and rounded once to fp16 (nearest, ties to even), is not 1.0. Give x as a number or as
    its fp16 code.
    """
    import inspect
    ex = exercise(exercise_id)
    p = {k: v.default for k, v in inspect.signature(ex.checker).parameters.items()
         if v.default is not inspect.Parameter.empty and k != "answer"}
    p.update(ex.params_for(student))
    fn = getattr(ex, "task", None) or TASKS.get(exercise_id)
    body = fn(p) if fn else f"answer {ex.title or exercise_id!r} for the parameters {p}."
    return textwrap.fill(f"Your task ({exercise_id}): {body}", width=width)
