"""Sphinx configuration of the floatfmt documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
(``tests/test_docs.py`` runs exactly this and checks every internal link).

Before reading the sources this file writes ``docs/generated/`` (git-ignored):
the format table and the tensor-core preset table from the registry, the API
page from ``floatfmt.__all__``, copies of the committed notebooks (rendered
as committed, never executed) and the explorer page.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(HERE))
from sitegen import write_generated  # noqa: E402

import floatfmt  # noqa: E402

write_generated(HERE / "generated", ROOT)

project = "floatfmt"
author = "the floatfmt authors"
copyright = "2026, the floatfmt authors"
release = version = floatfmt.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "generated/extra", "**.ipynb_checkpoints"]
root_doc = "index"

# notebooks are shown as committed: with their outputs, never executed here
nb_execution_mode = "off"
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None),
                              ("html", "application/vnd.jupyter.widget-state+json", None)]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Every cross-reference to a floatfmt name must resolve (a renamed function fails the
# build); napoleon turns the prose of "name : description" fields into py:class
# targets, so py:class targets outside floatfmt are not checked.
nitpicky = True
nitpick_ignore_regex = [("py:class", r"(?!floatfmt\.).*")]

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": False}
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_custom_sections = [("Fields", "params_style"), ("Formats", "notes_style"),
                            ("Options", "params_style")]

html_theme = "pydata_sphinx_theme"
html_title = f"floatfmt {release}"
html_extra_path = ["generated/extra"]
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2,
                      "footer_start": ["copyright"], "footer_end": []}
html_static_path: list[str] = []


def _escape_bars(app, what, name, obj, options, lines):
    """Docstrings write |x| for absolute values; reStructuredText reads |...| as a
    substitution.  Escape the bars outside ``literals`` (table lines are kept)."""
    for i, line in enumerate(lines):
        if "|" not in line or line.lstrip().startswith(("|", "+")):
            continue
        parts = line.split("``")
        parts[::2] = [p.replace("|", "\\|") for p in parts[::2]]
        lines[i] = "``".join(parts)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_bars)
