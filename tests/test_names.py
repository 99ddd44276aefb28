"""Unknown names: every lookup raises through one helper (floatfmt.core.names.unknown_name),
so every message lists the valid names and suggests the closest one."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import floatfmt as ff
from floatfmt.core.names import close_matches, did_you_mean, unknown_name
from floatfmt.arith.accumulate import ORDERS
from floatfmt.course.registry import exercise, exercises
from floatfmt.core.rounding import _MODE_ALIASES, MODES, OVERFLOWS
from floatfmt.arith.matrixunit.tensorcore import get_model

PACKAGE = pathlib.Path(ff.__file__).resolve().parent


def _typo(name: str) -> str:
    """``name`` with its last letter doubled (tripled where doubling gives an accepted alias,
    as "stochasticc", P3109's StochasticC): close to it, not equal to any valid name."""
    wrong = name + name[-1]
    return wrong + name[-1] if wrong in _MODE_ALIASES else wrong


LOOKUPS = [
    ("rounding mode", MODES, lambda n: ff.cast(1.0, "bf16", rounding=n)),
    ("overflow policy", [o for o in OVERFLOWS if o != "wrap"], lambda n: ff.cast(1.0, "bf16", overflow=n)),
    ("order", ORDERS, lambda n: ff.sum([1.0], "fp16", order=n)),
    ("tensor-core model", ["h100", "a100", "b200"], lambda n: get_model(n, "bf16")),
    ("format", ["bf16", "fp16", "fp8_e4m3", "int8"], ff.get_format),
    ("exercise", None, exercise),
    ("granularity", ["tensor", "channel", "group", "block"],
     lambda n: ff.quantize(np.ones((4, 4)), "int8", granularity=n)),
]


@pytest.mark.parametrize("kind,names,call", LOOKUPS, ids=[k for k, _, _ in LOOKUPS])
def test_every_lookup_lists_the_valid_names_and_the_closest(kind, names, call):
    names = list(exercises()) if names is None else names
    for name in names:
        wrong = _typo(name)
        with pytest.raises(ValueError) as info:
            call(wrong)
        msg = str(info.value)
        # "unknown format 'x'." or, for a name that parses but is not valid, "format 'x': why."
        assert re.search(f"^(unknown )?{kind} {re.escape(repr(wrong))}[.:]", msg), msg
        assert re.search(r"Did you mean [^?]*" + re.escape(repr(name)), msg), msg
        assert re.search(r"(Valid|Known)[a-z ]*: ", msg), msg


def test_helper_rules():
    assert close_matches("  BF16 ", ["bf16", "fp16"]) == ["bf16", "fp16"]
    assert close_matches("xyz", ["bf16"]) == [] and did_you_mean("xyz", ["bf16"]) == ""
    e = unknown_name("thing", "abd", ["abc", "xyz"], also=["abdefgh"], n=1)
    assert str(e) == "unknown thing 'abd'. Did you mean 'abc'? Valid: abc, xyz."
    e = unknown_name("format", "e9m9", ["fp16"], reason="too wide.", listed_as="Valid formats")
    assert str(e).startswith("format 'e9m9': too wide.") and str(e).endswith("Valid formats: fp16.")


def test_no_module_writes_its_own_close_match_message():
    users = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
                   if "get_close_matches" in p.read_text() and p.relative_to(PACKAGE).as_posix() != "core/names.py")
    assert not users, f"use floatfmt.core.names.unknown_name (or close_matches) in: {users}"
