"""The exercise registry: ``Exercise``, ``register``, per-student ``variant`` and ``check``.

The package ``floatfmt.course`` re-exports these names; the built-in exercises register
themselves from ``_builtin`` and ``_more``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..core.names import unknown_name

__all__ = ["check", "exercises", "exercise", "variant", "register", "Exercise", "Wrong",
           "CheckResult"]


class Wrong(Exception):
    """Raised by a checker for a wrong answer; its message is the hint shown."""


@dataclass
class CheckResult:
    """Outcome of ``check``: ``passed``, ``exercise``, the ``message`` shown and
    the ``points`` earned (the exercise's points when passed, else 0)."""

    passed: bool
    exercise: str
    message: str
    points: float = 0.0

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


@dataclass
class Exercise:
    """One exercise.

    ``checker(answer, **params)`` returns the PASS message, or raises
    :class:`Wrong` with a hint.  ``defaults`` are the parameters of the
    lesson's version; ``variant(rng)`` returns the parameters of one student's
    version from a ``numpy.random.Generator`` seeded by the student id (None:
    every student gets ``defaults``).  ``allowed`` maps a parameter name to the
    values the checker is right for; any other value is refused with a
    ValueError (a parameter not in ``allowed`` is passed through).  ``hints``
    are shown by ``hints(id)``; ``points`` is what ``grade`` awards.  For an
    exercise whose answer is a function, ``probe(params)`` returns the array of
    inputs the checker calls it on: the grader evaluates the function on them
    in the student's kernel and checks the recorded outputs in its own process.
    """

    id: str
    checker: Callable[..., str]
    title: str = ""
    points: float = 1.0
    defaults: dict = field(default_factory=dict)
    variant: Callable[[np.random.Generator], dict] | None = None
    allowed: dict = field(default_factory=dict)
    hints: tuple = ()
    probe: Callable[[dict], Any] | None = None

    def params_for(self, student=None, **overrides) -> dict:
        """The parameters of ``student``'s version (the defaults when None), with overrides."""
        p = dict(self.defaults)
        if student is not None and self.variant is not None:
            p.update(self.variant(_student_rng(self.id, student)))
        p.update(overrides)
        for k, v in p.items():
            ok = self.allowed.get(k)
            if ok is not None and v not in ok:
                raise ValueError(f"exercise {self.id!r}: {k}={v!r} is not supported; "
                                 f"valid: {', '.join(map(repr, ok))}")
        return p


_REGISTRY: dict[str, Exercise] = {}


def register(ex: Exercise, *, replace: bool = False) -> Exercise:
    """Make ``ex`` known to ``check``, ``variant`` and the grader.  An id already
    taken is a ValueError unless ``replace=True``."""
    if not isinstance(ex, Exercise):
        raise TypeError(f"register expects an Exercise, not {type(ex).__name__}")
    if ex.id in _REGISTRY and not replace:
        raise ValueError(f"exercise {ex.id!r} is already registered (pass replace=True to redefine it)")
    _REGISTRY[ex.id] = ex
    return ex


def _student_rng(exercise_id: str, student) -> np.random.Generator:
    """A generator seeded by a hash of (exercise id, student id): stable across
    runs and machines, different for every exercise."""
    if not isinstance(student, (str, int)) or isinstance(student, bool):
        raise TypeError(f"student id must be a str or int, not {type(student).__name__}")
    h = hashlib.sha256(f"floatfmt-course\0{exercise_id}\0{student}".encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def exercise(exercise_id: str) -> Exercise:
    """The registered :class:`Exercise` (ValueError naming close ids if unknown)."""
    if not isinstance(exercise_id, str):
        raise TypeError(f"exercise_id must be a string, not {type(exercise_id).__name__}")
    ex = _REGISTRY.get(exercise_id)
    if ex is None:
        raise unknown_name("exercise", exercise_id, _REGISTRY, listed_as="Known")
    return ex


def variant(exercise_id: str, student) -> dict:
    """The parameters of ``student``'s version of the exercise (a dict to pass on
    to the notebook's data functions and to ``check``)."""
    return exercise(exercise_id).params_for(student)


def exercises() -> list[str]:
    """Ids of every registered exercise."""
    return list(_REGISTRY)


def _is_missing(answer) -> bool:
    return answer is None or answer is Ellipsis


def check(exercise_id: str, answer, *, student=None, quiet: bool = False, **params) -> CheckResult:
    """Check ``answer`` for the exercise ``exercise_id``; print and return the result.

    ``student`` selects that student's variant (see ``variant``); ``params``
    override single parameters (for example ``fmt="bf16"``), and a value the
    checker is not right for is refused with a ValueError.  The right answer is
    always recomputed with floatfmt.  ``answer=None`` (or ``...``) reports that
    there is no answer yet, as a failed check.
    """
    ex = exercise(exercise_id)
    p = ex.params_for(student, **params)
    if _is_missing(answer):
        res = CheckResult(False, exercise_id, f"NO ANSWER [{exercise_id}]: set `answer` in the cell above "
                                              "and run this cell again.")
    else:
        try:
            res = CheckResult(True, exercise_id, f"PASS [{exercise_id}] {ex.checker(answer, **p)}", ex.points)
        except Wrong as hint:
            res = CheckResult(False, exercise_id, f"FAIL [{exercise_id}] {hint} Try again.")
    if not quiet:
        print(res.message)
    return res


