"""A missing optional package is an error that names the extra installing it.

Each entry point that needs a package outside the runtime dependencies (numpy,
ml_dtypes, matplotlib) runs in a subprocess where that package cannot be imported (a
finder at the front of ``sys.meta_path`` refuses it, as for a base install), and must
say ``pip install "floatfmt[EXTRA]"``; a command of the CLI prints that as one line and
exits non-zero, without a traceback.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs before the code under test: the modules in BLOCKED (and their submodules) cannot be
# imported, as if they were not installed.
_PRELUDE = textwrap.dedent("""
    import sys
    BLOCKED = {blocked!r}

    class _Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    for _m in list(sys.modules):
        if _m.split(".")[0] in BLOCKED:
            del sys.modules[_m]
    sys.meta_path.insert(0, _Hide())
""")


def _run(blocked, code, *args, cwd=None):
    src = _PRELUDE.format(blocked=sorted(blocked)) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", src, *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd or ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()})


_CLI = """
import runpy
sys.argv = ["floatfmt"] + sys.argv[1:]
runpy.run_module("floatfmt.cli", run_name="__main__")
"""


def _assert_one_line_error(proc, extra):
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f'pip install "floatfmt[{extra}]"' in lines[0], lines[0]


def _notebook(path):
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["answer"]}, "source": "answer = 1",
                     "outputs": [], "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


@pytest.mark.parametrize("package", ["nbformat"])
def test_cli_course_release_names_the_course_extra(tmp_path, package):
    _notebook(tmp_path / "src" / "a.ipynb")
    proc = _run({package}, _CLI, "course", "release", str(tmp_path / "src"), str(tmp_path / "dest"))
    _assert_one_line_error(proc, "course")
    assert repr(package) in proc.stderr and "floatfmt course release" in proc.stderr
    assert not (tmp_path / "dest" / "a.ipynb").exists()


@pytest.mark.parametrize("package", ["nbformat", "nbclient", "jupyter_client", "ipykernel"])
def test_cli_course_grade_names_the_course_extra(tmp_path, package):
    _notebook(tmp_path / "subs" / "s1" / "a.ipynb")
    proc = _run({package}, _CLI, "course", "grade", str(tmp_path / "subs"), "--out",
                str(tmp_path / "scores.csv"))
    _assert_one_line_error(proc, "course")
    assert repr(package) in proc.stderr and "floatfmt course grade" in proc.stderr
    assert not (tmp_path / "scores.csv").exists()


@pytest.mark.parametrize("call", ["release(SRC, DEST)", "grade(SUBS)", "grade_notebook(NB, 's1')"])
def test_course_functions_raise_missing_extra_error(tmp_path, call):
    _notebook(tmp_path / "subs" / "s1" / "a.ipynb")
    code = f"""
    from floatfmt.course.grading import release, grade, grade_notebook
    from floatfmt.core.optional import MissingExtraError
    SRC, DEST = {str(tmp_path / "subs" / "s1")!r}, {str(tmp_path / "dest")!r}
    SUBS, NB = {str(tmp_path / "subs")!r}, {str(tmp_path / "subs" / "s1" / "a.ipynb")!r}
    try:
        {call}
    except MissingExtraError as err:
        assert isinstance(err, ModuleNotFoundError) and err.extra == "course" and err.name == "nbformat"
        print("RAISED", err)
    """
    proc = _run({"nbformat"}, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("RAISED ") and 'pip install "floatfmt[course]"' in proc.stdout


def test_import_floatfmt_torch_names_the_torch_extra():
    code = """
    try:
        import floatfmt.torch
    except ModuleNotFoundError as err:
        print("RAISED", type(err).__name__, err.name, err)
    """
    proc = _run({"torch"}, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("RAISED MissingExtraError torch "), proc.stdout
    assert 'floatfmt.torch needs the package \'torch\'' in proc.stdout
    assert 'pip install "floatfmt[torch]"' in proc.stdout


def test_gpu_capture_names_the_gpu_extra(tmp_path):
    code = """
    import runpy
    sys.argv = ["capture"] + sys.argv[1:]
    runpy.run_module("floatfmt.gpu.capture", run_name="__main__")
    """
    proc = _run({"torch"}, code, "--out", str(tmp_path / "fx"))
    _assert_one_line_error(proc, "gpu")
    assert "torch" in proc.stderr


def test_base_install_commands_need_no_extra(tmp_path):
    """Without any optional package: import floatfmt and the core commands still work."""
    blocked = {"torch", "nbformat", "nbclient", "jupyter_client", "ipykernel", "ipywidgets",
               "IPython", "gmpy2", "selenium", "hypothesis"}
    code = """
    import floatfmt as ff
    assert ff.cast(0.1, "bf16") == 0.10009765625
    from floatfmt.teach.explorer_widget import explorer
    print(type(explorer("bf16", 0.1)).__name__)  # the static explanation without ipywidgets
    from floatfmt.cli import main
    assert main(["show", "0.1", "bf16"]) == 0
    """
    proc = _run(blocked, code)
    assert proc.returncode == 0, proc.stderr
    assert "Explanation" in proc.stdout.splitlines()[0]


def test_extras_table_matches_pyproject():
    """Every package the error points at is installed by the extra it names."""
    from floatfmt.core.optional import EXTRAS
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]")[1].split("\n[")[0]
    declared = {}
    for m in re.finditer(r"^(\w+)\s*=\s*\[(.*?)\]", section, re.S | re.M):
        reqs = re.findall(r'"([A-Za-z0-9_.-]+)', re.sub(r"#.*", "", m[2]))
        declared[m[1]] = {r.lower().replace("-", "_") for r in reqs}
    for extra, packages in EXTRAS.items():
        assert extra in declared, f"extra {extra!r} is not in pyproject.toml"
        for pkg in packages:
            assert pkg.lower() in declared[extra], (extra, pkg)
        # dev installs everything the tests exercise
        assert set(packages) <= declared["dev"] | {"jupyter"}, (extra, packages)


def test_unknown_extra_is_refused():
    from floatfmt.core.optional import optional_import
    with pytest.raises(ValueError, match="unknown extra 'cours'.*'course'"):
        optional_import("json", "cours", "x")
