"""The seed's testing simulation (seed 001 §6.4; docs/methods.md §3.8), in-process.

Each replication draws, at center l, X ~ N(α_l, 1) and Y ~ N(α_l + β_l, 1) with
α_l ~ N(0, σ_α²) and β_l ~ N(δ, σ_β²), n_l records per group; then runs the pooled MWU test, the
sum, weighted and Fisher tests on the centers' local statistics, and the MWU test on the
federated K-anonymous table built exactly as the services build it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shared._validation import check_alternative, check_int
from shared.federation import federated_table
from shared.mwu import (
    Alternative,
    fisher_test,
    mann_whitney,
    sum_test,
    table_test,
    weighted_test,
)

CENTER_SIZES: dict[int, tuple[int, ...]] = {
    3: (698, 476, 326),
    5: (492, 368, 276, 208, 156),
    10: (307, 250, 208, 172, 143, 118, 98, 81, 67, 56),
}
"""Per-group sizes of the seed's centers (1500 records per group in all)."""

METHODS = ("pooled", "sum", "weighted", "fisher", "table")


@dataclass(frozen=True)
class MWUSimulation:
    """p-values of every method, one row per replication (columns in :data:`METHODS`)."""

    pvalues: NDArray[np.float64]

    def rejection_rate(self, alpha: float = 0.05) -> dict[str, float]:
        rates = (self.pvalues < alpha).mean(axis=0)
        return {m: float(r) for m, r in zip(METHODS, rates, strict=True)}


def simulate_mwu(
    sizes: tuple[int, ...],
    *,
    delta: float,
    sigma_alpha: float,
    sigma_beta: float,
    replications: int,
    rng: np.random.Generator,
    k: int = 10,
    alternative: Alternative = "two-sided",
) -> MWUSimulation:
    """Run ``replications`` federated studies with per-center sizes ``sizes``."""
    check_int(replications, "replications", 1)
    check_alternative(alternative)
    n_methods = len(METHODS)
    out = np.empty((replications, n_methods))
    sizes_arr = np.asarray(sizes)
    for r in range(replications):
        alpha_l = rng.normal(0.0, sigma_alpha, sizes_arr.size)
        beta_l = rng.normal(delta, sigma_beta, sizes_arr.size)
        xs = [rng.normal(a, 1.0, n) for a, n in zip(alpha_l, sizes, strict=True)]
        ys = [
            rng.normal(a + b, 1.0, n) for a, b, n in zip(alpha_l, beta_l, sizes, strict=True)
        ]
        local = [mann_whitney(x, y, alternative=alternative) for x, y in zip(xs, ys, strict=True)]
        table = federated_table(list(zip(xs, ys, strict=True)), k=k, rng=rng)
        out[r] = (
            mann_whitney(np.concatenate(xs), np.concatenate(ys), alternative=alternative).pvalue,
            sum_test(local, alternative=alternative).pvalue,
            weighted_test(local, alternative=alternative).pvalue,
            fisher_test(local, alternative=alternative).pvalue,
            table_test(table, alternative=alternative).pvalue,
        )
    return MWUSimulation(pvalues=out)
