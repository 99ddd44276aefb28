"""Teacher tools: student copies of the course (``release``) and grading of
submitted notebooks (``grade``), behind ``floatfmt course release|grade``.

Grading runs each submitted notebook in its own fresh kernel with a time limit
per cell, records the value of ``answer`` right after every cell tagged
``answer`` (a cell the grader adds prints it as JSON), and checks those values
in the grader's own process with the registered checker for the student's
variant.  Nothing the notebook defines (a redefined ``check``, a patched
floatfmt) takes part in the verdict: it can at most print a wrong answer.

Which exercise an answer cell answers: the cell's metadata
``{"floatfmt": {"exercise": ID}}`` if present, else the first
``check("ID", ...)`` in the next cell tagged ``check``.  The exercises a
notebook must answer: those of ``--source``'s copy of it, of its answer cells,
and of every ``check("ID", ...)`` in a cell tagged ``check``.

Where the answer is read, for each exercise: the value ``answer`` holds right
after the cell tagged ``answer`` for that exercise; when the notebook has no
such cell (deleted, or the answer written in a new untagged cell), the value
``answer`` holds right before the first code cell that calls ``check("ID", ...)``
(tagged or not), and the row's message says so; with neither, the row reads
"answer cell missing".

The student id is the submission's folder name
(``SUBMISSIONS/<student>/<assignment>.ipynb``), not anything the notebook
says; a notebook whose ``STUDENT`` differs from its folder gets a note saying
which version it was graded for.

Each row also counts the calls of the exercise's checker during the graded run
(``checker_calls``): a notebook run top to bottom calls it once per check cell,
so a count in the hundreds is a brute force over the checker.  An exercise with
a ``rule`` (assignment 05: integer operations only) has the answer cell's code,
and the answer function's source, checked against it by the grader.

Both need the ``course`` extra (nbformat, nbclient, jupyter_client, ipykernel:
``pip install "floatfmt[course]"``); without it they raise
``floatfmt.core.optional.MissingExtraError`` naming the extra.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..core.optional import optional_import
from .registry import check, exercise

__all__ = ["release", "grade", "Score", "answer_cells", "write_scores", "totals"]

_RELEASE = "floatfmt course release"
_GRADE = "floatfmt course grade"


def _nbformat(feature: str) -> Any:
    """nbformat, or the error naming the ``course`` extra."""
    return optional_import("nbformat", "course", feature)


def _grading_packages() -> None:
    """Fail before grading anything when a package the grader runs is missing (ipykernel
    runs in the kernel's process, where its absence would only show as a dead kernel)."""
    for name in ("nbformat", "nbclient", "jupyter_client.manager", "ipykernel"):
        optional_import(name, "course", _GRADE)


STUDENT_ONLY_DROP = ("solution", "wrong-answer", "grader-only")
_CHECK_ID = re.compile(r"""check\(\s*["']([\w.-]+)["']""")
_MARK = "@@floatfmt-answer "
_MANY_CALLS = 5  # a notebook run once calls each checker once per check cell
_COUNTER = r'''
def __ff_count_checkers():
    import floatfmt.course.registry as R
    calls = {}
    def wrap(ex):
        if getattr(ex.checker, "__ff_counted__", False):
            return
        inner = ex.checker
        def counted(*a, **k):
            calls[ex.id] = calls.get(ex.id, 0) + 1
            return inner(*a, **k)
        counted.__ff_counted__ = True
        counted.__wrapped__ = inner
        ex.checker = counted
    for ex in R._REGISTRY.values():
        wrap(ex)
    reg = R.register
    def register(ex, **k):
        out = reg(ex, **k)
        wrap(out)
        return out
    R.register = register
    import floatfmt.course as C
    C.register = register
    return calls
__ff_checker_calls = __ff_count_checkers()
'''
_CAPTURE = r'''
def __ff_ser(a):
    import numpy, fractions, decimal
    if a is Ellipsis: return {"ellipsis": True}
    if isinstance(a, numpy.ndarray): return {"list": [__ff_ser(v) for v in a.tolist()]}
    if isinstance(a, numpy.generic): a = a.item()
    if isinstance(a, bool) or a is None or isinstance(a, (int, str)): return a
    if isinstance(a, float): return {"float": a.hex()}
    if isinstance(a, (fractions.Fraction, decimal.Decimal)): return {"fraction": str(fractions.Fraction(a))}
    if isinstance(a, (list, tuple)): return {"list": [__ff_ser(v) for v in a]}
    if isinstance(a, dict): return {"dict": [[__ff_ser(k), __ff_ser(v)] for k, v in a.items()]}
    return {"unsupported": type(a).__name__}
def __ff_answer():
    a = globals().get("answer")
    if callable(a):  # a function answer: its outputs on the grader's inputs travel instead
        import numpy, floatfmt.course as C
        ex = C.exercise(EXID)
        if ex.probe is None:
            return {"unsupported": "function"}
        xs = numpy.asarray(ex.probe(ex.params_for(STUDENT)))
        try:
            ys = numpy.asarray(a(xs.copy())).astype(numpy.int64)
            assert ys.shape == xs.shape
        except Exception:
            ys = numpy.array([int(a(int(v))) for v in xs], dtype=numpy.int64)
        return {"function": [__ff_ser(xs.astype(numpy.int64)), __ff_ser(ys)]}
    return __ff_ser(a)
def __ff_source():
    a = globals().get("answer")
    try:
        import inspect
        return inspect.getsource(a) if callable(a) else None
    except Exception:
        return None
def __ff_student():
    s = globals().get("STUDENT")
    return s if isinstance(s, (str, int)) and not isinstance(s, bool) else None
print(MARK + __import__("json").dumps([EXID, __ff_answer(), __ff_source(), __ff_student()]))
'''
_CALLS = r'''
print(MARK + __import__("json").dumps(["@calls", dict(globals().get("__ff_checker_calls", {}))]))
'''


def _de(o):
    """Inverse of the kernel-side serialisation (exact: floats travel as hex)."""
    if isinstance(o, dict):
        if "float" in o:
            return float.fromhex(o["float"])
        if "fraction" in o:
            return Fraction(o["fraction"])
        if "list" in o:
            return [_de(v) for v in o["list"]]
        if "dict" in o:
            return {_de(k): _de(v) for k, v in o["dict"]}
        if "ellipsis" in o:
            return None
        if "function" in o:
            xs, ys = (_de(v) for v in o["function"])
            return _Recorded(xs, ys)
        raise ValueError(f"an answer of type {o.get('unsupported')} cannot be graded outside the kernel")
    return o


class _Recorded:
    """A student's function, replaced by its outputs on the grader's inputs: called with
    those inputs (as an array, or one at a time) it returns what the function returned;
    called with anything else it raises, so recorded outputs for other inputs earn nothing."""

    def __init__(self, xs, ys):
        import numpy as np
        self.xs, self.ys = np.asarray(xs, dtype=np.int64), np.asarray(ys, dtype=np.int64)
        self.table = dict(zip(self.xs.tolist(), self.ys.tolist()))

    def __call__(self, x):
        import numpy as np
        arr = np.asarray(x)
        if arr.ndim == 0:
            return self.table[int(arr)]
        if arr.shape == self.xs.shape and np.array_equal(arr.astype(np.int64), self.xs):
            return self.ys.copy()
        return np.array([self.table[int(v)] for v in arr.ravel()]).reshape(arr.shape)


@dataclass
class Score:
    """One row of the grade table."""

    student: str
    notebook: str
    exercise: str
    points: float
    max_points: float
    passed: bool
    message: str
    checker_calls: int = 0


def _tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


def _check_cell_of(nb, ex) -> int | None:
    """Index of the first code cell that calls ``check("ex", ...)``, tagged or not."""
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and ex in _CHECK_ID.findall(c.source):
            return i
    return None


def answer_cells(nb) -> list[tuple[int, str]]:
    """(cell index, exercise id) of every answer cell of ``nb``."""
    out = []
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code" or "answer" not in _tags(c):
            continue
        ex = c.get("metadata", {}).get("floatfmt", {}).get("exercise")
        if ex is None:
            for d in nb.cells[i + 1:]:
                if "check" in _tags(d):
                    m = _CHECK_ID.search(d.source)
                    ex = m[1] if m else None
                    break
        if ex is not None:
            out.append((i, ex))
    return out


def release(src, dest) -> list[Path]:
    """Copy the notebooks under ``src`` to ``dest`` for students: folders named
    ``solutions`` are left out, cells tagged solution / wrong-answer /
    grader-only are dropped, and assignment notebooks (those with an ``answer``
    cell) lose their outputs.  Other files are copied as they are.  Returns the
    notebooks written."""
    nbformat = _nbformat(_RELEASE)
    src, dest = Path(src), Path(dest)
    if not src.is_dir():
        raise ValueError(f"{src} is not a folder")
    written = []
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if "solutions" in rel.parts or ".ipynb_checkpoints" in rel.parts or p.is_dir():
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if p.suffix != ".ipynb":
            shutil.copy2(p, out)
            continue
        nb = nbformat.read(p, as_version=4)
        nb.cells = [c for c in nb.cells if not set(_tags(c)) & set(STUDENT_ONLY_DROP)]
        if answer_cells(nb):
            for c in nb.cells:
                if c.cell_type == "code":
                    c.outputs, c.execution_count = [], None
        nbformat.write(nb, out)
        written.append(out)
    return written


def _kernel_manager():
    """A kernel manager whose kernel is this interpreter."""
    KernelSpecManager = optional_import("jupyter_client.kernelspec", "course", _GRADE).KernelSpecManager
    AsyncKernelManager = optional_import("jupyter_client.manager", "course", _GRADE).AsyncKernelManager
    d = Path(tempfile.mkdtemp(prefix="ffgrade"))
    (d / "ffgrade").mkdir()
    import os
    root = str(Path(__file__).resolve().parents[2])  # the floatfmt the grader runs is the kernel's too
    path = os.environ.get("PYTHONPATH", "")
    (d / "ffgrade" / "kernel.json").write_text(json.dumps({
        # log level ERROR: one "running over TCP without encryption" warning per notebook
        # (the kernel listens on localhost only) would flood the teacher's terminal
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.log_level=ERROR"],
        "env": {"PYTHONPATH": root + (os.pathsep + path if path else "")},
        "display_name": "floatfmt grader", "language": "python"}))
    ksm = KernelSpecManager()
    ksm.kernel_dirs = [str(d)]
    return AsyncKernelManager(kernel_name="ffgrade", kernel_spec_manager=ksm)


def _run(nb, cwd, timeout) -> str | None:
    """Execute ``nb`` in a fresh kernel; every cell runs even after an error.
    Returns the first error (or timeout) as text, None when clean."""
    nbclient = optional_import("nbclient", "course", _GRADE)

    def limit(cell):  # the grader's own cells (the counter imports floatfmt) are not held to
        return max(timeout, 120) if "floatfmt_capture" in cell.get("metadata", {}) else timeout  # the limit

    client = nbclient.NotebookClient(nb, km=_kernel_manager(), timeout=timeout, timeout_func=limit,
                                     allow_errors=True, interrupt_on_timeout=True,
                                     resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except Exception as err:  # noqa: BLE001 - timeout, dead kernel: record it and go on
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    for c in nb.cells:
        if c.get("metadata", {}).get("floatfmt_capture") == "@counter":
            continue  # the grader's counter: its error is not the student's
        e = _cell_error(c, timeout)
        if e:
            return e
    return None


def _cell_error(cell, timeout) -> str | None:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            if o.get("ename") == "KeyboardInterrupt":
                return f"Timeout: a cell ran past {timeout:g} s and was interrupted"
            return f"{o.get('ename')}: {o.get('evalue')}"
    return None


def _expected(source_dir, name) -> list[str] | None:
    nbformat = _nbformat(_GRADE)
    if source_dir is None:
        return None
    p = Path(source_dir) / name
    if not p.exists():
        return None
    return [ex for _, ex in answer_cells(nbformat.read(p, as_version=4))]


def _instrument(nb, student, expected):
    """Insert the grader's cells into ``nb``: the checker counter first, a capture cell
    where each answer is read (after its tagged cell, else just before its first check
    call), the call report last."""
    nbformat = _nbformat(_GRADE)
    found = answer_cells(nb)
    tagged = {ex for _, ex in found}
    checked = [ex for c in nb.cells if c.cell_type == "code" and "check" in _tags(c)
               for ex in _CHECK_ID.findall(c.source)]
    expected = list(dict.fromkeys((expected or []) + [ex for _, ex in found] + checked))
    # where to read each answer: after its tagged cell, else just before its first check call
    points = [(i + 1, ex, i) for i, ex in found]
    for ex in dict.fromkeys((expected or []) + [ex for _, ex in found]):
        j = None if ex in tagged else _check_cell_of(nb, ex)
        if j is not None:
            points.append((j, ex, None))
    untagged = {ex for _, ex, own in points if own is None}
    answer_source = {ex: nb.cells[own].source for _, ex, own in points if own is not None}
    for at, ex, own in sorted(points, key=lambda t: t[0], reverse=True):
        src = (_CAPTURE.replace("MARK", repr(_MARK)).replace("EXID", repr(ex))
               .replace("STUDENT)", repr(student) + ")"))
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["floatfmt_capture"] = ex
        cell.metadata["floatfmt_own"] = own is not None
        nb.cells.insert(at, cell)
    nb.cells.insert(0, nbformat.v4.new_code_cell(_COUNTER, metadata={"floatfmt_capture": "@counter"}))
    nb.cells.append(nbformat.v4.new_code_cell(_CALLS.replace("MARK", repr(_MARK)),
                                              metadata={"floatfmt_capture": "@calls"}))
    return found, tagged, untagged, answer_source, expected


def _records(nb):
    """The answers, answer-function sources, checker calls and STUDENT the capture
    cells of an executed ``nb`` printed."""
    answers: dict[str, object] = {}
    sources: dict[str, str] = {}
    calls: dict[str, int] = {}
    said_student = None
    for c in nb.cells:
        if "floatfmt_capture" not in c.get("metadata", {}):
            continue
        for o in c.get("outputs", []):
            text = o.get("text", "") if o.get("output_type") == "stream" else ""
            for line in text.splitlines():
                if not line.startswith(_MARK):
                    continue
                try:
                    rec = json.loads(line[len(_MARK):])
                    if rec[0] == "@calls":
                        calls = {str(k): int(v) for k, v in rec[1].items()}
                        continue
                    ex, val, fsrc, said = rec
                    said_student = said if said is not None else said_student
                    if isinstance(fsrc, str):
                        sources[ex] = fsrc
                    answers[ex] = _de(val)
                except (ValueError, TypeError, IndexError, KeyError) as err:
                    answers.setdefault(str(rec[0]) if isinstance(rec, list) and rec else "?", err)
    return answers, sources, calls, said_student


def grade_notebook(path, student, *, timeout=60, expected=None) -> list[Score]:
    """Grade one submitted notebook (see the module docstring)."""
    _grading_packages()
    nbformat = _nbformat(_GRADE)
    path = Path(path)
    rows: list[Score] = []

    def row(ex, passed, msg, pts=0.0):
        try:
            mx = exercise(ex).points
        except ValueError:
            mx = 0.0
        rows.append(Score(student, path.name, ex, pts, mx, passed, msg))

    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 - malformed: record it, grade nothing
        for ex in expected or ["(notebook)"]:
            row(ex, False, f"notebook could not be read: {type(err).__name__}: {err}"[:300])
        return rows
    found, tagged, untagged, answer_source, expected = _instrument(nb, student, expected)
    error = _run(nb, path.parent, timeout)
    answers, sources, calls, said_student = _records(nb)
    own_error = {}
    for i, c in enumerate(nb.cells):  # the error of each answer cell itself, if any
        md = c.get("metadata", {})
        if md.get("floatfmt_own") and i > 0:
            e = _cell_error(nb.cells[i - 1], timeout)
            if e:
                own_error[md["floatfmt_capture"]] = ("the answer cell raised " + e
                                                     if not e.startswith("Timeout") else e)
    todo = list(dict.fromkeys((expected or []) + [ex for _, ex in found]))
    for ex in todo:
        if ex not in tagged and ex not in untagged:
            row(ex, False, "answer cell missing (no cell tagged 'answer' for this exercise, and no "
                           f"cell calls check({ex!r}, ...))")
        elif ex not in answers:
            row(ex, False, "answer not recorded: " + (error or "the answer cell did not run"))
        elif isinstance(answers[ex], Exception):
            row(ex, False, f"answer could not be read: {answers[ex]}")
        elif answers[ex] is None and (reason := own_error.get(ex) or error):
            row(ex, False, "no answer: " + reason)
        elif broken := _rule_violations(ex, answer_source.get(ex), sources.get(ex)):
            row(ex, False, f"FAIL [{ex}] the answer breaks the exercise's rule: {broken}")
        else:
            try:
                r = check(ex, answers[ex], student=student, quiet=True)
                row(ex, r.passed, r.message, r.points)
            except (ValueError, TypeError) as err:
                row(ex, False, f"answer could not be checked: {err}")
    for score in rows:
        score.checker_calls = calls.get(score.exercise, 0)
        if score.exercise in untagged:
            score.message += (" (no cell tagged 'answer': graded the value of `answer` just before "
                              "the first cell that calls check)")
        if said_student is not None and str(said_student) != str(student):
            score.message += (f" (the notebook sets STUDENT = {said_student!r}, but it was submitted "
                              f"in the folder {student!r}: graded for {student!r}'s version, the "
                              "folder name)")
    if error and rows:
        for score in rows:
            if score.passed:
                score.message += f" (the notebook also raised {error})"
    return rows


def _rule_violations(ex_id, cell_source, function_source) -> str:
    """The exercise's rule (``Exercise.rule``) applied to the answer cell's code and to the
    answer function's source; "" when the rule holds or the exercise has none."""
    try:
        rule = exercise(ex_id).rule
    except ValueError:
        return ""
    if rule is None:
        return ""
    found = []
    for src in (cell_source, function_source):
        if src:
            found += [v for v in rule(src) if v not in found]
    return "; ".join(found)


def grade(submissions, *, timeout=60, source=None) -> list[Score]:
    """Grade every ``SUBMISSIONS/<student>/*.ipynb``; ``source`` (the teacher's
    assignment folder) tells which exercises each notebook must answer, so a
    deleted answer cell scores 0 instead of vanishing from the table."""
    submissions = Path(submissions)
    if not submissions.is_dir():
        raise ValueError(f"{submissions} is not a folder")
    _grading_packages()
    rows: list[Score] = []
    for sdir in sorted(p for p in submissions.iterdir() if p.is_dir()):
        for nbp in sorted(sdir.glob("*.ipynb")):
            rows += grade_notebook(nbp, sdir.name, timeout=timeout, expected=_expected(source, nbp.name))
    return rows


def totals(rows) -> dict:
    """Per student: ``(points, max points, percent)`` over all their rows (percent of the
    maximum, 0 when the maximum is 0)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        t = out.setdefault(r.student, [0.0, 0.0])
        t[0] += r.points
        t[1] += r.max_points
    return {s: (got, of, 100.0 * got / of if of else 0.0) for s, (got, of) in out.items()}


def write_scores(rows, out) -> Path:
    """Write ``rows`` as CSV (``.csv``) or JSON (``.json``, a list of objects).

    Every row has ``percent`` (points / max points x 100).  The CSV ends with one total
    row per student (notebook ``(all)``, exercise ``(total)``: the sums and the
    percentage of their maximum); the JSON holds ``rows`` and ``totals``."""
    out = Path(out)
    data = [{**asdict(r), "percent": round(100.0 * r.points / r.max_points, 2) if r.max_points else 0.0}
            for r in rows]
    tot = totals(rows)
    if out.suffix == ".json":
        out.write_text(json.dumps({"rows": data, "totals": [
            {"student": s, "points": g, "max_points": m, "percent": round(p, 2)} for s, (g, m, p) in tot.items()]},
            indent=1))
    elif out.suffix == ".csv":
        with out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(Score.__dataclass_fields__) + ["percent"])
            w.writeheader()
            w.writerows(data)
            for s, (g, m, p) in tot.items():
                w.writerow({"student": s, "notebook": "(all)", "exercise": "(total)", "points": g,
                            "max_points": m, "passed": "", "message": "", "percent": round(p, 2),
                            "checker_calls": sum(r.checker_calls for r in rows if r.student == s)})
    else:
        raise ValueError(f"--out must end in .csv or .json, not {out.suffix!r}")
    return out


def cli_course(args) -> int:
    """``floatfmt course release SRC DEST`` / ``floatfmt course grade SUBMISSIONS``."""
    if args.course_cmd == "release":
        for p in release(args.src, args.dest):
            print(p)
        return 0
    rows = grade(args.submissions, timeout=args.timeout, source=args.source)
    write_scores(rows, args.out)
    for student, (got, of, pct) in totals(rows).items():
        print(f"{student}: {got:g} / {of:g} ({pct:.0f}%)")
    many = [r for r in rows if r.checker_calls > _MANY_CALLS]
    for r in many:
        print(f"note: {r.student} / {r.notebook} called the {r.exercise} checker {r.checker_calls} "
              "times in the graded run (a brute force over the checker?)")
    print(f"wrote {args.out}")
    return 0
