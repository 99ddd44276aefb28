"""The one comparison every oracle test uses: where two float arrays disagree."""

from __future__ import annotations

import numpy as np


def mismatches(got, want) -> np.ndarray:
    """Boolean mask of disagreements: value, sign of zero, NaN on one side only (NaN
    payloads and signs are not compared)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    return ~(same | both_nan)
