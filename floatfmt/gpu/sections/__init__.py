"""The sections of the GPU capture, and the registry the runner reads.

A section is one module of this package that defines

``NAME``          the name ``--sections`` uses (``casts``, ``tf32`` ...);
``run(ctx)``      does the section's work through the runner's ``Context``
                  (``context.py``): device casts and GEMMs, fixture writing, logging,
                  worker tasks;
``USES_WORKERS``  (optional, default False) whether it submits worker tasks, so the
                  runner starts the process pool only when a chosen section needs it;

plus one line in ``SECTION_MODULES`` below, which also fixes the order they run in.
The runner wraps every section in its own try/except and saves the fixture after it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from .context import Context

__all__ = ["SECTION_MODULES", "Section", "sections", "section_names", "Context"]

# The order sections run in. The sweep goes last: it reuses the overflow policies the
# casts section measured and only submits worker tasks, which run while the runner waits.
SECTION_MODULES = (
    "casts",
    "tf32",
    "gemm_probes",
    "random_gemms",
    "blockscaled",
    "sweep",
    "torch_path",
)


@dataclass(frozen=True)
class Section:
    """One registered section: its name, the function that runs it, whether it needs
    the worker pool, and the first line of its module docstring."""

    name: str
    run: Callable[[Context], None]
    uses_workers: bool
    summary: str


def sections() -> list[Section]:
    """The registered sections in the order they run."""
    out = []
    for module_name in SECTION_MODULES:
        mod = importlib.import_module(f"{__name__}.{module_name}")
        doc = (mod.__doc__ or "").strip().splitlines()
        out.append(Section(mod.NAME, mod.run, bool(getattr(mod, "USES_WORKERS", False)), doc[0] if doc else ""))
    return out


def section_names() -> list[str]:
    """The ``--sections`` names in run order.

    >>> section_names()
    ['casts', 'tf32', 'probes', 'random', 'blockscaled', 'sweep', 'torch']
    """
    return [s.name for s in sections()]
