"""End to end: the coordinator's API over three real center apps (``httpx.ASGITransport``), CSV
data in ``tmp_path``, each center with its signing key and the others' public keys. The centers'
randomness is their own (keyed secrets, the OS), so every release is checked against the raw data
and the federated table against folding the releases the study received; MWU p-values equal the
core's on the raw data."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from scipy import stats

from center_agent.core.config import load_settings as load_center_settings
from center_agent.gate.keys import write_key_pair
from center_agent.main import create_app as create_center
from coordinator.main import create_app
from coordinator.protocols import quantiles as quantiles_protocol
from shared.binning import BinTable
from shared.fields import DP_MAX_EVALUATIONS
from shared.heterogeneity import index_heterogeneity
from shared.hodges_lehmann import hodges_lehmann_table
from shared.mwu import fisher_test, mann_whitney, sum_test, weighted_test
from shared.protocol import BinTableRelease, MWURelease, RefinementRelease
from shared.quantiles.wire import YJMomentsRelease
from shared.quantiles.yj_data import DP_TOL, yj_data_quantiles
from tests.helpers.coordinator import (
    AUTH,
    CENTER_TOKENS,
    SIZES,
    K,
    admin_auth,
    check_built_table,
    check_refined_runs,
    csv_cohort,
    fold_releases,
    make_data,
    settings_for,
    sqlite_url,
)

pytestmark = pytest.mark.anyio
EPSILON_TOTAL = 3.0
EPSILON_PER_REQUEST = 2.0  # the DP-quantile study below asks each center for ε = 2 at once


@pytest.fixture
def centers(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[dict[str, FastAPI]]:
    data = getattr(request, "param", None) or make_data()
    # Each center signs its tables with its own key and trusts the others' (peers/), so each
    # refines the table the one before it signed.
    peers = tmp_path / "peers"
    peers.mkdir()
    for cid in data:
        (peers / f"{cid}.pub").write_text(write_key_pair(tmp_path / f"{cid}.key") + "\n")
    apps = {}
    for cid, (x, y) in data.items():
        settings = load_center_settings(
            center_id=cid,
            k=K,
            tokens=[CENTER_TOKENS[cid]],
            ledger_url=f"sqlite:///{tmp_path / f'{cid}-ledger.sqlite'}",
            signing_key_file=tmp_path / f"{cid}.key",
            peer_keys_dir=peers,
            datasets={"cohort": csv_cohort(tmp_path / f"{cid}.csv", x, y,
                                           epsilon_total=EPSILON_TOTAL,
                                           epsilon_per_request=EPSILON_PER_REQUEST)},
        )
        apps[cid] = create_center(settings)
    yield apps
    for app in apps.values():
        app.state.services.close()


@pytest.fixture
async def coordinator(tmp_path: Path, centers: dict[str, FastAPI]) -> AsyncIterator[Any]:
    transports = {cid: httpx.ASGITransport(app=app) for cid, app in centers.items()}
    app = create_app(settings_for(sqlite_url(tmp_path)), transports=transports)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        yield app, client
    await app.state.services.aclose()


async def run(coordinator: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """The study's view as an admin reads it: with every raw answer, checked below."""
    app, client = coordinator
    created = await client.post("/v1/studies", json=spec, headers=AUTH)
    assert created.status_code == 202, created.text
    await app.state.services.runner.wait(created.json()["id"])
    return dict((await client.get(created.json()["status_url"],
                                  headers=admin_auth(app))).json())


SPEC: dict[str, Any] = {
    "dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
    "analyses": [{"kind": "table"}, {"kind": "mwu"}],
}


async def test_centers_are_listed_healthy_with_budgets(coordinator: Any) -> None:
    _, client = coordinator
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    assert [(c["id"], c["healthy"], c["remaining_epsilon"]) for c in listed] == [
        (cid, True, {"cohort": EPSILON_TOTAL}) for cid in SIZES]


def received(view: dict[str, Any], call: str) -> list[tuple[str, Any]]:
    """(center, response) of every ``call`` in a study's provenance."""
    return [(p["center"], p["response"]) for p in view["provenance"] if p["call"] == call]


def check_table_provenance(view: dict[str, Any], table: dict[str, Any],
                           data: dict[str, Any]) -> None:
    """Every table and refinement the study received, checked against the centers' raw data;
    the study's ``table`` (a result's) is the fold of them."""
    tables = [(c, BinTableRelease.model_validate(r)) for c, r in received(view, "table")]
    refinements = [(c, RefinementRelease.model_validate(r)) for c, r in received(view, "refine")]
    for cid, built in tables:
        check_built_table(built, data[cid])
    for cid, refined in refinements:
        check_refined_runs(refined, data[cid])
    folded, order = fold_releases(tables, refinements)
    assert tuple(table["order"]) == order
    np.testing.assert_array_equal([float(v) for v in table["limits"]], folded.limits)
    np.testing.assert_allclose(table["counts"], folded.counts, rtol=1e-12)


async def test_a_study_over_real_centers(coordinator: Any) -> None:
    view = await run(coordinator, SPEC)
    assert view["status"] == "succeeded", view
    table, mwu = view["result"]["analyses"]
    assert table["order"] == ["alpha", "beta", "gamma"]
    assert table["totals"] == pytest.approx([sum(SIZES.values())] * 2, rel=1e-12)
    data = make_data()
    check_table_provenance(view, table, data)
    # The local releases are exactly the core's local tests on the raw data.
    local = [mann_whitney(x, y) for x, y in data.values()]
    released = [MWURelease.model_validate(p["response"]).to_result()
                for p in view["provenance"] if p["call"] == "mwu"]
    for test in (sum_test, weighted_test, fisher_test):
        name = test(local).method
        assert mwu["tests"][name]["pvalue"] == pytest.approx(test(local).pvalue, rel=1e-12)
        assert mwu["tests"][name]["pvalue"] == pytest.approx(test(released).pvalue, rel=1e-12)
    assert mwu["table"] == table


def stepped() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Values 1..6, each >= K times per group at every center: one distinct value per bin."""
    rng = np.random.default_rng(4)
    data = {}
    for cid, n in SIZES.items():
        per = n // 6
        x = np.repeat(np.arange(1.0, 7.0), per + rng.integers(0, 3, 6))
        y = np.repeat(np.arange(1.0, 7.0), per + rng.integers(0, 3, 6))
        y[: per // 2] += 1
        data[cid] = (x, y)
    return data


@pytest.mark.parametrize("centers", [stepped()], indirect=True)
async def test_one_value_per_bin_table_test_equals_the_pooled_scipy_test(
    coordinator: Any,
) -> None:
    view = await run(coordinator, {**SPEC, "analyses": [{"kind": "mwu", "tests": ["table"]}]})
    assert view["status"] == "succeeded", view
    data = stepped()
    x = np.concatenate([d[0] for d in data.values()])
    y = np.concatenate([d[1] for d in data.values()])
    ref = stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False)
    mwu = view["result"]["analyses"][0]
    assert len(mwu["table"]["limits"]) == 7  # one bin per value
    check_table_provenance(view, mwu["table"], data)
    assert mwu["tests"]["table"]["pvalue"] == pytest.approx(ref.pvalue, rel=1e-12)


async def test_center_answers_relayed_unknown_names_and_refusals(coordinator: Any) -> None:
    # A name no center declares is refused at submission, naming them (nothing is asked).
    _, client = coordinator
    unknown = await client.post("/v1/studies", json={**SPEC, "variable": "age"}, headers=AUTH)
    assert unknown.status_code == 422 and unknown.json()["error"] == "unknown_name"
    assert unknown.json()["unknown"][0]["centers"] == list(SIZES)
    # A noisy MWU asking more ε than one request may spend: the center's refusal, relayed.
    def noisy(epsilon: float) -> dict[str, Any]:
        return {**SPEC, "analyses": [{"kind": "mwu", "tests": ["sum"], "epsilon": epsilon}]}

    capped = await run(coordinator, noisy(EPSILON_PER_REQUEST + 0.5))
    assert capped["status"] == "failed"
    assert (capped["error"]["center"], capped["error"]["kind"]) == ("alpha", "refused")
    assert capped["error"]["center_error"] == "epsilon_cap_exceeded"
    # Within the cap but more than a center has left: refused from its budget.
    assert (await run(coordinator, noisy(EPSILON_PER_REQUEST)))["status"] == "succeeded"
    greedy = await run(coordinator, noisy(EPSILON_TOTAL - EPSILON_PER_REQUEST + 0.5))
    assert greedy["status"] == "failed"
    assert greedy["error"]["kind"] == "refused"
    assert greedy["error"]["center_error"] == "budget_exceeded"
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    assert [c["remaining_epsilon"]["cohort"] for c in listed] == pytest.approx(
        [EPSILON_TOTAL - EPSILON_PER_REQUEST] * 3)  # refusals spend nothing


async def test_a_repeated_study_gets_the_same_table(coordinator: Any) -> None:
    first = await run(coordinator, SPEC)
    second = await run(coordinator, SPEC)
    # The coordinator keeps the table (and the centers cache their releases): the same request
    # gets the same randomized limits, read back from the first study's.
    table = second["result"]["analyses"][0]
    assert table.pop("reused_from") == first["id"]  # the reader's own study: named
    assert table.pop("reused")["centers"] == {c: 1 for c in first["result"]["centers"]}
    assert first["result"]["analyses"][0] == {**table, "reused_from": None, "reused": None}


async def test_dp_boxplots_over_real_centers_spend_what_they_report(coordinator: Any) -> None:
    spec = {**SPEC, "analyses": [{"kind": "dp_boxplot", "epsilon": 0.5, "bounds": [0, 100],
                                  "group": "ctl"}]}
    view = await run(coordinator, spec)
    assert view["status"] == "succeeded", view
    boxes = view["result"]["analyses"][0]
    assert boxes["spent"] == {cid: pytest.approx(1.0) for cid in SIZES}
    assert boxes["pooled"]["centers"] == list(SIZES)
    for cid in SIZES:
        assert boxes["per_center"][cid]["n"] == SIZES[cid] // K * K  # the public size
    # The centers' ledgers agree: 3.0 - 1.0 left each, and a repeated study spends nothing.
    again = await run(coordinator, spec)
    assert again["result"] == view["result"]
    _, client = coordinator
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    assert [c["remaining_epsilon"]["cohort"] for c in listed] == pytest.approx([2.0] * 3)


async def test_quantiles_over_real_centers_cost_nothing(coordinator: Any) -> None:
    spec = {**SPEC, "groups": None, "analyses": [{"kind": "quantiles", "levels": [0.5]}]}
    view = await run(coordinator, spec)
    assert view["status"] == "succeeded", view
    result = view["result"]["analyses"][0]
    pooled = np.concatenate([np.concatenate(d) for d in make_data().values()])
    for estimate in result["estimates"].values():
        assert estimate["all"]["quantiles"][0] == pytest.approx(np.median(pooled), abs=2.0)
    assert result["table_totals"] == pytest.approx([pooled.size])
    _, client = coordinator
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    assert [c["remaining_epsilon"]["cohort"] for c in listed] == pytest.approx([3.0] * 3)


async def test_dp_quantiles_over_real_centers(coordinator: Any) -> None:
    # The centers draw noise from the OS, so the accuracy check needs an ε whose error is
    # far inside the tolerance (at ε = 0.25 the median missed by > 6 about once in 20 runs).
    spec = {**SPEC, "analyses": [{"kind": "dp_quantiles", "epsilon": 2.0, "bounds": [0, 100],
                                  "levels": [0.25, 0.5, 0.75], "group": "trt"}]}
    view = await run(coordinator, spec)
    assert view["status"] == "succeeded", view
    result = view["result"]["analyses"][0]
    assert result["spent"] == {cid: 2.0 for cid in SIZES}
    for cid, (_, y) in make_data().items():
        assert result["per_center"][cid][1] == pytest.approx(np.median(y), abs=6.0)
    _, client = coordinator
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    assert [c["remaining_epsilon"]["cohort"] for c in listed] == pytest.approx([1.0] * 3)


def yj_sums(values: np.ndarray, lmbda: float) -> np.ndarray:
    """Σ sign(x)·log(|x| + 1), Σ YJ(x; λ), Σ YJ(x; λ)² of raw values (scipy's transform)."""
    y = stats.yeojohnson(values, lmbda)
    return np.array([np.sum(np.sign(values) * np.log1p(np.abs(values))), y.sum(), (y * y).sum()])


def yj_sensitivity(lmbda: float, bounds: tuple[float, float]) -> float:
    """How far one record added or removed moves the three sums (L1), for values clipped to
    ``bounds`` with 0 <= a: each term is 0 at 0 and grows with x, so its largest magnitude is
    at b."""
    assert 0.0 <= bounds[0]
    return float(np.sum(np.abs(yj_sums(np.array([bounds[1]]), lmbda))))


async def test_yj_data_is_not_offered_where_it_cannot_work(coordinator: Any) -> None:
    """At ε = 1 over 24 λ evaluations, bounds [0, 100] and these centers' sizes the noise on
    the fitted variance is far above what can work: each group's reason says so and why, and
    nothing is asked or spent."""
    spec = {**SPEC, "analyses": [{"kind": "quantiles", "levels": [0.5],
                                  "estimators": ["yj_data"], "epsilon": 1.0,
                                  "bounds": [0.0, 100.0]}]}
    view = await run(coordinator, spec)
    assert view["status"] == "succeeded", view
    estimates = view["result"]["analyses"][0]["estimates"]["yj_data"]
    for group in SPEC["groups"]:
        assert estimates[group]["quantiles"] is None
        assert estimates[group]["error"].startswith("not offered: at ε = 1 per center")
        assert "nothing was spent" in estimates[group]["error"]
    assert not [p for p in view["provenance"] if p["call"] == "yj_moments"]
    _, client = coordinator
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    assert [c["remaining_epsilon"]["cohort"] for c in listed] == [EPSILON_TOTAL] * 3


async def test_yj_data_over_real_centers_is_the_core_fit_on_the_sums_received(
    coordinator: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The coordinator asks every center, at each λ Brent tries, for ε-DP moment sums of values
    clipped to the public bounds (ε / DP_MAX_EVALUATIONS a call, so at most ε per group); each
    release holds the level's size and its sums under noise of the calibrated scale; the
    estimate is the core's federated fit on the sums received; the ledgers paid what was asked.

    (No accuracy check: at the ε a 3.0 budget allows, noise of scale ~1e5 drowns sums of
    ~1e4, and Brent may end without a fit, recorded as the estimator's reason.)"""
    # Offered whatever the noise, to check the releases and the fit on them (the gate is
    # tested above).
    monkeypatch.setattr(quantiles_protocol, "YJ_DATA_MAX_NOISE_RATIO", math.inf)
    levels = [0.1, 0.5, 0.9]
    epsilon, bounds = 1.0, (0.0, 100.0)  # two groups: at most 2ε of EPSILON_TOTAL
    spec = {**SPEC, "analyses": [{"kind": "quantiles", "levels": levels,
                                  "estimators": ["yj_data"], "epsilon": epsilon,
                                  "bounds": list(bounds)}]}
    view = await run(coordinator, spec)
    assert view["status"] == "succeeded", view
    estimates = view["result"]["analyses"][0]["estimates"]["yj_data"]
    asked = [p for p in view["provenance"] if p["call"] == "yj_moments"]
    per_call = epsilon / DP_MAX_EVALUATIONS
    data = make_data()
    noise: list[float] = []  # each sum's error in units of its Laplace scale
    for g, group in enumerate(SPEC["groups"]):
        calls = [p for p in asked if p["request"]["group"] == group]
        releases: dict[float, dict[str, YJMomentsRelease]] = {}
        for p in calls:
            assert p["request"]["epsilon"] == pytest.approx(per_call, rel=1e-12)
            assert tuple(p["request"]["bounds"]) == bounds
            release = YJMomentsRelease.model_validate(p["response"])
            releases.setdefault(release.lmbda, {})[p["center"]] = release
            values = np.clip(data[p["center"]][g], *bounds)
            assert release.n == values.size
            released = np.array([release.sum_log, release.sum_yj, release.sum_yj_sq])
            scale = yj_sensitivity(release.lmbda, bounds) / per_call
            noise += list(np.abs(released - yj_sums(values, release.lmbda)) / scale)
        assert 0 < len(releases) <= DP_MAX_EVALUATIONS
        assert all(set(by_center) == set(SIZES) for by_center in releases.values())

        def query(lmbda: float, releases: Any = releases) -> list[Any]:
            return [releases[lmbda][cid].to_result() for cid in SIZES]

        try:
            # The values were clipped to the bounds, so the run clamps their quantiles too.
            expected = np.clip(yj_data_quantiles(query, levels,
                                                 max_evaluations=DP_MAX_EVALUATIONS,
                                                 tol=DP_TOL, bounded=True).quantiles, *bounds)
        except (ValueError, RuntimeError) as exc:  # the cap, no positive variance, or a
            # quantile that is not finite: the reason is recorded
            assert estimates[group] == {"quantiles": None, "error": str(exc)}
        else:
            got = [float(v) for v in estimates[group]["quantiles"]]
            assert all(math.isfinite(v) for v in got)
            np.testing.assert_allclose(got, expected, rtol=1e-12)
    # Laplace noise of the calibrated scale: each |error| / scale is Exp(1), so their sum is
    # Gamma(N, 1); it falls outside these limits with probability 2e-7 (N >= 2·3·9: two groups,
    # Brent's three first λs, three centers, three sums).
    n_draws = len(noise)
    assert n_draws >= 54
    assert stats.gamma.ppf(1e-7, n_draws) < sum(noise) < stats.gamma.isf(1e-7, n_draws)
    spent = per_call * len(asked) / len(SIZES)
    assert spent <= 2 * epsilon
    _, client = coordinator
    listed = (await client.get("/v1/centers", headers=AUTH)).json()
    # The ledgers count ε in units of 1e-9, each spend rounded up: at most 1e-9 more a call.
    assert [c["remaining_epsilon"]["cohort"] for c in listed] == pytest.approx(
        [EPSILON_TOTAL - spent] * 3, abs=1e-9 * len(asked) / len(SIZES))


async def test_shift_and_heterogeneity_over_real_centers(coordinator: Any) -> None:
    """The shift is what ``hodges_lehmann_table`` gives on the study's federated table (the
    fold of the releases received, checked against the raw data); the MWU result's Q and I²
    are ``index_heterogeneity`` of the centers' local tests on the raw data, Q by hand."""
    spec = {**SPEC, "analyses": [{"kind": "table"}, {"kind": "mwu", "tests": ["sum"]},
                                 {"kind": "shift", "level": 0.9}]}
    view = await run(coordinator, spec)
    assert view["status"] == "succeeded", view
    table, mwu, shift = view["result"]["analyses"]
    data = make_data()
    check_table_provenance(view, table, data)
    limits = np.array([float(v) for v in table["limits"]])
    expected = hodges_lehmann_table(BinTable(limits, np.array(table["counts"]), K), level=0.9)
    for name in ("estimate_low", "estimate_high", "low_low", "low_high", "high_low",
                 "high_high", "level", "achieved_level", "rank", "n_x", "n_y", "method"):
        assert shift[name] == getattr(expected, name), name
    assert tuple(shift["interval"]) == expected.interval
    assert tuple(shift["binned_interval"]) == expected.binned_interval
    assert shift["estimate"] == expected.estimate and shift["allowance"] == 0.5
    counts = np.array(table["counts"])
    # Three centers' table shares counts out at the limits a later center added (methods
    # §2.5), and says so; the bounds are the shared-out table's (a table of whole counts holds
    # the raw data's estimate and interval: tests/coordinator/test_coord_shift.py).
    assert shift["whole_counts"] == bool(np.array_equal(counts, np.round(counts)))
    local = [mann_whitney(*data[c]) for c in SIZES]
    theta = np.array([0.5 + r.statistic / (2 * r.n_x * r.n_y) for r in local])
    between = mwu["heterogeneity"]
    assert between["centers"] == list(SIZES)
    w = 1 / np.array(between["variances"])
    fixed = np.sum(w * theta) / np.sum(w)
    assert between["estimates"] == pytest.approx(theta, rel=1e-12)
    assert between["statistic"] == pytest.approx(np.sum(w * (theta - fixed) ** 2), rel=1e-10)
    assert between["df"] == 2
    assert between["pvalue"] == pytest.approx(stats.chi2.sf(between["statistic"], 2), rel=1e-10)
    reference = index_heterogeneity(local)
    assert between["i_squared"] == pytest.approx(reference.i_squared, rel=1e-12, abs=1e-15)
    assert between["variances"] == pytest.approx(reference.variances, rel=1e-12)
    assert mwu["heterogeneity_note"] is None
