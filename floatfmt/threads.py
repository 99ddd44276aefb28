"""``floatfmt.threads`` is the documented path of ``floatfmt.core.threads``; its names, re-exported.

The code lives in ``floatfmt/core/threads.py``.  Every public name is here
(``from floatfmt.core.threads import *``), and any other attribute is looked up there.
"""

# relayout: shim (issue 26: the module moved into its layer folder)
from typing import Any as _Any

from .core.threads import *  # noqa: F401,F403
from .core import threads as _module


def __getattr__(name: str) -> _Any:
    return getattr(_module, name)
