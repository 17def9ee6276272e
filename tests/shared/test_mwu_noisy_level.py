"""Level of the noisy Mann-Whitney tests under H0: exact null laws against the normal reference.

Issue: a noisy release U + w referred to N(0, 1) through (U + w)/√(V + σ²) is anti-conservative
when the noise is Laplace and not small against √V. ``shared.mwu`` now refers every statistic to
the exact law of N(0, V) + noise (``shared.noisy_null``). This simulation checks the level.

Design. H0: every record N(0, 1) (continuous data), or rounded to integers (ties: about seven
distinct values). Centers of different sizes, 1, 3 or 5 of them (:data:`CONFIGS`). Each center
releases U_l + w_l with the no-ties V_l = n·m·(N + 1)/3 (a public function of the sizes), w_l
drawn by the mechanism's own sampler:

* Laplace with σ_l²/V_l = 0.1, 1, 10, 100 at every center (noise from negligible to dominant);
* the issue's DP settings: Laplace of scale 2·max(n, m)/ε at ε = 0.1 (n = m = 50: σ²/V = 24)
  and ε = 0.5 at five centers;
* Gaussian, raised-cosine and constrained Fisher-optimal noise at σ²/V = 1 and 10.

Tests: each center's local test, the sum, weighted and Fisher tests; two-sided, ``less`` and
``greater``; α = 0.05, 0.01, 0.001. Vectorized: U for all replications at once (from rank sums,
U = 2·R_Y − m(m + 1) − n·m; with ties from counts per value, the same as mid-ranks), critical
values from the laws (p < α ⇔ T beyond the law's ``isf``), Fisher's center p-values from each
center's law (tabulated and interpolated for the laws without a closed form). The first
replications also go through ``mann_whitney``'s ``released_result``, ``sum_test``,
``weighted_test`` and ``fisher_test`` themselves, which must take the same decisions.

Replications: 100 000 per setting, fresh data for each. Tolerance: 4.5 Monte-Carlo standard
errors √(α(1 − α)/R) (at α = 0.001: ±4.5e-4; at 0.05: ±3.1e-3); with the ~1650 rates checked, a
correct test stays inside by chance with probability about 99 %. With ties the rate must be at
most α + 4.5 SE (the public V over-states U's null variance: conservative). The smallest groups
hold 30 records: below that U's own normal approximation (a platykurtic U, excess kurtosis
−6(n² + m² + nm + n + m)/(5nm(N + 1))) makes the tests conservative by a few standard errors
when the noise is small, which is not what is checked here. The normal reference of the old
code is computed on the same draws; it must fail in the noise-dominated Laplace settings (the
control).

Run: ``timeout 1200 .venv/bin/python -m pytest -q -p no:cacheprovider -m slow -s
tests/shared/test_mwu_noisy_level.py`` (prints every rate; about 106 CPU-seconds on a 2-core
machine, docs/assurance.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy import interpolate, special, stats

from shared.mechanisms import FisherOptimal, Gaussian, Laplace, Mechanism
from shared.mwu import (
    MannWhitneyResult,
    fisher_test,
    released_result,
    sum_test,
    weighted_coefficients,
    weighted_test,
)
from shared.noisy_null import NoisyNormal, noise_law_of

REPLICATIONS = 100_000
BATCH = 25_000
SE_TOLERANCE = 4.5
CROSS_CHECKED = 40
SPLINE_POINTS = 401
SPLINE_TOLERANCE = 1e-8
"""Fisher's center p-values for the laws without a closed form come from a cubic spline of
log P on 401 points of [0, max |t|] (about 4.7 standard deviations); its error, h⁴-small,
measured at most 4e-10 in log P (the Fisher-optimal noise at σ²/V = 10, at the range's far
end), is checked to stay below 1e-8 (relative in P): a decision could differ from the exact
law's only for a replication whose Fisher χ² lies within ~1e-8 of a critical value, about 1e-4
such replications expected per setting (the cross-check takes the library's own p-values)."""
ALPHAS = (0.05, 0.01, 0.001)
ALTERNATIVES = ("two-sided", "less", "greater")
CONFIGS: dict[str, tuple[tuple[int, int], ...]] = {
    "1 center": ((50, 50),),
    "3 centers": ((30, 35), (50, 40), (80, 70)),
    "5 centers": ((30, 35), (35, 40), (45, 35), (60, 50), (90, 80)),
}
RATIOS = (0.1, 1.0, 10.0, 100.0)


def null_variance(n: int, m: int) -> float:
    return n * m * (n + m + 1) / 3.0


def null_u(n: int, m: int, reps: int, rng: np.random.Generator, ties: bool) -> np.ndarray:
    """U = Σ sign(Y − X) for ``reps`` samples of H0 (N(0, 1) records; rounded with ties).

    Without ties U = 2·R_Y − m(m + 1) − n·m, R_Y the positions of Y's records in the sorted row
    (one sort per row). With ties (a few integer values) U = Σ_j (#X below Y_j − #X above Y_j)
    from each row's counts per value: a tie counts 0, as with mid-ranks, without sorting.
    Both are exact integers (``test_null_u_is_the_mid_rank_statistic``)."""
    out = []
    for start in range(0, reps, BATCH):
        data = rng.normal(size=(min(BATCH, reps - start), n + m))
        if ties:
            values = np.round(data).astype(np.int64)
            values -= values.min()
            width = int(values.max()) + 1
            cells = (np.arange(len(values)) * width)[:, None] + values  # (row, value) cells
            count_x, count_y = (np.bincount(c.ravel(), minlength=len(values) * width)
                                .reshape(-1, width) for c in (cells[:, :n], cells[:, n:]))
            below = np.cumsum(count_x, axis=1) - count_x
            above = n - below - count_x
            out.append((count_y * (below - above)).sum(axis=1).astype(np.float64))
        else:
            rank_sum = (data.argsort(axis=1) >= n) @ np.arange(1.0, n + m + 1.0)
            out.append(2.0 * rank_sum - m * (m + 1) - n * m)
    return np.concatenate(out)


# -- the noise of a setting ----------------------------------------------------------------------


def laplace_ratio(ratio: float) -> Callable[[int, int], Mechanism]:
    def make(n: int, m: int) -> Mechanism:
        b = math.sqrt(ratio * null_variance(n, m) / 2.0)  # 2b² = ratio·V at sensitivity 2·max
        sensitivity = 2.0 * max(n, m)
        return Laplace(sensitivity / b, sensitivity)
    return make


def laplace_epsilon(epsilon: float) -> Callable[[int, int], Mechanism]:
    return lambda n, m: Laplace(epsilon, 2.0 * max(n, m))


def gaussian_ratio(ratio: float) -> Callable[[int, int], Mechanism]:
    def make(n: int, m: int) -> Mechanism:
        sensitivity = 2.0 * max(n, m)
        return Gaussian(sensitivity, rho=sensitivity**2 / (2.0 * ratio * null_variance(n, m)))
    return make


def fisher_ratio(ratio: float, walls: float) -> Callable[[int, int], Mechanism]:
    """Fisher-optimal noise of variance ratio·V on ±``walls`` standard deviations (3: the
    constraint binds, a ground state; 2: inactive, the raised cosine of that half-width)."""
    def make(n: int, m: int) -> Mechanism:
        rho = ratio * null_variance(n, m)
        return FisherOptimal(rho, walls * math.sqrt(rho))
    return make


SETTINGS: dict[str, tuple[Callable[[int, int], Mechanism], tuple[str, ...]]] = {
    **{f"Laplace σ²/V={r:g}": (laplace_ratio(r), tuple(CONFIGS)) for r in RATIOS},
    "Laplace ε=0.1": (laplace_epsilon(0.1), ("1 center",)),
    "Laplace ε=0.5": (laplace_epsilon(0.5), ("5 centers",)),
    **{f"Gaussian σ²/V={r:g}": (gaussian_ratio(r), ("1 center", "5 centers")) for r in (1, 10)},
    **{f"raised cosine σ²/V={r:g}": (fisher_ratio(r, 2.0), ("1 center", "5 centers"))
       for r in (1, 10)},
    **{f"Fisher-optimal σ²/V={r:g}": (fisher_ratio(r, 3.0), ("1 center", "5 centers"))
       for r in (1, 10)},
}


# -- decisions -----------------------------------------------------------------------------------


def reject(t: np.ndarray, upper: Sequence[float], upper_half: Sequence[float],
           alternative: str) -> np.ndarray:
    """(len(ALPHAS), reps) rejections of a symmetric law with P(T >= upper[i]) = α_i and
    P(T >= upper_half[i]) = α_i/2: p < α ⇔ T beyond the critical value."""
    if alternative == "less":  # upper tail
        return np.array([t >= c for c in upper])
    if alternative == "greater":
        return np.array([t <= -c for c in upper])
    return np.array([np.abs(t) >= c for c in upper_half])


def law_reject(law: NoisyNormal, t: np.ndarray, alternative: str) -> np.ndarray:
    alphas = np.array(ALPHAS)
    return reject(t, law.isf(alphas), law.isf(alphas / 2.0), alternative)


def normal_reject(z: np.ndarray, alternative: str) -> np.ndarray:
    alphas = np.array(ALPHAS)
    return reject(z, stats.norm.isf(alphas), stats.norm.isf(alphas / 2.0), alternative)


def center_log_tails(law: NoisyNormal, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log P(>= t), log P(<= t)) under a center's law; laws without a closed form are
    tabulated at SPLINE_POINTS points of [0, max |t|] and interpolated (cubic, in log P),
    the spline checked against the law between its nodes (:func:`checked_spline`)."""
    if len(law.noises) == 1 and law.noises[0].kind in ("laplace", "gaussian"):
        return law.log_tails(t)
    grid = np.linspace(0.0, float(np.abs(t).max()) * 1.0001, SPLINE_POINTS)
    spline = checked_spline(law, grid)
    log_tail = spline(np.abs(t))
    rest = np.log1p(-np.exp(log_tail))
    return np.where(t >= 0, log_tail, rest), np.where(t >= 0, rest, log_tail)


def checked_spline(law: NoisyNormal, grid: np.ndarray) -> interpolate.CubicSpline:
    """The cubic spline of log P(T > x) on ``grid``, checked at midpoints between its nodes
    (the 20 at each end, where a spline's error is largest, and every 20th between) to within
    SPLINE_TOLERANCE of the law itself."""
    spline = interpolate.CubicSpline(grid, law.logsf(grid))
    mid = 0.5 * (grid[1:] + grid[:-1])
    at = np.r_[np.arange(20), np.arange(20, mid.size - 20, 20), np.arange(mid.size - 20, mid.size)]
    error = np.abs(spline(mid[at]) - law.logsf(mid[at]))
    assert error.max() <= SPLINE_TOLERANCE, (law, error.max())
    return spline


def fisher_reject(upper: np.ndarray, lower: np.ndarray, alternative: str) -> np.ndarray:
    """Fisher's method on center log p-values (rows: centers)."""
    dof = 2 * upper.shape[0]
    p_less = stats.chi2.sf(-2.0 * upper.sum(axis=0), dof)
    p_greater = stats.chi2.sf(-2.0 * lower.sum(axis=0), dof)
    p = {"less": p_less, "greater": p_greater,
         "two-sided": np.minimum(1.0, 2.0 * np.minimum(p_less, p_greater))}[alternative]
    return np.array([p < a for a in ALPHAS])


@dataclass
class Rates:
    """Rejection rates of one setting: (test, alternative) → one rate per α."""

    exact: dict[tuple[str, str], np.ndarray]
    normal: dict[tuple[str, str], np.ndarray]


def simulate(sizes: Sequence[tuple[int, int]], make: Callable[[int, int], Mechanism],
             u: np.ndarray, rng: np.random.Generator) -> Rates:
    mechs = [make(n, m) for n, m in sizes]
    v = np.array([null_variance(n, m) for n, m in sizes])
    noise = np.array([mech.sample(rng, u.shape[1]) for mech in mechs])
    t = u + noise  # (centers, reps): what the centers release
    # the centers as the library states them (laws from the mechanisms, V no-ties)
    protos = [released_result(0.0, float(vl), n, m, noise_law_of(mech))
              for vl, (n, m), mech in zip(v, sizes, mechs, strict=True)]
    laws = [p.null_law for p in protos]
    assert all(law is not None for law in laws)
    total = np.array([p.total_variance for p in protos])
    coef = weighted_coefficients(protos)
    sum_law = NoisyNormal(float(v.sum()), tuple(p.noise for p in protos if p.noise))
    weighted_law = NoisyNormal(float(np.sum(coef**2 * v)),
                               tuple(p.noise.scaled(c) for p, c in zip(protos, coef, strict=True)
                                     if p.noise is not None))
    t_sum, t_weighted = t.sum(axis=0), coef @ t
    tails = [center_log_tails(law, tl) for law, tl in zip(laws, t, strict=True)]
    up = np.array([a for a, _ in tails])
    low = np.array([b for _, b in tails])
    z = t / np.sqrt(total)[:, None]
    z_sum = t_sum / math.sqrt(total.sum())
    w = np.array([n * m for n, m in sizes]) / np.sqrt(total)
    z_weighted = w @ z / math.sqrt(np.sum(w * w))
    exact: dict[tuple[str, str], np.ndarray] = {}
    normal: dict[tuple[str, str], np.ndarray] = {}
    decisions: dict[tuple[str, str], np.ndarray] = {}
    for alt in ALTERNATIVES:
        for i, law in enumerate(laws):
            decisions[(f"center {i + 1}", alt)] = law_reject(law, t[i], alt)
            normal[(f"center {i + 1}", alt)] = normal_reject(z[i], alt).mean(axis=1)
        if len(sizes) > 1:
            decisions[("sum", alt)] = law_reject(sum_law, t_sum, alt)
            decisions[("weighted", alt)] = law_reject(weighted_law, t_weighted, alt)
            decisions[("fisher", alt)] = fisher_reject(up, low, alt)
            normal[("sum", alt)] = normal_reject(z_sum, alt).mean(axis=1)
            normal[("weighted", alt)] = normal_reject(z_weighted, alt).mean(axis=1)
            normal[("fisher", alt)] = fisher_reject(special.log_ndtr(-z), special.log_ndtr(z),
                                                    alt).mean(axis=1)
    for key, rejected in decisions.items():
        exact[key] = rejected.mean(axis=1)
    cross_check(sizes, mechs, v, t, decisions)
    return Rates(exact, normal)


def cross_check(sizes: Sequence[tuple[int, int]], mechs: Sequence[Mechanism], v: np.ndarray,
                t: np.ndarray, decisions: dict[tuple[str, str], np.ndarray]) -> None:
    """The library's own functions take the vectorized decisions on the first replications."""
    for r in range(CROSS_CHECKED):
        for alt in ALTERNATIVES:
            parts: list[MannWhitneyResult] = [
                released_result(float(t[i, r]), float(v[i]), n, m, noise_law_of(mech), alt)
                for i, ((n, m), mech) in enumerate(zip(sizes, mechs, strict=True))
            ]
            got = {(f"center {i + 1}", alt): part.pvalue for i, part in enumerate(parts)}
            if len(sizes) > 1:
                for name, test in (("sum", sum_test), ("weighted", weighted_test),
                                   ("fisher", fisher_test)):
                    got[(name, alt)] = test(parts, alternative=alt).pvalue
            for key, p in got.items():
                for a, decided in zip(ALPHAS, decisions[key][:, r], strict=True):
                    if abs(p / a - 1) > 1e-6:  # not at the boundary itself
                        assert (p < a) == decided, (key, r, p, a)


# -- the simulation, once per module ---------------------------------------------------------------


@dataclass
class Study:
    continuous: dict[tuple[str, str], Rates]  # (setting, config) → rates
    ties: dict[tuple[str, str], Rates]


@pytest.fixture(scope="module")
def study() -> Study:
    rng = np.random.default_rng(20261130)
    out = Study({}, {})
    for config, sizes in CONFIGS.items():
        for ties in (False, True):
            for name, (make, configs) in SETTINGS.items():
                if config not in configs or (ties and not name.startswith("Laplace σ²/V")):
                    continue
                # fresh data for every setting: each setting is an independent experiment
                u = np.array([null_u(n, m, REPLICATIONS, rng, ties) for n, m in sizes])
                rates = simulate(sizes, make, u, rng)
                (out.ties if ties else out.continuous)[(name, config)] = rates
    report(out)
    return out


def report(study: Study) -> None:
    for label, table in (("continuous", study.continuous), ("ties", study.ties)):
        for (name, config), rates in table.items():
            for (test, alt), exact in rates.exact.items():
                before = rates.normal[(test, alt)]
                cells = "  ".join(f"{a:g}: {b:.5f} -> {e:.5f}"
                                  for a, b, e in zip(ALPHAS, before, exact, strict=True))
                print(f"{label:10s} {name:28s} {config:9s} {test:9s} {alt:9s} {cells}")


def standard_error(alpha: float) -> float:
    return math.sqrt(alpha * (1.0 - alpha) / REPLICATIONS)


def off_level(table: dict[Any, Any], too_far: Callable[[float, float], bool]) -> list[Any]:
    """Every (setting, configuration, test, alternative, α, rate) of ``table`` whose rate under
    the exact laws is ``too_far(α, rate)``."""
    return [(name, config, *key, alpha, r)
            for (name, config), rates in table.items()
            for key, rate in rates.exact.items()
            for alpha, r in zip(ALPHAS, rate, strict=True) if too_far(alpha, r)]


@pytest.mark.slow
def test_exact_laws_hold_the_level_with_continuous_data(study: Study) -> None:
    failures = off_level(study.continuous, lambda alpha, r:
                         abs(r - alpha) > SE_TOLERANCE * standard_error(alpha))
    assert not failures, failures


@pytest.mark.slow
def test_exact_laws_are_conservative_with_ties(study: Study) -> None:
    failures = off_level(study.ties, lambda alpha, r:
                         r > alpha + SE_TOLERANCE * standard_error(alpha))
    assert not failures, failures


@pytest.mark.slow
def test_the_normal_reference_fails_where_the_noise_dominates(study: Study) -> None:
    # the control: the old p-values on the same draws reject far too often at α = 0.001
    for ratio in (10.0, 100.0):
        for config in CONFIGS:
            rates = study.continuous[(f"Laplace σ²/V={ratio:g}", config)]
            tests = ["center 1"] if config == "1 center" else ["sum", "weighted", "fisher"]
            for test in tests:
                rate = rates.normal[(test, "two-sided")][2]
                assert rate > 0.001 + 10 * standard_error(0.001), (ratio, config, test, rate)


@pytest.mark.parametrize("ties", [False, True])
def test_null_u_is_the_mid_rank_statistic(ties: bool) -> None:
    """The simulation's U (one sort, or value counts with ties) is Σ sign(Y − X) by brute force
    and 2·R_Y − m(m + 1) − n·m with scipy's mid-ranks, exactly, on the same draws."""
    n, m, reps = 30, 35, 2000
    u = null_u(n, m, reps, np.random.default_rng(7), ties)
    data = np.random.default_rng(7).normal(size=(reps, n + m))
    if ties:
        data = np.round(data)
    ranks = stats.rankdata(data, axis=1)
    np.testing.assert_array_equal(u, 2.0 * ranks[:, n:].sum(axis=1) - m * (m + 1) - n * m)
    signs = np.sign(data[:, n:, None] - data[:, None, :n]).sum(axis=(1, 2))
    np.testing.assert_array_equal(u, signs)
