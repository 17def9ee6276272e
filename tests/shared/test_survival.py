"""shared.survival against independent references on the same records: scipy's Kaplan-Meier
(``stats.ecdf`` on ``CensoredData``, its log-log Greenwood interval) and two-sample log-rank
(``stats.logrank``); R's ``survival`` (``survfit`` with ``conf.type = "log-log"``, its median
interval and ``rmean``, ``survdiff`` stratified, ρ = 0 and 1, three arms); a per-record loop for
the Gehan-Breslow and Tarone-Ware weights. With every time on a limit the ``"end"`` convention is
the raw data's Kaplan-Meier estimator, so the tolerances are floating point's (1e-10); the
``"actuarial"`` convention is checked for converging to it as the intervals refine."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from shared.heterogeneity import cochran_q
from shared.survival import (
    LifeTable,
    kaplan_meier,
    life_table,
    life_table_from_records,
    logrank,
    peto_heterogeneity,
    rmst,
    rmst_difference,
    survival_quantile,
)

TOL = 1e-10


def records(rng: np.random.Generator, n: int, scale: float, round_to: float = 1.0,
            censor: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Exponential times rounded up to a grid (ties), each censored with probability
    ``censor``; times > 0."""
    t = np.ceil(rng.exponential(scale, n) / round_to) * round_to
    return t, rng.random(n) >= censor


def on_limits(*arms: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.concatenate([[0.0], np.unique(np.concatenate([t for t, _ in arms]))])


def censored_data(t: np.ndarray, e: np.ndarray) -> stats.CensoredData:
    return stats.CensoredData(uncensored=t[e], right=t[~e])


@pytest.mark.parametrize("seed", range(6))
def test_end_convention_is_the_kaplan_meier_estimator_of_records_on_limits(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t, e = records(rng, int(rng.integers(5, 80)), 10.0)
    limits = on_limits((t, e))
    km = kaplan_meier(life_table_from_records(t, e, limits), censoring="end")
    ref = stats.ecdf(censored_data(t, e)).sf
    np.testing.assert_allclose(km.survival, ref.evaluate(limits), atol=TOL)
    # scipy warns where its log-log band is undefined (S = 0): expected, not a failure.
    undefined = np.any(ref.evaluate(limits) == 0)
    with (pytest.warns(RuntimeWarning, match="undefined") if undefined
          else contextlib.nullcontext()):
        band = ref.confidence_interval(method="log-log")
    # scipy's band is NaN where S is 0 or 1 (its formula is undefined there); ours is [1, 1]
    # before the first event and NaN after S reaches 0.
    low, high = band.low.evaluate(limits), band.high.evaluate(limits)
    inside = (km.survival > 0) & (km.survival < 1)
    np.testing.assert_allclose(km.low[inside], low[inside], atol=TOL)
    np.testing.assert_allclose(km.high[inside], high[inside], atol=TOL)
    assert np.all((km.low[km.survival == 1] == 1) & (km.high[km.survival == 1] == 1))
    # Greenwood's variance by its formula on the raw records, distinct event times.
    for j, c in enumerate(limits[1:], start=1):
        if km.survival[j] == 0:
            continue
        past = np.unique(t[e & (t <= c)])
        terms = [((t == u) & e).sum() / ((t >= u).sum() * ((t >= u).sum() - ((t == u) & e).sum()))
                 for u in past]
        assert km.variance[j] == pytest.approx(km.survival[j] ** 2 * sum(terms), abs=TOL)
    # The number at risk at each limit: the records whose time exceeds it.
    assert km.at_risk.tolist() == [float((t > c).sum()) for c in limits]


@pytest.mark.parametrize("seed", range(6))
def test_two_arm_logrank_is_scipys(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    x = records(rng, int(rng.integers(8, 60)), 10.0)
    y = records(rng, int(rng.integers(8, 60)), 14.0)
    limits = on_limits(x, y)
    tables = [life_table_from_records(*x, limits), life_table_from_records(*y, limits)]
    ours = logrank([tables], censoring="end")
    ref = stats.logrank(censored_data(*x), censored_data(*y))
    # scipy's statistic is the first arm's (O − E)/√V; ours the second's.
    assert ours.zstatistic == pytest.approx(-ref.statistic, rel=1e-10)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    assert ours.statistic == pytest.approx(ref.statistic ** 2, rel=1e-10)
    assert sum(ours.observed) == pytest.approx(x[1].sum() + y[1].sum())
    assert sum(ours.observed) == pytest.approx(sum(ours.expected))


def per_record_weighted(arms: list[tuple[np.ndarray, np.ndarray]], weight: str
                        ) -> tuple[float, float]:
    """(O_2 − E_2, V) of the weighted two-arm log-rank, one distinct event time at a time."""
    t = np.concatenate([a[0] for a in arms])
    e = np.concatenate([a[1] for a in arms])
    g = np.concatenate([np.full(a[0].size, i) for i, a in enumerate(arms)])
    u_sum, v_sum = 0.0, 0.0
    for u in np.unique(t[e]):
        risk = t >= u
        n, n2 = risk.sum(), (risk & (g == 1)).sum()
        d, d2 = (e & (t == u)).sum(), (e & (t == u) & (g == 1)).sum()
        w = {"gehan": n, "tarone-ware": math.sqrt(n)}[weight]
        u_sum += w * (d2 - n2 * d / n)
        if n > 1:
            v_sum += w * w * d * (n - d) / (n - 1) * (n2 / n) * (1 - n2 / n)
    return u_sum, v_sum


@pytest.mark.parametrize("weight", ["gehan", "tarone-ware"])
def test_gehan_and_tarone_ware_weights_against_a_per_record_loop(weight: str) -> None:
    rng = np.random.default_rng(7)
    x, y = records(rng, 45, 10.0), records(rng, 38, 16.0)
    limits = on_limits(x, y)
    tables = [life_table_from_records(*x, limits), life_table_from_records(*y, limits)]
    ours = logrank([tables], weights=weight, censoring="end")  # type: ignore[arg-type]
    u, v = per_record_weighted([x, y], weight)
    assert ours.zstatistic == pytest.approx(u / math.sqrt(v), rel=1e-10)
    assert ours.variance[0][0] == pytest.approx(v, rel=1e-10)
    assert ours.hazard_ratio is None  # Peto's ratio is the unweighted test's


R_SCRIPT = r"""
suppressMessages({library(survival); library(jsonlite)})
cases <- fromJSON(Sys.getenv("CASES"), simplifyVector = FALSE)
out <- lapply(cases, function(cs) {
  df <- data.frame(time = unlist(cs$time), status = unlist(cs$status), arm = unlist(cs$arm),
                   center = unlist(cs$center))
  one <- df[df$arm == 0, ]
  f <- survfit(Surv(time, status) ~ 1, data = one, conf.type = "log-log")
  q <- quantile(f, 0.5)
  tab <- summary(f, rmean = cs$horizon)$table
  strat <- survdiff(Surv(time, status) ~ arm + strata(center), data = df)
  peto <- survdiff(Surv(time, status) ~ arm + strata(center), data = df, rho = 1)
  pooled <- survdiff(Surv(time, status) ~ arm, data = df)
  list(median = unname(c(q$quantile, q$lower, q$upper)),
       rmean = unname(c(tab[["rmean"]], tab[["se(rmean)"]])),
       strat = strat$chisq, strat_obs = unname(rowSums(as.matrix(strat$obs))),
       strat_exp = unname(rowSums(as.matrix(strat$exp))),
       peto = peto$chisq, pooled = pooled$chisq)
})
cat(toJSON(out, digits = NA, auto_unbox = TRUE))
"""


def r_survival() -> bool:
    if shutil.which("Rscript") is None:
        return False
    ran = subprocess.run(["Rscript", "--vanilla", "-e",
                          "quit(status = !all(sapply(c('survival', 'jsonlite'), "
                          "requireNamespace, quietly = TRUE)))"], capture_output=True)
    return ran.returncode == 0


@pytest.mark.process
@pytest.mark.skipif(not r_survival(), reason="R with survival and jsonlite is not installed "
                    "(.ci/run installs r-cran-survival)")
def test_against_r_survival(tmp_path: Path) -> None:
    """Median and its interval, RMST and its SE (one arm), the stratified log-rank with ρ = 0
    and 1 and the pooled one, on three-center, two-arm and three-arm data with ties."""
    rng = np.random.default_rng(2026)
    cases, built = [], []
    for case in range(5):
        arms = 2 if case < 4 else 3
        strata: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for _ in range(3):
            strata.append([records(rng, int(rng.integers(6, 40)), 8.0 + 4 * a)
                           for a in range(arms)])
        every = [a for s in strata for a in s]
        horizon = float(np.quantile(np.concatenate([t for t, _ in every]), 0.6))
        cases.append({
            "time": [v for s in strata for t, _ in s for v in t.tolist()],
            "status": [int(v) for s in strata for _, e in s for v in e],
            "arm": [a for s in strata for a, (t, _) in enumerate(s) for _ in t],
            "center": [c for c, s in enumerate(strata) for t, _ in s for _ in t],
            "horizon": horizon})
        built.append((strata, horizon))
    ran = subprocess.run(["Rscript", "--vanilla", "-e", R_SCRIPT], capture_output=True,
                         text=True, env={"CASES": json.dumps(cases), "PATH": "/usr/bin:/bin"},
                         timeout=300)
    assert ran.returncode == 0, ran.stderr
    answers = json.loads(ran.stdout)
    for (strata, horizon), r in zip(built, answers, strict=True):
        limits = on_limits(*[a for s in strata for a in s])
        tables = [[life_table_from_records(t, e, limits) for t, e in s] for s in strata]
        first = [a for s in strata for a in s[:1]]
        arm0 = life_table_from_records(np.concatenate([t for t, _ in first]),
                                       np.concatenate([e for _, e in first]), limits)
        q = survival_quantile(kaplan_meier(arm0, censoring="end"))
        assert [q.estimate, q.low, q.high] == pytest.approx(
            [math.inf if v in (None, "NA") else v for v in r["median"]], rel=TOL)
        mu = rmst(arm0, horizon, censoring="end")
        assert [mu.estimate, mu.se] == pytest.approx(r["rmean"], rel=1e-9)
        strat = logrank(tables, censoring="end")
        assert strat.statistic == pytest.approx(r["strat"], rel=1e-9)
        assert list(strat.observed) == pytest.approx(r["strat_obs"], rel=1e-12)
        assert list(strat.expected) == pytest.approx(r["strat_exp"], rel=1e-9)
        assert strat.strata == 3 and strat.df == len(tables[0]) - 1
        peto = logrank(tables, censoring="end", weights="peto")
        assert peto.statistic == pytest.approx(r["peto"], rel=1e-9)
        pooled_tables = [life_table(limits, sum(s[a].events for s in tables),
                                    sum(s[a].censored for s in tables))
                         for a in range(len(tables[0]))]
        assert logrank([pooled_tables], censoring="end").statistic == pytest.approx(
            r["pooled"], rel=1e-9)


def test_peto_hazard_ratio_and_heterogeneity_by_their_formulas() -> None:
    rng = np.random.default_rng(11)
    strata = [[records(rng, 50, 10.0), records(rng, 50, 15.0)] for _ in range(3)]
    limits = on_limits(*[a for s in strata for a in s])
    tables = [[life_table_from_records(*a, limits) for a in s] for s in strata]
    result = logrank(tables, censoring="end")
    oe = result.observed[1] - result.expected[1]
    v = result.variance[0][0]
    assert result.hazard_ratio == pytest.approx(math.exp(oe / v), rel=1e-12)
    low, high = result.hazard_ratio_interval  # type: ignore[misc]
    assert math.log(high) - math.log(low) == pytest.approx(2 * 1.959963984540054 / math.sqrt(v))
    assert result.hazard_ratio < 1  # the second arm lives longer
    per = [logrank([s], censoring="end") for s in tables]
    expected = cochran_q([math.log(p.hazard_ratio) for p in per],  # type: ignore[arg-type]
                         [1 / p.variance[0][0] for p in per])
    between = peto_heterogeneity(tables, censoring="end")
    assert between.statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert between.df == 2


def test_actuarial_tends_to_the_kaplan_meier_estimator_as_intervals_refine() -> None:
    """On 2,000 records (exponential, 30 % censored), the life table on ever finer equal
    intervals: the sup distance to the raw Kaplan-Meier curve at the limits and the RMST gap
    shrink (not monotonically: an interval's end may fall where the curves happen to meet);
    at 400 intervals both are below 0.005 (the raw curve's SE is about 0.012)."""
    rng = np.random.default_rng(5)
    t, e = rng.exponential(10.0, 2000), rng.random(2000) >= 0.3
    raw = stats.ecdf(censored_data(t, e)).sf
    top = float(t.max())
    fine_limits = np.concatenate([[0.0], np.sort(t)])
    raw_rmst = rmst(life_table_from_records(t, e, np.unique(fine_limits)), 20.0,
                    censoring="end").estimate
    gaps = []
    for bins in (5, 20, 100, 400):
        limits = np.linspace(0.0, top, bins + 1)
        km = kaplan_meier(life_table_from_records(t, e, limits))
        sup = float(np.max(np.abs(km.survival - raw.evaluate(limits))))
        gaps.append((sup, abs(rmst(life_table_from_records(t, e, limits), 20.0).estimate
                              - raw_rmst)))
    sups, rmsts = zip(*gaps, strict=True)
    assert sups[-1] < 0.005 and sups[-1] < sups[0] / 5
    assert rmsts[-1] < 0.005 * 20
    assert sups[0] < 0.05  # five intervals are coarse, not wrong


def test_edges_no_events_every_death_and_tiny_arms() -> None:
    none = life_table([0, 5, 10], [0, 0], [3, 4])
    km = kaplan_meier(none)
    assert km.survival.tolist() == [1, 1, 1] and km.low.tolist() == [1, 1, 1]
    assert survival_quantile(km).estimate == math.inf
    assert rmst(none, 10).estimate == pytest.approx(10.0) and rmst(none, 10).se == 0.0
    every = life_table([0, 1, 2], [2, 3], [0, 0])
    km = kaplan_meier(every, censoring="end")
    assert km.survival.tolist() == pytest.approx([1, 0.6, 0])
    assert math.isnan(km.low[-1]) and math.isnan(km.variance[-1])
    assert survival_quantile(km).estimate == 2.0
    # n = 3 per arm: the test runs; identical arms give χ² = 0, p = 1.
    a = life_table([0, 1, 2, 3], [1, 1, 1], [0, 0, 0])
    same = logrank([[a, a]])
    assert same.statistic == pytest.approx(0.0, abs=1e-15) and same.pvalue == pytest.approx(1.0)
    # Fractional counts (shared out at a limit) are weights.
    half = life_table([0, 1, 2], [1.5, 2.5], [0.5, 0.5])
    assert kaplan_meier(half).survival[1] == pytest.approx(1 - 1.5 / (5 - 0.25))


def test_actuarial_life_table_by_its_formula() -> None:
    table = life_table([0, 10, 20, 30], [5, 4, 2], [2, 3, 4])
    n = np.array([20, 13, 6]) - np.array([2, 3, 4]) / 2
    s = np.cumprod(1 - np.array([5, 4, 2]) / n)
    km = kaplan_meier(table)
    np.testing.assert_allclose(km.survival[1:], s, rtol=1e-14)
    assert km.at(15.0) == pytest.approx(math.sqrt(s[0] * s[1]))  # a constant hazard within
    # RMST: ∫ of the log-linear curve, by quadrature on a fine grid.
    grid = np.linspace(0.0, 25.0, 200_001)
    assert rmst(table, 25.0).estimate == pytest.approx(
        float(np.trapezoid(km.at(grid), grid)), rel=1e-9)
    # The median: the log-linear crossing of 0.5.
    j = int(np.nonzero(s <= 0.5)[0][0])
    prev = 1.0 if j == 0 else s[j - 1]
    expected = 10 * j + 10 * math.log(prev / 0.5) / math.log(prev / s[j])
    assert survival_quantile(km).estimate == pytest.approx(expected)
    assert km.at(np.array([expected]))[0] == pytest.approx(0.5)


def test_rmst_difference_adds_the_variances() -> None:
    a = life_table([0, 10, 20, 30], [5, 4, 2], [2, 3, 4])
    b = life_table([0, 10, 20, 30], [2, 3, 2], [3, 3, 7])
    d = rmst_difference(a, b, 30.0)
    ra, rb = rmst(a, 30.0), rmst(b, 30.0)
    assert d.estimate == pytest.approx(rb.estimate - ra.estimate)
    assert d.se == pytest.approx(math.hypot(ra.se, rb.se))
    assert d.pvalue == pytest.approx(2 * stats.norm.sf(abs(d.estimate) / d.se))
    assert d.low < d.estimate < d.high


@pytest.mark.parametrize(("call", "match"), [
    (lambda: life_table([0], [], []), "at least two"),
    (lambda: life_table([0, 2, 1], [1, 1], [0, 0]), "increase"),
    (lambda: life_table([0, 1, 2], [1], [0, 0]), "one count per interval"),
    (lambda: life_table([0, 1, 2], [1, -1], [0, 0]), ">= 0"),
    (lambda: life_table([0, 1, 2], [0, 0], [0, 0]), "no record"),
    (lambda: life_table([0, 1, math.inf], [1, 1], [0, 0]), "NaN or infinite"),
    (lambda: life_table_from_records([0.0, 1.0], [1, 0], [0, 2]), "must lie in"),
    (lambda: life_table_from_records([1.0, 1.0], [1, 2], [0, 2]), "boolean or 0/1"),
    (lambda: kaplan_meier(life_table([0, 1], [1], [0]), censoring="middle"), "censoring"),
    (lambda: rmst(life_table([0, 1], [1], [0]), 2.0), "horizon"),
    (lambda: logrank([[life_table([0, 1], [1], [0])]]), ">= 2"),
    (lambda: logrank([[life_table([0, 1], [1], [0]), life_table([0, 2], [1], [0])]]),
     "share their limits"),
    (lambda: logrank([]), "non-empty"),
    (lambda: logrank([[life_table([0, 1, 2], [0, 1], [0, 0]),
                       life_table([0, 1, 2], [0, 0], [1, 0])]], censoring="end"), "singular"),
    (lambda: logrank([[life_table([0, 1], [1], [0])] * 2], weights="wilcoxon"), "weights"),
])
def test_bad_input_is_refused_with_what_to_fix(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]


def test_a_life_table_is_validated_once() -> None:
    with pytest.raises(ValueError, match="LifeTable"):
        kaplan_meier((np.array([0, 1]), np.array([1]), np.array([0])))  # type: ignore[arg-type]
    assert isinstance(life_table([0, 1], [1], [0]), LifeTable)
