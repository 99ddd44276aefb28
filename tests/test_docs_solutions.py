"""The public site never carries the worked solutions; a teacher build
(FLOATFMT_DOCS_SOLUTIONS=1) does.  Fast: runs docs/sitegen.py's copy step, not Sphinx."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sitegen():
    spec = importlib.util.spec_from_file_location("floatfmt_docs_sitegen_sol", ROOT / "docs" / "sitegen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_public_site_copies_no_solutions_and_says_where_they_are(tmp_path, monkeypatch):
    sg = _sitegen()
    monkeypatch.setattr(sg, "write_explorer", lambda path: None)
    monkeypatch.setattr(sg, "api_page", lambda: "# API\n")
    # a teacher build first, then a public build into the same folder: nothing may linger
    monkeypatch.setenv(sg.SOLUTIONS_ENV, "1")
    sg.write_generated(tmp_path, ROOT)
    sols = list((tmp_path / "notebooks" / "assignments" / "solutions").glob("*.ipynb"))
    assert len(sols) == len(list((ROOT / "notebooks" / "assignments" / "solutions").glob("*.ipynb"))) > 0
    assert "solutions/*" in (tmp_path / "solutions_toc.md").read_text()
    monkeypatch.delenv(sg.SOLUTIONS_ENV)
    sg.write_generated(tmp_path, ROOT)
    assert not any("solutions" in p.relative_to(tmp_path).parts for p in tmp_path.rglob("*.ipynb"))
    assert list((tmp_path / "notebooks" / "assignments").glob("*.ipynb"))
    toc = (tmp_path / "solutions_toc.md").read_text()
    assert "toctree" not in toc and "not on this site" in toc


def test_lessons_page_lists_solutions_only_through_the_generated_include():
    text = (ROOT / "docs" / "lessons.md").read_text()
    assert "assignments/solutions" not in text and "generated/solutions_toc.md" in text
