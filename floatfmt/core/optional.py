"""Optional packages: import one, or fail with the extra that installs it.

The core needs numpy, ml_dtypes and matplotlib only.  A few features need more, and
each such package belongs to one extra of ``pyproject.toml``:

==========  =============================================  ==============================
extra       packages                                       what needs them
==========  =============================================  ==============================
``course``  nbformat, nbclient, jupyter_client, ipykernel  ``floatfmt course release``,
                                                           ``floatfmt course grade``
                                                           (``floatfmt.course.grading``)
``torch``   torch                                          ``floatfmt.torch``
``gpu``     torch (with CUDA)                              ``python -m floatfmt.gpu.capture``
==========  =============================================  ==============================

``optional_import(module, extra, feature)`` is the one place that turns a missing
package into an error: ``MissingExtraError``, a ``ModuleNotFoundError`` whose message
names the feature, the missing package and the command that installs it.  The command
line prints that message on one line and exits with status 2.

>>> optional_import("json", "course", "a doctest").__name__
'json'
>>> try:
...     optional_import("no_such_package_xyz", "course", "floatfmt course release")
... except MissingExtraError as err:
...     print(err)
floatfmt course release needs the package 'no_such_package_xyz', which is not installed: pip install "floatfmt[course]"
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingExtraError", "optional_import"]

#: extra name -> the top-level packages it installs (must match pyproject.toml)
EXTRAS = {
    "course": ("nbformat", "nbclient", "jupyter_client", "ipykernel"),
    "notebooks": ("jupyter", "ipywidgets"),
    "torch": ("torch",),
    "gpu": ("torch",),
}


class MissingExtraError(ModuleNotFoundError):
    """An optional package is missing; ``extra`` is the floatfmt extra that installs it."""

    def __init__(self, message: str, *, name: str, extra: str):
        super().__init__(message, name=name)
        self.extra = extra


def optional_import(module: str, extra: str, feature: str) -> ModuleType:
    """Import ``module`` (a dotted name) and return it; when it (or a package it needs)
    is missing, raise ``MissingExtraError`` saying that ``feature`` needs it and that
    ``pip install "floatfmt[extra]"`` installs it.  ``extra`` must be a key of
    ``EXTRAS`` (a ValueError otherwise, so a typo cannot point users at an extra that
    does not exist)."""
    if extra not in EXTRAS:
        from .names import unknown_name
        raise unknown_name("extra", extra, list(EXTRAS))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        missing = err.name or module
        raise MissingExtraError(
            f"{feature} needs the package {missing.split('.')[0]!r}, which is not installed: "
            f'pip install "floatfmt[{extra}]"', name=missing, extra=extra) from None
