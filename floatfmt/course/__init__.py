"""Exercises for the lessons: checkers, per-student variants, and the public
way for a teacher to add an exercise.

``check(exercise_id, answer)`` computes the right answer with floatfmt on the
spot (never a stored constant), prints ``PASS`` or ``FAIL`` with a hint that
does not give the answer away, and returns a ``CheckResult`` (truthy when
passed).  ``check(exercise_id, answer, student="s123")`` checks the variant of
that student: ``variant(exercise_id, "s123")`` derives the exercise's
parameters from a hash of the student id, so the lesson's worked example or a
classmate's answer is the answer to a different question.

A teacher defines a new exercise with :class:`Exercise` and :func:`register`
(no private table to edit); see ``docs/course.md`` for a worked example.

    >>> check("fp16-overflow-threshold", 65520, quiet=True).passed
    True
    >>> bool(check("bf16-consecutive-integers", 255, quiet=True))
    False
    >>> exercises()[:2]
    ['fp16-one-plus-x', 'bf16-consecutive-integers']
"""

from __future__ import annotations

__all__ = ["check", "exercises", "exercise", "variant", "register", "Exercise", "Wrong",
           "CheckResult", "task", "gradient_sample", "activation_sample", "grad_max_per_step", "mx_block",
           "probe_vectors", "sr_values", "zp_data", "mx_outlier_block", "amax_history", "layer_data"]

from .registry import CheckResult, Exercise, Wrong, check, exercise, exercises, register, variant
# importing _builtin and _more registers the built-in exercises (assignments 1-11, 12-17)
from ._builtin import activation_sample, grad_max_per_step, gradient_sample, mx_block
from ._more import amax_history, layer_data, mx_outlier_block, probe_vectors, sr_values, zp_data
from .tasks import task
