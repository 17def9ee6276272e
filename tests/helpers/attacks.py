"""The checks every attack, fault and load test ends with: no exact count in 1..K-1 anywhere in
an answer, the ledger's spend read back from the center, and how many released numbers each gap
between raw values holds (one at most)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx
import numpy as np

from tests.helpers.center import AUTH, K

# Keys whose numbers are exact K-anonymous counts: each must be 0 or >= K wherever it appears.
# (DP counts, e.g. a boxplot's outliers or threshold counts, are noisy and paid for: not here.)
EXACT_COUNT_KEYS = frozenset({"counts", "totals", "n_records", "n_by_group", "n_x", "n_y"})


def small_counts(obj: Any, k: int = K, key: str | None = None) -> list[tuple[str, float]]:
    """Every exact count in 1..k-1 found anywhere in a JSON answer, with the key it sits under."""
    found: list[tuple[str, float]] = []
    if isinstance(obj, dict):
        for name, value in obj.items():
            found += small_counts(value, k, name if name in EXACT_COUNT_KEYS else key)
    elif isinstance(obj, list):
        for value in obj:
            found += small_counts(value, k, key)
    elif key is not None and isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if 0 < obj < k:
            found.append((key, obj))
    return found


def budget(client: httpx.Client, dataset: str) -> dict[str, float]:
    r = client.get(f"/v1/budget/{dataset}", headers=AUTH)
    assert r.status_code == 200, r.text
    body = r.json()
    entry = body.get("datasets", {}).get(dataset, body)
    # Only the ε accounts: the entry also carries per-variable release counts.
    return {key: entry[key] for key in ("total_epsilon", "spent_epsilon", "remaining_epsilon")}


def numbers_per_gap(numbers: Iterable[float], raw: Iterable[float]
                    ) -> dict[tuple[float, float], set[float]]:
    """The distinct ``numbers`` inside each gap between consecutive distinct ``raw`` values
    (and below the smallest, above the largest: ±inf ends), by the gap's ends. A number equal
    to a raw value is under the gap ``(v, v)``."""
    values = np.unique(np.asarray(list(raw), dtype=np.float64))
    found: dict[tuple[float, float], set[float]] = {}
    for number in {float(v) for v in numbers if np.isfinite(v)}:
        i = int(np.searchsorted(values, number, side="left"))
        if i < values.size and values[i] == number:
            gap = (number, number)
        else:
            gap = (float(values[i - 1]) if i > 0 else -np.inf,
                   float(values[i]) if i < values.size else np.inf)
        found.setdefault(gap, set()).add(number)
    return found


def crowded_gaps(numbers: Iterable[float], raw: Iterable[float]
                 ) -> dict[tuple[float, float], list[float]]:
    """The gaps of ``raw`` holding more than one of ``numbers`` (a second number in a gap tells
    more about its ends than one random point; docs/privacy.md, "One number per gap"), and the
    numbers equal to a raw value (under ``(v, v)``)."""
    return {gap: sorted(found) for gap, found in numbers_per_gap(numbers, raw).items()
            if len(found) > 1 or gap[0] == gap[1]}


def closest_from_below(numbers: Iterable[float], raw: Iterable[float]) -> dict[float, float]:
    """For each raw value with a number in the gap below it, how close the closest one comes,
    as a fraction of that gap: what an attacker recovers of the value."""
    values = np.unique(np.asarray(list(raw), dtype=np.float64))
    out: dict[float, float] = {}
    for (lo, hi), found in numbers_per_gap(numbers, values).items():
        if np.isfinite(lo) and np.isfinite(hi) and lo < hi:
            out[hi] = (hi - max(found)) / (hi - lo)
    return out


# Fields of a DP release that are public by construction (the ε asked, declared sizes), shown
# as they are by :func:`release_shape`; every other number is noise or data.
PUBLIC_RELEASE_KEYS = frozenset({"epsilon", "n_public", "n"})


def release_shape(value: Any) -> Any:
    """What a DP release shows apart from its noise: its fields and their types, its strings
    (methods, branches) and its public numbers as they are (two releases of one question on
    different data agree here exactly when nothing but the noise tells them apart)."""
    if isinstance(value, dict):
        return {k: value[k] if k in PUBLIC_RELEASE_KEYS else release_shape(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [release_shape(v) for v in value]
    if isinstance(value, bool | str) or value is None:
        return value
    return type(value).__name__


def seen(r: httpx.Response) -> tuple[int, Any]:
    """What a caller sees of one answer: its status and its body (an error whole, a release by
    its :func:`release_shape`)."""
    body = r.json()
    return r.status_code, release_shape(body) if r.status_code == 200 else body
