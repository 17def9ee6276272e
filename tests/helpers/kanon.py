"""Independent checks of K-anonymous tables against the raw data (shared by the test modules)."""

from __future__ import annotations

import numpy as np


def bin_counts(limits: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Counts of ``values`` in bins (c_j, c_{j+1}] of ``limits`` (extremes taken as open)."""
    idx = np.searchsorted(limits[1:-1], values, side="left")
    return np.bincount(idx, minlength=limits.size - 1)


def is_k_anonymous(counts: np.ndarray, k: int) -> bool:
    counts = np.asarray(counts)
    return bool(np.all((counts == 0) | (counts >= k)))
