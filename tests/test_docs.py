"""The documentation site: it builds with warnings as errors, every internal link
and anchor resolves, and the generated pages hold what the registry holds.

The build is ``python -m sphinx -W --keep-going -b html docs <out>``, the command
the README gives (``docs/conf.py`` writes the generated pages first).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

import floatfmt as ff
from floatfmt.teach.explorer import explorer_html

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _sitegen():
    spec = importlib.util.spec_from_file_location("floatfmt_docs_sitegen", DOCS / "sitegen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and key == "href" and a.get("rel") == "preconnect"):
                self.links.append(a[key])


def broken_links(site: Path) -> list[str]:
    """Internal links (relative URLs, with or without #anchor) of every HTML file
    under ``site`` that point at a missing file or a missing id."""
    pages = {}
    for p in site.rglob("*.html"):
        if p.relative_to(site).parts[0] in ("_static", "_sources"):  # theme templates, not pages
            continue
        parser = _Links()
        parser.feed(p.read_text(encoding="utf-8", errors="replace"))
        pages[p.resolve()] = parser
    bad = []
    for page, parser in pages.items():
        for link in parser.links:
            u = urlsplit(link)
            if u.scheme or u.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = page if not u.path else (page.parent / unquote(u.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                bad.append(f"{page.relative_to(site.resolve())}: {link} (no such file)")
                continue
            if u.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if unquote(u.fragment) not in ids:
                    bad.append(f"{page.relative_to(site.resolve())}: {link} (no such anchor)")
    return bad


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    for mod in ("sphinx", "myst_nb", "pydata_sphinx_theme"):
        if importlib.util.find_spec(mod) is None:
            if _in_ci():
                pytest.fail(f"CI must build the site, but {mod} is not installed", pytrace=False)
            pytest.skip(f"{mod} is not installed (pip install -e '.[dev]')")
    out = tmp_path_factory.mktemp("site") / "html"
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        str(DOCS), str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "WARNING" not in r.stderr and "ERROR" not in r.stderr, r.stderr[-4000:]
    return out


def test_site_builds_and_internal_links_resolve(site):
    bad = broken_links(site)
    assert bad == [], "\n".join(bad[:30])
    for page in ("index.html", "getting-started.html", "formats.html", "explorer.html", "lessons.html",
                 "changelog.html", "gpu_capture.html", "generated/api.html", "floatfmt-explorer.html"):
        assert (site / page).exists(), page
    for guide in ("choose-format", "round-like-gpu", "emulate-model", "check-gpu", "write-exercise",
                  "add-format"):
        assert (site / "howto" / f"{guide}.html").exists(), guide


def test_link_checker_finds_broken_links(tmp_path):
    (tmp_path / "a.html").write_text('<a href="b.html#there">x</a><a href="missing.html">y</a>'
                                     '<a href="#self">z</a><p id="self"></p><a href="https://x.org/">e</a>')
    (tmp_path / "b.html").write_text('<h1 id="here">b</h1>')
    assert sorted(broken_links(tmp_path)) == ["a.html: b.html#there (no such anchor)",
                                              "a.html: missing.html (no such file)"]


def test_api_page_documents_every_public_name(site):
    html = (site / "generated" / "api.html").read_text(encoding="utf-8")
    missing = [n for n in ff.__all__ if f'id="floatfmt.{n}"' not in html]
    assert missing == []
    assert "&gt;&gt;&gt;" in html  # the doctests are shown


def test_api_page_fails_on_a_name_floatfmt_no_longer_exports(monkeypatch):
    gen = _sitegen()
    monkeypatch.setattr(gen, "_GROUPS", gen._GROUPS + [("Gone", ["no_such_function"])])
    with pytest.raises(ValueError, match="no_such_function"):
        gen.api_page()


def test_tables_are_generated_from_the_registry(site):
    html = (site / "formats.html").read_text(encoding="utf-8")
    for name in ff.formats():
        assert f"<code class=\"docutils literal notranslate\"><span class=\"pre\">{name}</span></code>" in html, name
    for name in ff.tensorcore_models():
        assert f"<span class=\"pre\">{name}</span>" in html, name
    gen = _sitegen()
    rows = gen.format_table().splitlines()[2:]
    assert len(rows) == len(ff.formats())
    fp16 = next(r for r in rows if r.startswith("| `fp16`")).split("|")
    assert [c.strip() for c in fp16[2:6]] == ["16", "5", "10", "15"] and fp16[6].strip() == "65504"


def test_notebooks_are_rendered_with_their_outputs(site):
    lessons = sorted((ROOT / "notebooks").glob("0*.ipynb"))
    assignments = sorted((ROOT / "notebooks" / "assignments").glob("*.ipynb"))
    assert lessons and assignments
    for nb in lessons:
        page = site / "generated" / "notebooks" / f"{nb.stem}.html"
        assert page.exists(), page
    for nb in assignments:
        assert (site / "generated" / "notebooks" / "assignments" / f"{nb.stem}.html").exists(), nb
    bits = (site / "generated" / "notebooks" / "01_bits.html").read_text(encoding="utf-8")
    assert "cell_output" in bits  # outputs shown as committed


def test_site_ships_the_explorer(site):
    assert (site / "floatfmt-explorer.html").read_text(encoding="utf-8") == explorer_html()
