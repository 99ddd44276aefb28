"""Every assignment's task is the student's own: the title and task text of the
notebook name no format that no student gets, and the setup cell prints the task
written out with that student's parameters (``floatfmt.course.task``)."""

import json
import re
from pathlib import Path

import pytest

import floatfmt as ff
from floatfmt import course

ROOT = Path(__file__).resolve().parents[1]
ASSIGN = sorted((ROOT / "notebooks" / "assignments").glob("*.ipynb"))
STUDENTS = [f"s{i:03d}" for i in range(60)]
_FMT = re.compile(r"\b((?:mx)?fp\d+(?:_e\dm\d\w*)?|bf16|tf32)\b", re.I)


def _cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [("".join(c["source"]), c["cell_type"]) for c in nb["cells"]]


def _exercise_id(path):
    for src, _ in _cells(path):
        m = re.search(r'course\.variant\("([\w.-]+)", STUDENT\)', src)
        if m:
            return m[1]
    raise AssertionError(f"{path.name} has no setup cell")


def _handed_out_formats(ex):
    """Format names in the parameters of 60 students' versions, or None when every
    student gets the lesson's one format (naming it is then right)."""
    got = set()
    for s in STUDENTS:
        got |= {v.lower() for v in course.variant(ex, s).values() if isinstance(v, str) and _FMT.fullmatch(v)}
    lesson = {v.lower() for v in course.exercise(ex).defaults.values() if isinstance(v, str) and _FMT.fullmatch(v)}
    return None if got == lesson else got


@pytest.mark.parametrize("path", ASSIGN, ids=lambda p: p.stem)
def test_title_and_task_name_only_formats_students_get(path):
    ex = _exercise_id(path)
    given = _handed_out_formats(ex)
    if given is None:
        return  # one format for every student: naming it is right
    md = [src for src, kind in _cells(path) if kind == "markdown"]
    title, task = md[0].splitlines()[0], next(s for s in md if s.startswith("## Task"))
    # fp32 / fp64 as accumulator or reference are every student's, whatever their format
    named = {m.lower() for m in _FMT.findall(title + "\n" + task)} - {"fp32", "fp64"}
    assert named <= given, f"{path.name} names {sorted(named - given)}; students get {sorted(given)}"


@pytest.mark.parametrize("path", ASSIGN, ids=lambda p: p.stem)
def test_setup_cell_prints_the_students_task(path):
    ex = _exercise_id(path)
    setup = next(src for src, _ in _cells(path) if "course.variant(" in src)
    assert f'course.task("{ex}", STUDENT)' in setup


def _scalars(v):
    if isinstance(v, (tuple, list)):
        for w in v:
            yield from _scalars(w)
    elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
        yield v


@pytest.mark.parametrize("ex", course.exercises())
def test_task_text_holds_every_parameter_of_the_version(ex):
    for s in STUDENTS[:15] + [None]:
        text = " ".join(course.task(ex, s).split())
        for v in _scalars(course.variant(ex, s) if s is not None else {}):
            assert str(v) in text or repr(v) in text, (ex, s, v, text)
        p = course.variant(ex, s) if s is not None else course.exercise(ex).defaults
        if "fmt" in p and ex == "fp16-overflow-threshold":
            assert f"{ff.get_format(p['fmt']).max:.10g}" in text


def test_mx_task_names_the_students_element_emax():
    """emax_elem from the element format's largest value (E4M3 448 -> 8, E2M1 6 -> 2, ...)."""
    seen = set()
    for s in STUDENTS:
        p = course.variant("mx-scale-code", s)
        emax = {"mxfp8_e4m3": 8, "mxfp8_e5m2": 15, "mxfp6_e3m2": 4, "mxfp6_e2m3": 2, "mxfp4_e2m1": 2}[p["fmt"]]
        assert f"floor(log2 max|v|) - {emax} " in course.task("mx-scale-code", s)
        seen.add(p["fmt"])
    assert len(seen) >= 3


def test_a_teachers_exercise_gets_a_task_line():
    ex = course.register(course.Exercise("tmp-task", lambda a: "ok", defaults={"k": 3}), replace=True)
    try:
        assert "k" in course.task("tmp-task") and "3" in course.task("tmp-task")
        ex.task = lambda p: f"double {p['k']}"
        assert course.task("tmp-task").endswith("double 3")
    finally:
        course.registry._REGISTRY.pop("tmp-task")


def test_a05_states_the_rule_the_grader_enforces():
    from floatfmt.course.rules import integer_only
    text = " ".join(src for src, kind in _cells(ROOT / "notebooks" / "assignments" / "05_bf16_rne_bits.ipynb")
                    if kind == "markdown")
    assert "The rule is checked on your code" in text
    assert course.exercise("bf16-rne-bits").rule is integer_only
