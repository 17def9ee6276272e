"""Protocols over in-process centers (real center apps): every release the protocols receive
checked against the raw data, the federated table equal to folding those releases, the local
tests equal to the core's on the raw data, and every implausible answer named."""

from __future__ import annotations

import asyncio
import base64
import itertools
import math
from typing import Any

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from scipy import integrate, stats

from coordinator.core.errors import CenterFailure, TooFewCenters
from coordinator.local import InProcessCenter
from coordinator.models import StudySpec
from coordinator.protocols import federated_bin_table, federated_mwu, survey_centers
from coordinator.protocols.parallel import all_or_first_failure
from coordinator.study import run_study
from shared import kinds
from shared.mwu import fisher_test, mann_whitney, sum_test, table_test, weighted_test
from shared.protocol import (
    MWUNoise,
    MWURequest,
    RefinementRequest,
    SignedLimits,
    TableRequest,
)
from tests.helpers.coordinator import (
    SIZES,
    CountingCenter,
    Federations,
    K,
    check_atoms,
    check_built_table,
    check_refined_runs,
    fold_received,
    lying,
    make_data,
    named_implausible,
)

pytestmark = pytest.mark.anyio
GROUPS = ("ctl", "trt")


def counting(federation: Federations, data: Any = None) -> list[CountingCenter]:
    """A new federation (``make_data()``'s by default), each center wrapped to keep what it
    released."""
    return [CountingCenter(p) for p in federation.ports(data)]


Counted = tuple[dict[str, Any], list[CountingCenter]]


@pytest.fixture
def counted(federation: Federations) -> Counted:
    """``make_data()`` and its federation, each center wrapped to keep what it released."""
    data = make_data()
    return data, counting(federation, data)


def check_releases(centers: list[CountingCenter], groups: dict[str, Any]) -> None:
    """Every table and refinement the centers released, against their raw values."""
    for c in centers:
        for built in c.answers["table"]:
            check_built_table(built, groups[c.center_id])
        for refined in c.answers["refine"]:
            check_refined_runs(refined, groups[c.center_id])


async def test_two_group_table_is_the_fold_of_what_the_centers_released(counted: Counted) -> None:
    data, centers = counted
    fed = await federated_bin_table(centers, dataset="cohort", variable="crp", groups=GROUPS,
                                    k=K)
    assert fed.order == ("alpha", "beta", "gamma")  # largest first
    assert [(c.calls["table"], c.calls["refine"]) for c in centers] == [(1, 0), (0, 1), (0, 1)]
    check_releases(centers, data)
    # The coordinator's table is the builder's table with each refinement folded in, in the
    # order of the chain of signed statements.
    reference, order = fold_received(centers)
    assert order == fed.order
    np.testing.assert_array_equal(fed.table.limits, reference.limits)
    np.testing.assert_allclose(fed.table.counts, reference.counts, rtol=1e-12)
    np.testing.assert_allclose(fed.table.totals, [sum(SIZES.values())] * 2)
    assert fed.center_totals == {cid: (float(n), float(n)) for cid, n in SIZES.items()}


async def test_one_group_table_is_k_anonymous_per_release_with_consistent_totals(
    federation: Federations,
) -> None:
    data = make_data(seed=3)
    centers = counting(federation, data)
    fed = await federated_bin_table(centers, dataset="cohort", variable="crp", k=K)
    assert fed.table.n_groups == 1
    assert fed.table.totals[0] == pytest.approx(2 * sum(SIZES.values()), rel=1e-12)
    check_releases(centers, {cid: [np.concatenate([x, y])] for cid, (x, y) in data.items()})
    reference, _ = fold_received(centers)
    np.testing.assert_array_equal(fed.table.limits, reference.limits)
    np.testing.assert_allclose(fed.table.counts, reference.counts, rtol=1e-12)
    assert [c.calls["table"] for c in centers] == [1, 0, 0]
    assert [c.calls["refine"] for c in centers] == [0, 1, 1]


async def test_natural_limits_clip_values_into_the_extreme_bins(counted: Counted) -> None:
    """Natural limits inside the data are public inputs: values beyond them are counted in the
    extreme bins at every center (nothing refused, nothing left out)."""
    data, centers = counted
    lower, upper = 40.0, 60.0  # inside the data: make_data() draws around 50 ± 10
    assert all(x.min() < lower and upper < y.max() for x, y in data.values())
    fed = await federated_bin_table(centers, dataset="cohort", variable="crp", groups=GROUPS,
                                    k=K, lower=lower, upper=upper)
    assert (fed.table.limits[0], fed.table.limits[-1]) == (lower, upper)
    np.testing.assert_allclose(fed.table.totals, [sum(SIZES.values())] * 2)
    check_releases(centers, data)
    reference, _ = fold_received(centers)
    np.testing.assert_allclose(fed.table.counts, reference.counts, rtol=1e-12)


async def test_tables_with_other_limits_are_answered_and_never_isolate_records(
    counted: Counted,
) -> None:
    """Centers no longer refuse a second table whose limits differ (``differencing_refused``):
    each answers every table, coarsened as needed, so that no combination of its releases
    isolates 1..K-1 records. Checked from the raw data over every release each center made."""
    data, centers = counted
    closings: list[tuple[Any, Any, int]] = [
        ("buffer", "buffer", K), (40.0, 60.0, K), ("infinite", "infinite", 2 * K)]
    for lower, upper, k in closings:
        fed = await federated_bin_table(centers, dataset="cohort", variable="crp",
                                        groups=GROUPS, k=k, lower=lower, upper=upper)
        np.testing.assert_allclose(fed.table.totals, [sum(SIZES.values())] * 2)
    for c in centers:
        received = [*c.answers["table"], *c.answers["refine"]]
        assert len(received) == len(closings)
        check_atoms(received, data[c.center_id])
    check_releases(centers, data)


async def test_mwu_p_values_equal_the_core_for_the_same_released_numbers(counted: Counted) -> None:
    data, centers = counted
    fed = await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS,
                              k=K, alternative="less")
    local = [mann_whitney(x, y) for x, y in data.values()]
    for name, test in (("sum", sum_test), ("weighted", weighted_test), ("fisher", fisher_test)):
        expected = test(local, alternative="less")
        assert fed.tests[name].pvalue == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-300)
        assert fed.tests[name].statistic == pytest.approx(expected.statistic, rel=1e-12)
        for part, ref in zip(fed.tests[name].parts, expected.parts, strict=True):
            assert part.weight == pytest.approx(ref.weight, rel=1e-12)
    # The table test runs on the federated table: the fold of the releases received.
    table = table_test(fold_received(centers)[0], alternative="less")
    assert fed.tests["table"].pvalue == pytest.approx(table.pvalue, rel=1e-12)
    assert fed.centers == ("alpha", "beta", "gamma")
    assert list(fed.tests) == ["sum", "weighted", "fisher", "table"]
    # The levels the other way round: each center's stored answer with U negated and the sizes
    # swapped, so "trt greater than ctl" is the same test.
    swapped = await federated_mwu(centers, dataset="cohort", variable="crp",
                                  groups=GROUPS[::-1], k=K, alternative="greater",
                                  tests=["sum", "weighted", "fisher"])
    for cid, release in swapped.releases.items():
        original = fed.releases[cid]
        assert (release.statistic, release.n_x, release.n_y, release.variance) == (
            -original.statistic, original.n_y, original.n_x, original.variance)
    for name in ("sum", "weighted", "fisher"):
        assert swapped.tests[name].pvalue == pytest.approx(fed.tests[name].pvalue, rel=1e-12)


def laplace_sum_sf(t: float, sigma: float, scales: list[float]) -> float:
    """P(S + Σ w_l > t), S ~ N(0, σ²), w_l ~ Laplace(b_l) of distinct scales: the partial
    fractions Π_l 1/(1 − b_l²z²) = Σ_l A_l/(1 − b_l²z²), A_l = Π_{k≠l} b_l²/(b_l² − b_k²), each
    normal-Laplace tail by quadrature over the Laplace noise."""

    def normal_laplace(b: float) -> float:
        def f(w: float) -> float:
            return float(stats.norm.sf((t - w) / sigma)) * math.exp(-abs(w) / b) / (2 * b)
        cuts = [-math.inf, *sorted({0.0, t}), math.inf]
        return math.fsum(integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=800)[0]
                         for lo, hi in itertools.pairwise(cuts))

    weights = [math.prod(b**2 / (b**2 - c**2) for c in scales if c != b) for b in scales]
    return math.fsum(a * normal_laplace(b) for a, b in zip(weights, scales, strict=True))


async def test_noisy_local_releases_use_the_exact_null_laws(federation: Federations) -> None:
    centers = federation.ports()
    epsilon = 0.5
    fed = await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                              tests=["sum", "weighted", "fisher"], epsilon=epsilon)
    releases = list(fed.releases.values())
    assert [(r.n_x, r.n_y) for r in releases] == [(n, n) for n in SIZES.values()]
    # A noisy release's V is the no-ties null variance of U = Σ sign(Y − X), n·m·(N+1)/3,
    # public given the sizes; the noise is Laplace of scale 2·max(n, m)/ε: variance 2·scale²,
    # and the release states that law.
    assert [r.variance for r in releases] == pytest.approx(
        [r.n_x * r.n_y * (r.n_x + r.n_y + 1) / 3 for r in releases], rel=1e-12)
    scales = [2 * max(r.n_x, r.n_y) / epsilon for r in releases]
    assert [r.noise for r in releases] == [MWUNoise(kind="laplace", scale=b) for b in scales]
    assert [r.noise_variance for r in releases] == pytest.approx([2 * b**2 for b in scales])
    for name, test in (("sum", sum_test), ("weighted", weighted_test), ("fisher", fisher_test)):
        expected = test([r.to_result() for r in releases])
        assert fed.tests[name].pvalue == pytest.approx(expected.pvalue, rel=1e-12)
    assert fed.tests["fisher"].df == 2 * len(releases)
    assert fed.tests["sum"].parts[0].variance == pytest.approx(
        releases[0].variance + releases[0].noise_variance)
    # the sum's p-value: Σ(U_l + w_l) under N(0, Σ V_l) + three Laplace laws (an independent
    # reference: the partial fractions of their moment generating function, by quadrature)
    t = sum(r.statistic for r in releases)
    sigma = math.sqrt(sum(r.variance for r in releases))
    upper = laplace_sum_sf(abs(t), sigma, scales)
    assert fed.tests["sum"].pvalue == pytest.approx(min(1.0, 2 * upper), rel=1e-9)
    for center in centers:  # each center's ledger paid ε once
        assert (await center.budget()).datasets["cohort"].spent_epsilon == pytest.approx(epsilon)


async def test_one_distinct_value_per_bin_gives_the_pooled_scipy_test(
    federation: Federations,
) -> None:
    # Integer values 1..6, each held >= K times per group at every center: every bin is one
    # value, nothing is split or shared out, and the table test is the pooled test with ties.
    rng = np.random.default_rng(17)
    data = {}
    for cid, n in (("alpha", 240), ("beta", 180), ("gamma", 120)):
        x = np.repeat(np.arange(1.0, 7.0), n // 6)
        y = np.repeat(np.arange(1.0, 7.0), n // 6 + rng.integers(0, 3, 6))
        y[: n // 12] += 1  # shift part of Y up one level
        data[cid] = (x, y)
    fed = await federated_mwu(federation.ports(data), dataset="cohort", variable="crp",
                              groups=GROUPS, k=K, tests=["table"])
    assert fed.table is not None and fed.table.table.n_bins == 6  # one per value
    x = np.concatenate([d[0] for d in data.values()])
    y = np.concatenate([d[1] for d in data.values()])
    ref = stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=False)
    assert fed.tests["table"].pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    assert fed.releases == {}  # no local release was asked for


async def test_survey_names_a_center_without_the_dataset_variable_or_level(
    federation: Federations,
) -> None:
    good = federation.ports()
    odd = federation.adopt(InProcessCenter(
        "delta", {"other": federation.dataset(*make_data()["gamma"])}))
    with pytest.raises(CenterFailure) as caught:
        await survey_centers([*good, odd], dataset="cohort", variable="crp", groups=GROUPS)
    assert (caught.value.center, caught.value.center_error) == ("delta", "unknown_dataset")
    with pytest.raises(CenterFailure) as caught:
        await survey_centers(good, dataset="cohort", variable="age", groups=GROUPS)
    assert caught.value.center_error == "unknown_variable"
    with pytest.raises(CenterFailure, match="level 'placebo'") as caught:
        await survey_centers(good, dataset="cohort", variable="crp", groups=("ctl", "placebo"))
    # The code a center answers for an undeclared level (a DP analysis of one level relays it).
    assert caught.value.center_error == "unknown_level"
    with pytest.raises(CenterFailure) as caught:
        await good[0].release(kinds.MWU, "cohort",
                              MWURequest(variable="crp", groups=("ctl", "placebo")))
    assert caught.value.center_error == "unknown_level"
    with pytest.raises(CenterFailure) as caught:
        await survey_centers(good, dataset="cohort", variable="crp", groups=GROUPS, k=5)
    assert (caught.value.center, caught.value.kind) == ("alpha", "refused")
    assert "K >= 10" in caught.value.detail
    partial = await survey_centers([*good, odd], dataset="cohort", variable="crp", groups=GROUPS,
                                   allow_partial=True, min_centers=3)
    assert [f.center for f in partial.excluded] == ["delta"] and len(partial.usable) == 3
    with pytest.raises(TooFewCenters) as too_few:
        await survey_centers([*good, odd], dataset="cohort", variable="crp", groups=GROUPS,
                             allow_partial=True, min_centers=4)
    assert too_few.value.body()["usable"] == ["alpha", "beta", "gamma"]


def small_count(release: dict[str, Any]) -> dict[str, Any]:
    release["counts"][0][0] = 3.0
    return release


def inflated(release: dict[str, Any]) -> dict[str, Any]:
    release["counts"][0][-1] += 500.0
    return release


def wrong_k(release: dict[str, Any]) -> dict[str, Any]:
    return {**release, "k": 20}


def small_run(release: dict[str, Any]) -> dict[str, Any]:
    release["runs"][0]["totals"][0] = 4.0
    return release


def misplaced_split(release: dict[str, Any]) -> dict[str, Any]:
    return {**release, "split_bins": [0], "split_limits": [1e9]}


def short_runs(release: dict[str, Any]) -> dict[str, Any]:
    release["runs"][1]["run_of_cell"] = release["runs"][1]["run_of_cell"][:-1]
    return release


def unsigned(release: dict[str, Any]) -> dict[str, Any]:
    return {**release, "signed": None}


def restated(release: dict[str, Any]) -> dict[str, Any]:
    """The signed statement names other limits than the release (its first interior limit
    dropped): the next center would refine a table the coordinator does not hold."""
    limits = release["signed"]["statement"]["limits"]
    release["signed"]["statement"]["limits"] = [limits[0], *limits[2:]]
    return release


def forged(release: dict[str, Any]) -> dict[str, Any]:
    """The statement states the release's limits, but its signature is not the center's: the
    coordinator names this center, not the next one, which would refuse the table."""
    release["signed"]["signature"] = "A" * 86 + "=="
    return release


# Who lies, in which release, how, and what the coordinator then names.
LIES: dict[tuple[str, str], list[tuple[Any, str]]] = {
    ("alpha", "table"): [(forged, "does not verify"), (small_count, "count between 1 and k-1"),
                         (inflated, "more than its declared size"), (wrong_k, "k=20"),
                         (unsigned, "no signed statement"), (restated, "states other limits")],
    ("beta", "refine"): [(forged, "does not verify"), (small_run, "run total"),
                         (misplaced_split, "does not fit the table"),
                         (unsigned, "no signed statement")],
    ("gamma", "refine"): [(short_runs, "does not fit the table"), (wrong_k, "k=20"),
                          (restated, "states other limits")],
}


@pytest.mark.parametrize(
    ("who", "change", "match"),
    [pytest.param(who, {kind: lie}, match, id=f"{who}-{kind}-{lie.__name__}")
     for (who, kind), lies in LIES.items() for lie, match in lies],
)
async def test_implausible_table_releases_are_named(
    federation: Federations, who: str, change: Any, match: str
) -> None:
    await named_implausible(who, match, federated_bin_table(
        lying(federation, who, **change), dataset="cohort", variable="crp", groups=GROUPS, k=K))


@pytest.mark.parametrize(
    ("update", "match"),
    [
        ({"n_x": 5}, "between 1 and k-1"),
        ({"n_y": 10_000}, "exceeds the declared size"),
        ({"variance": 1e12}, "variance"),
        ({"statistic": 1e9}, r"\|U\|"),
        # the noise's variance and its stated law must agree
        ({"noise_variance": 50.0}, "states no noise law"),
        ({"noise": MWUNoise(kind="laplace", scale=3.0)}, "not the variance of the stated"),
        ({"noise_variance": 18.0, "noise": MWUNoise(kind="gaussian", scale=3.0)},
         "not the variance of the stated gaussian"),
    ],
)
async def test_implausible_mwu_releases_are_named(
    federation: Federations, update: dict[str, Any], match: str
) -> None:
    await named_implausible("beta", match, federated_mwu(
        lying(federation, "beta", mwu=update), dataset="cohort", variable="crp", groups=GROUPS,
        k=K, tests=["sum"]))


@pytest.mark.parametrize(
    ("epsilon", "update", "match"),
    [
        # noise where none was asked: every p-value would move towards 1
        (None, {"noise_variance": 18.0, "noise": MWUNoise(kind="laplace", scale=3.0)},
         "noise added where none was asked"),
        # twice the noise asked, or the right variance in another law
        (0.5, {"noise_variance": 2 * 1520.0**2, "noise": MWUNoise(kind="laplace",
                                                                   scale=1520.0)},
         r"not the Laplace\(760\)"),
        (0.5, {"noise_variance": 2 * 760.0**2,
               "noise": MWUNoise(kind="gaussian", scale=760.0 * math.sqrt(2))},
         "not the Laplace"),
        (0.5, {"noise_variance": 0.0, "noise": None}, "not the Laplace"),
    ],
)
async def test_a_release_noised_otherwise_than_asked_is_named(
    federation: Federations, epsilon: float | None, update: dict[str, Any], match: str
) -> None:
    # beta holds 190 records per group: Laplace(2·190/0.5) = Laplace(760) at ε = 0.5.
    assert SIZES["beta"] == 190
    await named_implausible("beta", match, federated_mwu(
        lying(federation, "beta", mwu=update), dataset="cohort", variable="crp", groups=GROUPS,
        k=K, tests=["sum"], epsilon=epsilon))


async def test_partial_studies_leave_a_failing_center_out_and_record_it(
    federation: Federations,
) -> None:
    data = make_data()
    centers = lying(federation, "beta", data, refine=small_run, mwu={"n_x": 5})
    fed = await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                              allow_partial=True, min_centers=2)
    assert fed.centers == ("alpha", "gamma")
    assert {(f.center, f.kind) for f in fed.excluded} == {("beta", "implausible")}
    assert fed.table is not None and fed.table.order == ("alpha", "gamma")
    kept = [data["alpha"], data["gamma"]]
    expected = sum_test([mann_whitney(x, y) for x, y in kept])
    assert fed.tests["sum"].pvalue == pytest.approx(expected.pvalue, rel=1e-12)
    np.testing.assert_allclose(fed.table.table.totals, [SIZES["alpha"] + SIZES["gamma"]] * 2)
    with pytest.raises(TooFewCenters):
        await federated_mwu(centers, dataset="cohort", variable="crp", groups=GROUPS, k=K,
                            allow_partial=True, min_centers=3)


async def test_a_center_too_small_for_k_is_a_refusal(federation: Federations) -> None:
    # 20 ctl and 5 trt records: trt holds fewer than K rows, so it is out of the population
    # (size 0 in /v1/info) and a table of ctl against trt is refused from that public size.
    tiny = (np.arange(20.0), np.arange(20.0, 25.0))
    ports = federation.ports({**make_data(), "tiny": tiny})  # tiny trusts the others' tables
    info = await ports[-1].info()
    assert info.datasets[0].n_by_group == {"ctl": 20, "trt": 0}
    with pytest.raises(CenterFailure) as caught:
        await federated_bin_table(ports, dataset="cohort", variable="crp", groups=GROUPS, k=K)
    assert (caught.value.center, caught.value.kind) == ("tiny", "refused")
    assert caught.value.center_error == "k_anonymity_refused"


def verifies(signed: SignedLimits, public_key: str) -> bool:
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key))
    try:
        key.verify(base64.b64decode(signed.signature), signed.statement.signing_bytes())
    except Exception:
        return False
    return True


async def test_the_in_process_center_is_the_real_center(federation: Federations) -> None:
    """An in-process center answers as a deployed one: true counts in its limits, signed with
    the key it shows in /v1/info, the same limits for every wording of a question, and no
    refinement of limits that no center it trusts signed."""
    data = make_data()
    centers = federation(data)
    alpha, beta = centers["alpha"], centers["beta"]
    x, y = data["beta"]
    info = await beta.info()
    assert info.signing_key == beta.signing_key
    table = await beta.release(kinds.TABLE, "cohort",
                               TableRequest(variable="crp", groups=GROUPS, k=K))
    check_built_table(table, (x, y))
    assert table.signed is not None and verifies(table.signed, beta.signing_key)
    assert not verifies(table.signed, alpha.signing_key)
    # Another wording of the question: the same limits (one canonical table per variable).
    swapped = await beta.release(kinds.TABLE, "cohort",
                                 TableRequest(variable="crp", groups=GROUPS[::-1], k=K))
    assert swapped.limits == table.limits and swapped.counts == table.counts[::-1]
    pooled = await beta.release(kinds.TABLE, "cohort", TableRequest(variable="crp", k=K))
    assert pooled.limits == table.limits
    np.testing.assert_array_equal(pooled.counts[0], np.sum(table.counts, axis=0))

    built = await alpha.release(kinds.TABLE, "cohort",
                                TableRequest(variable="crp", groups=GROUPS, k=K))
    assert built.signed is not None
    request = RefinementRequest(variable="crp", groups=GROUPS, k=K, table=built.signed)
    refined = await beta.release(kinds.REFINE, "cohort", request)
    check_refined_runs(refined, (x, y))
    assert refined.signed is not None and verifies(refined.signed, beta.signing_key)
    assert refined.signed.statement.parent == built.signed.statement.digest()
    # Asked again: the stored answer.
    assert await beta.release(kinds.REFINE, "cohort", request) == refined

    # Refused before any data is read: limits moved by the caller under alpha's signature
    # (which no longer verifies), a table of a center beta does not know, and one of a center
    # that calls itself alpha without alpha's key.
    statement = built.signed.statement
    moved = statement.model_copy(update={"limits": [statement.limits[0], 50.0,
                                                    statement.limits[-1]]})
    forged = [built.signed.model_copy(update={"statement": moved})]
    for name in ("delta", "alpha"):
        other = federation.adopt(InProcessCenter(name, {"cohort": federation.dataset(x, y)}))
        signed = (await other.release(kinds.TABLE, "cohort",
                                      TableRequest(variable="crp", groups=GROUPS, k=K))).signed
        assert signed is not None and signed.statement.center_id == name
        forged.append(signed)
    for signed in forged:
        with pytest.raises(CenterFailure) as caught:
            await beta.release(kinds.REFINE, "cohort",
                               request.model_copy(update={"table": signed}))
        assert (caught.value.kind, caught.value.center_error) == ("refused", "untrusted_table")


# -- analyses at once --------------------------------------------------------------------------


async def test_all_or_first_failure_keeps_order_and_cancels_the_rest() -> None:
    cancelled: list[str] = []

    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    async def fails(message: str, delay: float) -> int:
        await asyncio.sleep(delay)
        raise ValueError(message)

    async def hangs(name: str) -> int:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return 0

    assert await all_or_first_failure([value(1, 0.02), value(2, 0.0), value(3, 0.01)]) == [1, 2, 3]
    with pytest.raises(ValueError, match="first"):
        # The later-listed failure happens first; the first listed one is still the one raised
        # when both have failed by then, and the run that would never end is cancelled.
        await all_or_first_failure([fails("first", 0.0), fails("second", 0.0), hangs("h")])
    assert cancelled == ["h"]


class SlowRefine(CountingCenter):
    """Refinements wait until the test lets them go."""

    def __init__(self, port: Any, gate: asyncio.Event) -> None:
        super().__init__(port)
        self.refine_gate = gate

    async def release(self, kind: Any, dataset: str, request: Any) -> Any:
        if kind is kinds.REFINE:
            await self.refine_gate.wait()
        return await super().release(kind, dataset, request)


async def test_a_study_runs_its_analyses_at_once_and_builds_one_table(
    federation: Federations,
) -> None:
    gate = asyncio.Event()
    centers = [SlowRefine(p, gate) for p in federation.ports()]
    spec = StudySpec.model_validate({
        "dataset": "cohort", "variable": "crp", "groups": list(GROUPS), "k": K,
        "analyses": [{"kind": "table"}, {"kind": "mwu"},
                     {"kind": "quantiles", "levels": [0.5]}],
    })
    study = asyncio.ensure_future(run_study(spec, centers, min_centers=2))
    while not all(c.calls["mwu"] for c in centers):  # the MWU does not wait for the table
        await asyncio.sleep(0.001)
    assert not study.done()
    gate.set()
    result = await study
    assert [a.kind for a in result.analyses] == ["table", "mwu", "quantiles"]
    assert sum(c.calls["table"] for c in centers) == 1  # one table for all three analyses
    assert all(c.calls["refine"] <= 1 for c in centers)
