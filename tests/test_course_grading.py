"""floatfmt course release / grade on a folder of synthetic submissions: right,
wrong, copied from a classmate (another variant), crashing, looping, tampered
``check``, missing answer cell, malformed file.  Expected scores are written
out by hand from the exercises' definitions (ml_dtypes for the formats)."""

import csv
import json
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from floatfmt import cli  # noqa: E402
from floatfmt.course import variant  # noqa: E402
from floatfmt.course.grading import answer_cells, grade  # noqa: E402

DT = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "fp8_e5m2": ml_dtypes.float8_e5m2,
      "fp8_e4m3": ml_dtypes.float8_e4m3fn}


def overflow_answer(fmt):
    if fmt == "tf32":
        mx, m = (2 - Fraction(2) ** -10) * Fraction(2) ** 127, 10
    else:
        fi = ml_dtypes.finfo(DT[fmt])
        mx, m = Fraction(float(fi.max)), int(fi.nmant)
    emax = int(np.floor(np.log2(float(mx))))
    return int(mx + Fraction(2) ** (emax - m - 1))


def consecutive_answer(fmt):
    return 2 ** ((10 if fmt == "tf32" else int(ml_dtypes.finfo(DT[fmt]).nmant)) + 1)


def notebook(a1="answer = None", a2="answer = None", setup="from floatfmt.course import check",
             drop_second=False):
    c = nbformat.v4.new_code_cell
    cells = [nbformat.v4.new_markdown_cell("# two exercises"), c(setup),
             c(a1, metadata={"tags": ["answer"]}),
             c('check("fp16-overflow-threshold", answer, student=STUDENT)', metadata={"tags": ["check"]})]
    if not drop_second:
        cells += [c(a2, metadata={"tags": ["answer"]}),
                  c('check("bf16-consecutive-integers", answer, student=STUDENT)', metadata={"tags": ["check"]})]
    cells.append(c("print('the end')"))
    return nbformat.v4.new_notebook(cells=cells)


def right_answers(student):
    return (overflow_answer(variant("fp16-overflow-threshold", student)["fmt"]),
            consecutive_answer(variant("bf16-consecutive-integers", student)["fmt"]))


def _students_with_distinct_variants():
    """Two ids whose variants differ in both exercises (so copying cannot pass)."""
    ids = [f"st{i}" for i in range(40)]
    a = ids[0]
    for b in ids[1:]:
        if all(variant(e, a) != variant(e, b) for e in ("fp16-overflow-threshold", "bf16-consecutive-integers")) \
                and right_answers(a)[0] != right_answers(b)[0] and right_answers(a)[1] != right_answers(b)[1]:
            return a, b
    raise AssertionError


def test_grade_synthetic_submissions(tmp_path):
    src, subs = tmp_path / "src", tmp_path / "subs"
    src.mkdir()
    nbformat.write(notebook(), src / "hw.ipynb")
    ace, copier = _students_with_distinct_variants()
    r1, r2 = right_answers(ace)
    setup = "from floatfmt.course import check\nSTUDENT = '{}'"
    cases = {
        ace: notebook(f"answer = {r1}", f"answer = {float(r2)!r}", setup.format(ace)),
        copier: notebook(f"answer = {r1}", f"answer = {r2}", setup.format(copier)),  # the classmate's answers
        "wrong": notebook("answer = 65505", "answer = 255", setup.format("wrong")),
        "crash": notebook("answer = undefined_name + 1", f"answer = {right_answers('crash')[1]}",
                          setup.format("crash") + "\nraise RuntimeError('boom in setup')"),
        "loop": notebook("while True:\n    pass", "answer = 1", setup.format("loop")),
        "tamper": notebook("answer = 1\ndef check(*a, **k):\n    print('PASS'); return True",
                           f"answer = {right_answers('tamper')[1]}\nimport floatfmt.course as c\n"
                           "c.check = lambda *a, **k: True", setup.format("tamper")),
        "missing": notebook(f"answer = {right_answers('missing')[0]}", setup=setup.format("missing"),
                            drop_second=True),
    }
    for student, nb in cases.items():
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / "hw.ipynb")
    (subs / "broken").mkdir()
    (subs / "broken" / "hw.ipynb").write_text('{"cells": [ this is not json')

    rows = grade(subs, timeout=6, source=src)
    got = {(r.student, r.exercise): (r.points, r.passed) for r in rows}
    o, c = "fp16-overflow-threshold", "bf16-consecutive-integers"
    expected = {
        (ace, o): (1, True), (ace, c): (1, True),
        (copier, o): (0, False), (copier, c): (0, False),
        ("wrong", o): (0, False), ("wrong", c): (0, False),
        ("crash", o): (0, False), ("crash", c): (1, True),
        ("loop", o): (0, False), ("loop", c): (0, False),
        ("tamper", o): (0, False), ("tamper", c): (1, True),
        ("missing", o): (1, True), ("missing", c): (0, False),
        ("broken", o): (0, False), ("broken", c): (0, False),
    }
    assert got == expected
    msg = {(r.student, r.exercise): r.message for r in rows}
    assert "Timeout" in msg[("loop", o)]
    assert "missing" in msg[("missing", c)]
    assert "could not be read" in msg[("broken", o)]
    assert "RuntimeError" in msg[("crash", c)] and "NameError" in msg[("crash", o)]



def test_cli_grade_writes_csv_and_json(tmp_path, capsys):
    subs = tmp_path / "subs"
    (subs / "s1").mkdir(parents=True)
    r1, r2 = right_answers("s1")
    nbformat.write(notebook(f"answer = {r1}", "answer = 3"), subs / "s1" / "hw.ipynb")
    for name in ("scores.csv", "scores.json"):
        assert cli.main(["course", "grade", str(subs), "--out", str(tmp_path / name), "--timeout", "20"]) == 0
    rows = list(csv.DictReader((tmp_path / "scores.csv").open()))
    assert [(r["exercise"], r["points"], r["passed"], r["percent"]) for r in rows] == \
        [("fp16-overflow-threshold", "1.0", "True", "100.0"), ("bf16-consecutive-integers", "0.0", "False", "0.0"),
         ("(total)", "1.0", "", "50.0")]
    assert rows[-1]["student"] == "s1" and rows[-1]["max_points"] == "2.0"
    js = json.loads((tmp_path / "scores.json").read_text())
    assert [r["points"] for r in js["rows"]] == [1.0, 0.0]
    assert js["totals"] == [{"student": "s1", "points": 1.0, "max_points": 2.0, "percent": 50.0}]
    assert "s1: 1 / 2 (50%)" in capsys.readouterr().out


def test_release_drops_solutions_and_answer_keys(tmp_path):
    src = tmp_path / "src"
    (src / "solutions").mkdir(parents=True)
    nb = notebook("answer = 65520")
    nb.cells.append(nbformat.v4.new_code_cell("answer = 65505", metadata={"tags": ["wrong-answer"]}))
    nb.cells.append(nbformat.v4.new_code_cell("print(65520)", metadata={"tags": ["solution"]}))
    nb.cells[2].outputs = [nbformat.v4.new_output("stream", text="65520\n")]
    nbformat.write(nb, src / "hw.ipynb")
    nbformat.write(nb, src / "solutions" / "hw.ipynb")
    (src / "data.txt").write_text("x")
    assert cli.main(["course", "release", str(src), str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert not (out / "solutions").exists() and (out / "data.txt").exists()
    rel = nbformat.read(out / "hw.ipynb", as_version=4)
    tags = [t for c in rel.cells for t in c.metadata.get("tags", [])]
    assert "wrong-answer" not in tags and "solution" not in tags
    assert all(not c.get("outputs") for c in rel.cells if c.cell_type == "code")
    assert [e for _, e in answer_cells(rel)] == ["fp16-overflow-threshold", "bf16-consecutive-integers"]


def test_function_answers_are_graded_on_the_graders_inputs(tmp_path):
    """A function answer (bf16-rne-bits) runs in the student's kernel on the inputs the
    exercise declares; its outputs are checked outside.  ml_dtypes is the reference RNE."""
    c = nbformat.v4.new_code_cell
    right = ("import numpy as np\n"
             "def answer(bits):\n"
             "    b = np.asarray(bits, dtype=np.uint64)\n"
             "    nan = ((b >> 23) & 0xFF == 0xFF) & (b & 0x7FFFFF != 0)\n"
             "    return np.where(nan, (b >> 16) | 0x40, (b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)")
    trunc = "import numpy as np\nanswer = lambda bits: (np.asarray(bits) >> 16).astype(np.uint16)"
    bits = np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF], np.uint32)
    ns = {}
    exec(right, ns)  # noqa: S102 - the test's own reference function
    assert (ns["answer"](bits) == bits.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)).all()
    for student, src in [("fn_right", right), ("fn_trunc", trunc)]:
        nb = nbformat.v4.new_notebook(cells=[
            c(src, metadata={"tags": ["answer"]}),
            c('from floatfmt.course import check\ncheck("bf16-rne-bits", answer)', metadata={"tags": ["check"]})])
        (tmp_path / student).mkdir()
        nbformat.write(nb, tmp_path / student / "rne.ipynb")
    rows = {r.student: r for r in grade(tmp_path, timeout=30)}
    assert rows["fn_right"].passed and rows["fn_right"].points == 2, rows["fn_right"].message
    assert not rows["fn_trunc"].passed and "ordinary rounding" in rows["fn_trunc"].message


def test_release_of_the_course_holds_no_solution(tmp_path):
    """Releasing the committed course: no solutions folder, no pointer to one, and no
    line of a worked solution's answer cells in the released assignment."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "notebooks"
    assert cli.main(["course", "release", str(root), str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    assert not any("solutions" in p.relative_to(out).parts for p in out.rglob("*"))
    for p in out.rglob("*.ipynb"):
        assert "solutions/" not in p.read_text(encoding="utf-8"), p
    sols = sorted((root / "assignments" / "solutions").glob("*.ipynb"))
    assert sols
    for sol in sols:
        own = (root / "assignments" / sol.name).read_text(encoding="utf-8")
        released = (out / "assignments" / sol.name).read_text(encoding="utf-8")
        for c in nbformat.read(sol, as_version=4).cells:
            if set(c.metadata.get("tags", [])) & {"answer", "wrong-answer", "solution"}:
                lines = [json.dumps(ln.strip())[1:-1] for ln in c.source.splitlines()
                         if len(ln.strip()) > 12 and not ln.strip().startswith("#")]
                leaked = [ln for ln in lines if ln in released and ln not in own]
                assert not leaked, (sol.name, leaked[:3])


def test_grader_habits_and_gaming(tmp_path, capfd):
    """One graded class: an answer in a new untagged cell (the tagged one deleted), a
    notebook whose STUDENT is not its folder, a brute force over the checker, and an
    A05 answer that converts with ml_dtypes.  Right answers from ml_dtypes / Fraction."""
    c = nbformat.v4.new_code_cell
    o = "fp16-overflow-threshold"
    subs = tmp_path / "subs"

    def put(student, cells):
        (subs / student).mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(cells=cells), subs / student / "hw.ipynb")

    right = overflow_answer(variant(o, "untagged")["fmt"])
    put("untagged", [c("from floatfmt.course import check\nSTUDENT = 'untagged'"),
                     c(f"answer = {right}"),                                   # no tag
                     c(f'check("{o}", answer, student=STUDENT)', metadata={"tags": ["check"]})])
    other = next(s for s in (f"x{i}" for i in range(50))
                 if overflow_answer(variant(o, s)["fmt"]) != overflow_answer(variant(o, "me")["fmt"]))
    put("me", [c(f"from floatfmt.course import check\nSTUDENT = {other!r}"),
               c(f"answer = {overflow_answer(variant(o, other)['fmt'])}", metadata={"tags": ["answer"]}),
               c(f'check("{o}", answer, student=STUDENT)', metadata={"tags": ["check"]})])
    put("brute", [c("import floatfmt as ff\nfrom floatfmt import course\nSTUDENT = 'brute'\n"
                    f"fmt = course.variant('{o}', STUDENT)['fmt']\n"
                    "top = int(ff.info(fmt).max)\n"
                    f"answer = next(n for n in range(top, 2 * top) if course.check('{o}', n, student=STUDENT, "
                    "quiet=True))", metadata={"tags": ["answer"]}),
                  c(f'course.check("{o}", answer, student=STUDENT)', metadata={"tags": ["check"]})])
    put("mldtypes", [c("import numpy as np, ml_dtypes\n"
                       "def answer(bits):\n"
                       "    return np.asarray(bits, np.uint32).view(np.float32).astype(ml_dtypes.bfloat16)"
                       ".view(np.uint16)", metadata={"tags": ["answer"]}),
                     c('from floatfmt.course import check\ncheck("bf16-rne-bits", answer)',
                       metadata={"tags": ["check"]})])
    capfd.readouterr()
    rows = {r.student: r for r in grade(subs, timeout=60)}
    err = capfd.readouterr().err
    assert "IPKernelApp" not in err, err[:500]

    u = rows["untagged"]
    assert u.passed and u.points == 1 and "no cell tagged 'answer'" in u.message, u.message
    me = rows["me"]
    assert not me.passed and f"STUDENT = {other!r}" in me.message and "'me'" in me.message, me.message
    b = rows["brute"]
    fmt = variant(o, "brute")["fmt"]
    tries = overflow_answer(fmt) - int(float(ml_dtypes.finfo(DT[fmt]).max) if fmt in DT else 0) + 1 + 1
    assert b.passed and b.checker_calls == tries, (b.checker_calls, tries)
    assert u.checker_calls == 1 and me.checker_calls == 1
    m = rows["mldtypes"]
    assert not m.passed and m.points == 0 and "rule" in m.message and "ml_dtypes" in m.message, m.message
    out = tmp_path / "s.csv"
    from floatfmt.course.grading import write_scores
    write_scores(list(rows.values()), out)
    tot = {r["student"]: r for r in csv.DictReader(out.open()) if r["exercise"] == "(total)"}
    assert tot["untagged"]["percent"] == "100.0" and tot["brute"]["checker_calls"] == str(tries)


def test_integer_only_rule():
    from floatfmt.course.rules import integer_only
    ok = ("import numpy as np\n"
          "def f(bits):\n"
          "    b = np.asarray(bits, dtype=np.uint64)\n"
          "    return np.where((b >> 23) & 0xFF == 0xFF, b >> 16, (b + 0x7FFF + ((b >> 16) & 1)) >> 16)"
          ".astype(np.uint16)\n")
    assert integer_only(ok) == []
    for bad, why in [("import floatfmt as ff\nf = lambda b: ff.encode(b, 'bf16')", "floatfmt"),
                     ("f = lambda b: (b.view('f4') * 1.0)", "float"),
                     ("import numpy as np\nf = lambda b: np.frexp(b)", "frexp"),
                     ("f = lambda b: b / 65536", "division"),
                     ("import struct", "struct"),
                     ("f = lambda b: round(b)", "round")]:
        found = integer_only(bad)
        assert found and any(why in v for v in found), (bad, found)
