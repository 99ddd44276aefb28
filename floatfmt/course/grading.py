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
``check("ID", ...)`` in the next cell tagged ``check``.  The student id is the
submission's folder name (``SUBMISSIONS/<student>/<assignment>.ipynb``), not
anything the notebook says.

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

__all__ = ["release", "grade", "Score", "answer_cells", "write_scores"]

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
print(MARK + __import__("json").dumps([EXID, __ff_answer()]))
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


def _tags(cell) -> list:
    return list(cell.get("metadata", {}).get("tags", []))


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
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "env": {"PYTHONPATH": root + (os.pathsep + path if path else "")},
        "display_name": "floatfmt grader", "language": "python"}))
    ksm = KernelSpecManager()
    ksm.kernel_dirs = [str(d)]
    return AsyncKernelManager(kernel_name="ffgrade", kernel_spec_manager=ksm)


def _run(nb, cwd, timeout) -> str | None:
    """Execute ``nb`` in a fresh kernel; every cell runs even after an error.
    Returns the first error (or timeout) as text, None when clean."""
    nbclient = optional_import("nbclient", "course", _GRADE)
    client = nbclient.NotebookClient(nb, km=_kernel_manager(), timeout=timeout, allow_errors=True,
                                     interrupt_on_timeout=True, resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except Exception as err:  # noqa: BLE001 - timeout, dead kernel: record it and go on
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    for c in nb.cells:
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
    found = answer_cells(nb)
    for k, (i, ex) in reversed(list(enumerate(found))):
        src = _CAPTURE.replace("MARK", repr(_MARK)).replace("EXID", repr(ex)).replace("STUDENT", repr(student))
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["floatfmt_capture"] = k
        nb.cells.insert(i + 1, cell)
    error = _run(nb, path.parent, timeout)
    answers: dict[str, object] = {}
    for c in nb.cells:
        if "floatfmt_capture" not in c.get("metadata", {}):
            continue
        for o in c.get("outputs", []):
            text = o.get("text", "") if o.get("output_type") == "stream" else ""
            for line in text.splitlines():
                if line.startswith(_MARK):
                    try:
                        ex, val = json.loads(line[len(_MARK):])
                        answers[ex] = _de(val)
                    except (ValueError, TypeError) as err:
                        answers.setdefault(ex, err)
    own_error = {}
    for i, c in enumerate(nb.cells):  # the error of each answer cell itself, if any
        k = c.get("metadata", {}).get("floatfmt_capture")
        if k is not None and i > 0:
            e = _cell_error(nb.cells[i - 1], timeout)
            if e:
                own_error[found[k][1]] = "the answer cell raised " + e if not e.startswith("Timeout") else e
    todo = list(dict.fromkeys((expected or []) + [ex for _, ex in found]))
    for ex in todo:
        if ex not in [e for _, e in found]:
            row(ex, False, "answer cell missing (no cell tagged 'answer' for this exercise)")
        elif ex not in answers:
            row(ex, False, "answer not recorded: " + (error or "the answer cell did not run"))
        elif isinstance(answers[ex], Exception):
            row(ex, False, f"answer could not be read: {answers[ex]}")
        elif answers[ex] is None and (reason := own_error.get(ex) or error):
            row(ex, False, "no answer: " + reason)
        else:
            try:
                r = check(ex, answers[ex], student=student, quiet=True)
                row(ex, r.passed, r.message, r.points)
            except (ValueError, TypeError) as err:
                row(ex, False, f"answer could not be checked: {err}")
    if error and rows:
        for score in rows:
            if score.passed:
                score.message += f" (the notebook also raised {error})"
    return rows


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


def write_scores(rows, out) -> Path:
    """Write ``rows`` as CSV (``.csv``) or JSON (``.json``, a list of objects)."""
    out = Path(out)
    data = [asdict(r) for r in rows]
    if out.suffix == ".json":
        out.write_text(json.dumps(data, indent=1))
    elif out.suffix == ".csv":
        with out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(Score.__dataclass_fields__))
            w.writeheader()
            w.writerows(data)
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
    total: dict[str, list[float]] = {}
    for r in rows:
        t = total.setdefault(r.student, [0.0, 0.0])
        t[0] += r.points
        t[1] += r.max_points
    for student, (got, of) in total.items():
        print(f"{student}: {got:g} / {of:g}")
    print(f"wrote {args.out}")
    return 0
