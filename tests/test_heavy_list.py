"""tests/heavy_tests.txt names real tests: every ``file::function`` line is a test function
defined in that file, and no line names a file that HEAVY_FILES already marks whole (a
renamed or moved test would otherwise silently rejoin the developer subset's list or drop
out of it)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import HEAVY_FILES, HEAVY_TESTS

TESTS = Path(__file__).parent


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test")}


def test_every_listed_heavy_test_exists():
    missing = []
    for entry in sorted(HEAVY_TESTS):
        file, _, func = entry.partition("::")
        path = TESTS / file
        if not func or not path.is_file() or func not in _functions(path):
            missing.append(entry)
    assert not missing, f"tests/heavy_tests.txt names tests that do not exist: {missing}"


def test_no_listed_test_is_in_a_heavy_file():
    doubled = sorted(e for e in HEAVY_TESTS if e.partition("::")[0] in HEAVY_FILES)
    assert not doubled, f"already heavy as whole files (HEAVY_FILES): {doubled}"


def test_the_hook_marks_listed_and_heavy_file_tests_only():
    import conftest

    class Item:
        def __init__(self, file, name, original=None):
            self.path, self.name, self.originalname, self.marks = TESTS / file, name, original, []

        def add_marker(self, mark):
            self.marks.append(mark.name)

    listed = sorted(HEAVY_TESTS)[0]
    file, _, func = listed.partition("::")
    items = [Item(file, f"{func}[case0]", func),                 # a parametrisation of a listed test
             Item(file, "test_not_listed_anywhere"),              # same file, not listed
             Item(sorted(HEAVY_FILES)[0], "test_anything")]       # a heavy file
    conftest.pytest_collection_modifyitems(None, items)
    assert [it.marks for it in items] == [["heavy"], [], ["heavy"]]
