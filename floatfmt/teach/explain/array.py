"""The explanation of an array: one row per element (``ff.explain`` of a list or array).

``ExplanationTable`` casts the whole array once (as ``cast`` does), counts the
classes of the stored values, and builds each element's ``Explanation`` on
demand (``t[i]``) from the stored value, so a large array costs one cast.
"""

from __future__ import annotations

import numpy as np

from ...core.cast import cast
from ...core.formats import get_format, hex_code
from .value import Explanation
from .html import table_html
from ..numtext import field_bits, input_text, num_text, signed_sci_text
from ...core.rounding import resolve_mode

__all__ = ["ExplanationTable"]


class ExplanationTable:
    """Compact table for an array input: one row per element (the first
    ``max_rows`` shown), with a class count for the whole array.  ``t[i]`` is
    the full ``Explanation`` of element i (flat index)."""

    COLUMNS = ("#", "input", "stored", "code", "bits", "class", "abs error", "rel error", "ulp error")

    def __init__(self, x, fmt, rounding, overflow, ftz, daz, rng, sr_bits, max_rows):
        self.format = get_format(fmt)
        self._args = (rounding, overflow, ftz, daz)
        arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
        if arr.dtype.kind in "fiub":
            elements = list(arr.reshape(-1))
        else:
            elements = list(np.asarray(x, dtype=object).reshape(-1))
        self.shape = arr.shape
        self.stored = np.asarray(cast(x, self.format, rounding, overflow, ftz, daz, rng,
                                      sr_bits=sr_bits), np.float64)
        self._elements = elements
        self.max_rows = max_rows
        flat = self.stored.reshape(-1)
        a = np.abs(flat)
        self.counts = {"nan": int(np.isnan(flat).sum()), "inf": int(np.isinf(flat).sum()),
                       "zero": int((flat == 0).sum())}
        if self.format.kind == "float":
            self.counts["subnormal"] = int(((a > 0) & (a < self.format.smallest_normal)).sum())
        self.counts["normal"] = flat.size - sum(self.counts.values())
        self._rows = {}

    def __len__(self):
        return len(self._elements)

    def __getitem__(self, i) -> Explanation:
        if i not in self._rows:
            r, o, ftz, daz = self._args
            self._rows[i] = Explanation(self._elements[i], self.format, r, o, ftz, daz,
                                        stored=self.stored.reshape(-1)[i])
        return self._rows[i]

    def rows(self) -> list[list[str]]:
        """Display rows (lists of strings) for the first ``max_rows`` elements."""
        out = []
        for i in range(min(len(self), self.max_rows)):
            e = self[i]
            out.append([str(i), input_text(e.input, short=True), num_text(e.value),
                        "-" if e.code is None else hex_code(e.code, self.format),
                        "-" if e.bits is None else field_bits(e.fields()),
                        e.cls, signed_sci_text(e.abs_error), signed_sci_text(e.rel_error),
                        "n/a" if e.ulp_error is None else f"{e.ulp_error:+.3f}"])
        return out

    def summary(self) -> str:
        """One line: how many values, their shape, the format, and the class counts."""
        more = len(self) - min(len(self), self.max_rows)
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items() if v)
        return (f"{len(self)} values (shape {self.shape}) as {self.format.name}, "
                f"rounding={resolve_mode(self._args[0])}: {counts}"
                + (f"; first {self.max_rows} shown, {more} more" if more else ""))

    def text(self, colour: bool | None = None) -> str:
        """The table as text (``colour`` is accepted for symmetry; rows are plain)."""
        rows = [list(self.COLUMNS)] + self.rows()
        widths = [max(len(r[j]) for r in rows) for j in range(len(self.COLUMNS))]
        lines = [self.summary()]
        for k, r in enumerate(rows):
            lines.append("  ".join(c.rjust(w) if j not in (4, 5) else c.ljust(w)
                                   for j, (c, w) in enumerate(zip(r, widths))).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self):
        return self.text()

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return table_html(self)
