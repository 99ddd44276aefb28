"""Execute every notebook under notebooks/ (recursively) in a kernel running
this very Python (so the test uses the current virtual environment).

Lessons, solutions and any other notebook: every cell must run without error.
Assignments (notebooks/assignments/*.ipynb, see notebooks/README.md): the
notebook runs as committed, then with the answer cell of its solution
(notebooks/assignments/solutions/<same name>) and the check cell again, which
must print PASS, then with the solution's wrong-answer cell and the check
cell, which must print FAIL.  A solution notebook must itself print PASS after
its answer cell and FAIL after its wrong-answer cell.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
ASSIGN_DIR = NB_DIR / "assignments"
SOL_DIR = ASSIGN_DIR / "solutions"
CELL_TIMEOUT = 300


def all_notebooks() -> list[Path]:
    return sorted(p for p in NB_DIR.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def assignments() -> list[Path]:
    return sorted(ASSIGN_DIR.glob("*.ipynb"))


def _is_assignment(p: Path) -> bool:
    return p.parent == ASSIGN_DIR


def tagged(nb, tag) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if tag in c.get("metadata", {}).get("tags", [])]


def _kernel_manager():
    """A kernel manager whose kernel is this interpreter (not whatever 'python3' means here)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    d = Path(tempfile.mkdtemp(prefix="ffkernel"))
    (d / "floatfmt-test").mkdir()
    (d / "floatfmt-test" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "floatfmt test", "language": "python"}))
    ksm = KernelSpecManager()
    ksm.kernel_dirs = [str(d)]
    return AsyncKernelManager(kernel_name="floatfmt-test", kernel_spec_manager=ksm)


def execute(nb, cwd: Path):
    """Run ``nb`` in place (outputs filled in); raises CellExecutionError on a failing cell."""
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + env_path if env_path else "")
    try:
        client = nbclient.NotebookClient(nb, km=_kernel_manager(), timeout=CELL_TIMEOUT,
                                         allow_errors=False, resources={"metadata": {"path": str(cwd)}})
        client.execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
        if not env_path:
            del os.environ["PYTHONPATH"]
    return nb


def cell_text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o.get("text", ""))
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
    return "".join(out)


def assignment_run(assign_nb, sol_nb):
    """The assignment's cells; after its check cell: the solution's answer cell and
    the check cell again, then the solution's wrong-answer cell and the check cell
    again; then the rest.  Returns (notebook, index of the PASS check, index of
    the FAIL check)."""
    a_ans, a_chk = tagged(assign_nb, "answer"), tagged(assign_nb, "check")
    s_ans, s_wrong = tagged(sol_nb, "answer"), tagged(sol_nb, "wrong-answer")
    assert len(a_ans) == 1 and len(a_chk) == 1 and a_ans[0] < a_chk[0], \
        "an assignment needs exactly one 'answer' cell followed by one 'check' cell"
    assert len(s_ans) == 1 and len(s_wrong) == 1, \
        "a solution needs exactly one 'answer' cell and one 'wrong-answer' cell"
    check = assign_nb.cells[a_chk[0]]
    new = nbformat.v4.new_notebook(metadata=assign_nb.metadata)
    cells = list(assign_nb.cells[:a_chk[0] + 1])
    extra = [nbformat.v4.new_code_cell(sol_nb.cells[s_ans[0]].source),
             nbformat.v4.new_code_cell(check.source),
             nbformat.v4.new_code_cell(sol_nb.cells[s_wrong[0]].source),
             nbformat.v4.new_code_cell(check.source)]
    pass_at = len(cells) + 1
    fail_at = len(cells) + 3
    new.cells = cells + extra + list(assign_nb.cells[a_chk[0] + 1:])
    return new, pass_at, fail_at


@pytest.mark.parametrize("path", [p for p in all_notebooks() if not _is_assignment(p)],
                         ids=lambda p: str(p.relative_to(NB_DIR)))
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    for module in nb.metadata.get("floatfmt", {}).get("requires", []):  # e.g. torch (an extra)
        pytest.importorskip(module, reason=f"{path.name} needs {module}")
    execute(nb, path.parent)
    if path.parent == SOL_DIR:
        checks = [i for i in tagged(nb, "check")]
        ans, wrong = tagged(nb, "answer"), tagged(nb, "wrong-answer")
        assert ans and wrong, f"{path.name}: a solution needs 'answer' and 'wrong-answer' cells"
        after = lambda i: min(c for c in checks if c > i)  # noqa: E731
        assert "PASS [" in cell_text(nb.cells[after(ans[0])]), cell_text(nb.cells[after(ans[0])])
        assert "FAIL [" in cell_text(nb.cells[after(wrong[0])]), cell_text(nb.cells[after(wrong[0])])


@pytest.mark.parametrize("path", assignments(), ids=lambda p: p.name)
def test_assignment_checker_passes_solution_and_fails_wrong_answer(path):
    sol = SOL_DIR / path.name
    assert sol.exists(), f"{path.name} has no worked solution in {SOL_DIR.relative_to(ROOT)}"
    nb, pass_at, fail_at = assignment_run(nbformat.read(path, as_version=4),
                                          nbformat.read(sol, as_version=4))
    execute(nb, path.parent)
    assert "PASS [" in cell_text(nb.cells[pass_at]), cell_text(nb.cells[pass_at])
    assert "FAIL [" in cell_text(nb.cells[fail_at]), cell_text(nb.cells[fail_at])


def test_there_are_lessons_and_assignments():
    names = {p.name for p in all_notebooks()}
    for lesson in ("01_bits.ipynb", "02_rounding.ipynb", "03_range_vs_precision.ipynb",
                   "04_arithmetic.ipynb"):
        assert lesson in names
    assert len(assignments()) >= 6


def test_committed_with_outputs():
    """Lessons are committed executed, so they read without a kernel."""
    for p in all_notebooks():
        nb = nbformat.read(p, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
        assert code and all(c.get("execution_count") for c in code), f"{p.name} is not executed"


def _lessons():
    return [p for p in all_notebooks() if p.parent == NB_DIR]


def test_every_lesson_asserts_its_key_claims():
    """Each lesson has at least one code cell tagged 'check' whose asserts would fail if the
    lesson's claim were false (the notebook run above executes them)."""
    for p in _lessons():
        nb = nbformat.read(p, as_version=4)
        checks = [c for c in nb.cells if c.cell_type == "code" and "check" in c.metadata.get("tags", [])]
        assert checks and all("assert" in c.source for c in checks), f"{p.name} has no check cell"


def test_check_yourself_questions_have_answers_to_open():
    """A 'Check yourself' or 'Try it' cell is followed by a collapsed answer (<details>)."""
    for p in _lessons():
        nb = nbformat.read(p, as_version=4)
        for i, c in enumerate(nb.cells):
            if c.cell_type == "markdown" and ("Check yourself" in c.source or "**Try it.**" in c.source):
                nxt = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
                assert nxt is not None and "<details>" in nxt.source, f"{p.name}: no answer after cell {i}"
