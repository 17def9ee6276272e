"""The checks every attack, fault and load test ends with: no exact count in 1..K-1 anywhere in
an answer, and the ledger's spend read back from the center."""

from __future__ import annotations

from typing import Any

import httpx

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
