"""``floatfmt.plot`` is the documented path of ``floatfmt.teach.plot``; its names, re-exported.

The code lives in ``floatfmt/teach/plot.py``.  Every public name is here
(``from floatfmt.teach.plot import *``), and any other attribute is looked up there.
"""

# relayout: shim (issue 26: the module moved into its layer folder)
from typing import Any as _Any

from .teach.plot import *  # noqa: F401,F403
from .teach import plot as _module


def __getattr__(name: str) -> _Any:
    return getattr(_module, name)
