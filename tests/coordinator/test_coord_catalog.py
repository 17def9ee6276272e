"""Discovery, names checked at submission and the dry run, over in-process centers (the analyst
API through ``httpx.ASGITransport``; docs/coordinator.md, "Catalog" and "Dry run").

The catalog shows what each center publishes and nothing finer (sizes rounded down to its K,
even from a center that sends them unrounded); a center that does not answer is named with its
problem. A spec naming what a center does not declare is refused naming the name and the
centers lacking it, and no center released anything (their ledgers' audit trails are empty). A
dry run spends nothing, and what it says a study spends is what the centers' ledgers then
spend, per center.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from center_agent.audit import AuditQuery
from center_agent.audit import read as read_center_audit
from coordinator.core.errors import CenterFailure
from coordinator.main import create_app
from shared.protocol import Budget, CenterInfo
from tests.helpers.coordinator import (
    AUTH,
    CountingCenter,
    Federations,
    K,
    settings_for,
    sqlite_url,
)

pytestmark = pytest.mark.anyio

BASE: dict[str, Any] = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K}
RELEASE_CALLS = {"table", "refine", "mwu", "dp_boxplot", "dp_extremes", "dp_tree_histogram",
                 "dp_threshold_counts", "dp_quantiles", "yj_moments"}
# One unit of a center's ledger (center_agent.db.EPSILON_UNIT); each release rounds up to it.
LEDGER_UNIT = 1e-9


class Down(CountingCenter):
    """A center whose info and budget cannot be had."""

    async def info(self) -> CenterInfo:
        self.calls["info"] += 1
        raise CenterFailure(self.center_id, "unreachable", "connection refused")

    async def budget(self) -> Budget:
        self.calls["budget"] += 1
        raise CenterFailure(self.center_id, "unreachable", "connection refused")


class Unrounded(CountingCenter):
    """A center that publishes its sizes finer than its K (by mistake)."""

    async def info(self) -> CenterInfo:
        info = await super().info()
        datasets = [d.model_copy(update={"n_records": d.n_records + 7,
                                         "n_by_group": {g: n + 3 for g, n in d.n_by_group.items()}})
                    for d in info.datasets]
        return info.model_copy(update={"datasets": datasets})


class Coordinator:
    def __init__(self, app: Any, client: httpx.AsyncClient, centers: Mapping[str, Any]) -> None:
        self.app, self.client, self.centers = app, client, centers

    async def post(self, spec: Mapping[str, Any], **params: Any) -> httpx.Response:
        return await self.client.post("/v1/studies", json=dict(spec), params=params, headers=AUTH)

    async def run(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        created = await self.post(spec)
        assert created.status_code == 202, created.text
        study_id = created.json()["id"]
        await self.app.state.services.runner.wait(study_id)
        view = await self.client.get(f"/v1/studies/{study_id}", headers=AUTH)
        return dict(view.json())

    async def spent(self) -> dict[str, float]:
        """ε each center's own ledger has spent on ``cohort``."""
        out = {}
        for cid, center in self.centers.items():
            budget = (await center.port.budget()).datasets["cohort"]
            out[cid] = budget.spent_epsilon
        return out


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, centers: Mapping[str, Any],
                  **settings: Any) -> AsyncIterator[Coordinator]:
    app = create_app(settings_for(sqlite_url(tmp_path), centers=tuple(centers), **settings),
                     centers=centers)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as client:
        try:
            yield Coordinator(app, client, centers)
        finally:
            await app.state.services.aclose()


def counted(federation: Federations, data: Any = None, **wrappers: Any) -> dict[str, Any]:
    return {cid: wrappers[cid](port) if cid in wrappers else CountingCenter(port)
            for cid, port in federation(data).items()}


def released(center: CountingCenter) -> set[str]:
    return {call for call, n in center.calls.items() if n and call in RELEASE_CALLS}


def center_audit(center: CountingCenter) -> list[Any]:
    """The audit records of the center's own ledger (releases, cached answers, refusals)."""
    engine = center.port.app.state.services.store.engine
    return list(read_center_audit(engine, AuditQuery()).records)


# -- the catalog -----------------------------------------------------------------------------


async def test_the_catalog_is_what_the_centers_publish_and_never_finer(
        tmp_path: Path, federation: Federations) -> None:
    rng = np.random.default_rng(7)
    # Sizes that are no multiple of K: the centers publish them rounded down.
    data = {cid: (rng.normal(50, 10, n), rng.normal(55, 10, n + 4))
            for cid, n in {"alpha": 263, "beta": 197, "gamma": 121}.items()}
    centers = counted(federation, data, gamma=Unrounded)
    async with serving(tmp_path, centers) as coord:
        await coord.run({**BASE, "analyses": [{"kind": "dp_quantiles", "epsilon": 0.5,
                                               "bounds": [0, 100], "levels": [0.5]}]})
        answer = await coord.client.get("/v1/catalog", headers=AUTH)
        assert answer.status_code == 200, answer.text
        catalog = answer.json()
        assert [c["id"] for c in catalog["centers"]] == ["alpha", "beta", "gamma"]
        assert all(c["problem"] is None and c["k"] == K for c in catalog["centers"])
        [cohort] = catalog["datasets"]
        assert (cohort["name"], cohort["variables"], cohort["levels"]) == (
            "cohort", ["crp"], ["ctl", "trt"])
        for entry in cohort["centers"]:
            cid = entry["center"]
            x, y = data[cid]
            rounded = {"ctl": x.size // K * K, "trt": y.size // K * K}
            assert entry["n_by_group"] == rounded  # gamma sent +3: shown rounded down anyway
            assert entry["n_records"] == (x.size + y.size) // K * K
            assert all(n % K == 0 for n in [entry["n_records"], *entry["n_by_group"].values()])
            assert (entry["group_column"], entry["k"], entry["paused"]) == ("group", K, False)
            budget = (await centers[cid].port.budget()).datasets["cohort"]
            assert entry["remaining_epsilon"] == budget.remaining_epsilon
            assert entry["remaining_epsilon"] == pytest.approx(1e6 - 0.5)
            if cid != "gamma":  # what the center itself publishes
                info = await centers[cid].port.info()
                assert entry["n_by_group"] == info.datasets[0].n_by_group
        # Every analyst may read it; nobody without a token.
        assert (await coord.client.get("/v1/catalog")).status_code == 401


async def test_a_center_that_does_not_answer_is_named_in_the_catalog(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation, beta=Down)
    async with serving(tmp_path, centers) as coord:
        answer = await coord.client.get("/v1/catalog", headers=AUTH)
        assert answer.status_code == 200, answer.text
        catalog = answer.json()
        beta = next(c for c in catalog["centers"] if c["id"] == "beta")
        assert beta["k"] is None
        assert beta["problem"] == {"kind": "unreachable", "detail": "connection refused"}
        assert [e["center"] for e in catalog["datasets"][0]["centers"]] == ["alpha", "gamma"]


async def test_concurrent_catalog_readers_share_one_round(
        tmp_path: Path, federation: Federations) -> None:
    import asyncio

    centers = counted(federation)
    gate = asyncio.Event()
    for center in centers.values():
        center.gate = gate
    async with serving(tmp_path, centers) as coord:
        asks = [asyncio.ensure_future(coord.client.get("/v1/catalog", headers=AUTH))
                for _ in range(5)]
        await asyncio.sleep(0.2)
        gate.set()
        answers = await asyncio.gather(*asks)
    assert all(a.status_code == 200 for a in answers)
    assert all(c.calls["info"] == 1 and c.calls["budget"] == 1 for c in centers.values())


# -- names checked at submission -------------------------------------------------------------


@pytest.mark.parametrize(("change", "what", "name", "field"), [
    ({"variable": "crpx"}, "variable", "crpx", "body.variable"),
    ({"dataset": "cohortx"}, "dataset", "cohortx", "body.dataset"),
    ({"groups": ["ctl", "placebo"]}, "group level", "placebo", "body.groups"),
    ({"analyses": [{"kind": "dp_boxplot", "epsilon": 1.0, "bounds": [0, 100],
                    "group": "treated"}]}, "group level", "treated", "body.analyses.0.group"),
])
async def test_an_unknown_name_is_refused_before_any_release(
        tmp_path: Path, federation: Federations, change: dict[str, Any], what: str, name: str,
        field: str) -> None:
    centers = counted(federation)
    spec = {**BASE, "analyses": [{"kind": "table"}, {"kind": "mwu", "epsilon": 0.5}], **change}
    async with serving(tmp_path, centers) as coord:
        refused = await coord.post(spec)
        assert refused.status_code == 422, refused.text
        body = refused.json()
        assert body["error"] == "unknown_name" and body["fields"] == [field]
        [unknown] = body["unknown"]
        assert (unknown["what"], unknown["name"], unknown["centers"]) == (
            what, name, ["alpha", "beta", "gamma"])
        assert repr(name) in body["detail"] and "alpha, beta, gamma" in body["detail"]
        assert (await coord.client.get("/v1/studies", headers=AUTH)).json() == []
        assert await coord.spent() == {"alpha": 0.0, "beta": 0.0, "gamma": 0.0}
    for center in centers.values():
        assert released(center) == set()
        assert center_audit(center) == []


class Lacking(CountingCenter):
    """A center whose ``cohort`` does not declare the level ``trt``."""

    async def info(self) -> CenterInfo:
        info = await super().info()
        [cohort] = info.datasets
        assert cohort.group is not None
        group = cohort.group.model_copy(update={"levels": ["ctl"]})
        return info.model_copy(update={"datasets": [cohort.model_copy(update={
            "group": group, "n_by_group": {"ctl": cohort.n_by_group["ctl"]}})]})


async def test_a_name_one_center_lacks_names_that_center_and_allow_partial_leaves_it_out(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation, gamma=Lacking)
    spec = {**BASE, "analyses": [{"kind": "table"}]}
    async with serving(tmp_path, centers) as coord:
        refused = await coord.post(spec)
        assert refused.status_code == 422, refused.text
        assert refused.json()["unknown"][0]["centers"] == ["gamma"]
        assert refused.json()["unknown"][0]["declared"] == ["ctl"]
        # With allow_partial, gamma would be left out and two centers remain (min_centers 2).
        view = await coord.run({**spec, "allow_partial": True})
        assert view["status"] == "succeeded", view
        assert [c["center"] for c in view["result"]["excluded"]] == ["gamma"]
        # ... unless that leaves too few.
        too_few = await coord.post({**spec, "allow_partial": True, "centers": ["beta", "gamma"]})
        assert too_few.status_code == 422 and too_few.json()["error"] == "unknown_name"


async def test_a_down_center_is_not_held_against_the_names(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation, beta=Down)
    async with serving(tmp_path, centers) as coord:
        created = await coord.post({**BASE, "analyses": [{"kind": "table"}]})
        # Accepted: the run names the center (and can be resumed when it is back).
        assert created.status_code == 202, created.text
        await coord.app.state.services.runner.wait(created.json()["id"])
        view = (await coord.client.get(f"/v1/studies/{created.json()['id']}",
                                       headers=AUTH)).json()
        assert view["status"] == "failed" and view["error"]["center"] == "beta"


# -- the dry run -----------------------------------------------------------------------------

EXACT_SPEC: dict[str, Any] = {**BASE, "analyses": [
    {"kind": "table"},
    {"kind": "mwu", "tests": ["sum", "fisher"], "epsilon": 0.5},
    # The same noisy U again (another alternative): the center answers it from its store.
    {"kind": "mwu", "tests": ["weighted"], "alternative": "greater", "epsilon": 0.5},
    {"kind": "mwu", "tests": ["table"], "epsilon": 0.25},  # no local U: nothing spent
    {"kind": "dp_boxplot", "epsilon": 0.8, "bounds": [0, 100], "group": "trt", "depth": 4},
    {"kind": "dp_boxplot", "epsilon": 0.3, "bounds": [0, 100], "per_center": False,
     "depth": 3},
    {"kind": "dp_quantiles", "epsilon": 0.4, "bounds": [0, 100], "levels": [0.25, 0.5],
     "group": "ctl"},
    {"kind": "quantiles", "levels": [0.5]},
]}
# What each analysis spends at each center, by the protocols (docs/coordinator.md, "Dry run").
EXACT_EPSILON = [0.0, 0.5, 0.0, 0.0, 0.8 + 0.8, 0.3, 0.4, 0.0]


async def test_the_dry_run_is_what_a_real_run_then_spends(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation)
    async with serving(tmp_path, centers) as coord:
        answer = await coord.post(EXACT_SPEC, dry_run="true")
        assert answer.status_code == 200, answer.text
        plan = answer.json()
        assert plan["refusals"] == [] and plan["would_run"] is True
        # Nothing created, released or spent.
        assert (await coord.client.get("/v1/studies", headers=AUTH)).json() == []
        assert await coord.spent() == {"alpha": 0.0, "beta": 0.0, "gamma": 0.0}
        assert all(released(c) == set() and center_audit(c) == [] for c in centers.values())
        for part in plan["centers"]:
            assert [s["epsilon"] for s in part["spends"]] == pytest.approx(EXACT_EPSILON)
            assert part["exact"] is True and all(s["exact"] for s in part["spends"])
            assert part["remaining_after"] == pytest.approx(1e6 - sum(EXACT_EPSILON))
            assert (part["quota"], part["quota_left_after"]) == (None, None)

        view = await coord.run(EXACT_SPEC)
        assert view["status"] == "succeeded", view
        spent = await coord.spent()
    for part in plan["centers"]:
        # Each release rounds its ε up to the ledger's unit: at most one unit per release.
        assert spent[part["center"]] == pytest.approx(part["epsilon"], abs=10 * LEDGER_UNIT)


async def test_yj_data_is_planned_as_an_upper_bound(tmp_path: Path,
                                                     federation: Federations) -> None:
    spec = {**BASE, "analyses": [{"kind": "quantiles", "levels": [0.5],
                                  "estimators": ["yj_data"], "epsilon": 1.2,
                                  "bounds": [0, 100]}]}
    centers = counted(federation)
    async with serving(tmp_path, centers) as coord:
        plan = (await coord.post(spec, dry_run="true")).json()
        [spend] = plan["centers"][0]["spends"]
        assert spend["epsilon"] == pytest.approx(2 * 1.2) and spend["exact"] is False
        # At ε = 1.2 on these sizes YJ data would not be offered: said, not blocking.
        not_offered = [r for r in plan["refusals"] if r["reason"] == "estimator_not_offered"]
        assert len(not_offered) == 2 and plan["would_run"] is True  # one per group
        assert all(r["blocking"] is False and "YJ data" in r["detail"] for r in not_offered)
        view = await coord.run(spec)
        assert view["status"] == "succeeded", view
        spent = await coord.spent()
    # An upper bound: here nothing at all, as YJ data is not offered at ε = 1.2 on these sizes
    # (shared.quantiles.yj_data.yj_data_noise_ratio).
    assert all(0 <= s <= 2 * 1.2 + 1e-6 for s in spent.values())


async def test_the_dry_run_names_what_would_be_refused(tmp_path: Path,
                                                        federation: Federations) -> None:
    centers = counted(federation, beta=Down)
    async with serving(tmp_path, centers) as coord:
        ann = coord.app.state.services.accounts.add("ann", "analyst")
        coord.app.state.services.accounts.set_quota(ann.analyst.id, "gamma", "cohort", 0.5)
        headers = {"Authorization": f"Bearer {ann.token}"}
        spec = {**BASE, "k": 5, "variable": "crp",
                "analyses": [{"kind": "dp_quantiles", "epsilon": 0.7, "bounds": [0, 100],
                              "levels": [0.5], "group": "placebo"}]}
        answer = await coord.client.post("/v1/studies", json=spec, params={"dry_run": "true"},
                                         headers=headers)
        assert answer.status_code == 200, answer.text
        plan = answer.json()
        assert plan["would_run"] is False
        reasons = {(r["reason"], r["center"]) for r in plan["refusals"]}
        assert reasons == {("unknown_name", "alpha"), ("unknown_name", "gamma"),
                           ("center_unavailable", "beta"), ("center_k", "alpha"),
                           ("center_k", "gamma"), ("quota_exceeded", "gamma")}
        gamma = next(c for c in plan["centers"] if c["center"] == "gamma")
        assert (gamma["quota"], gamma["quota_spent"]) == (0.5, 0.0)
        assert gamma["quota_left_after"] == pytest.approx(0.5 - 0.7)
        # A dry run with a bad spec is a 422 like a submission.
        bad = await coord.client.post("/v1/studies", json={**spec, "k": 1},
                                      params={"dry_run": "true"}, headers=headers)
        assert bad.status_code == 422
    assert all(released(c) == set() for c in centers.values())


async def test_the_catalog_shows_each_centers_declared_variable_metadata(
        tmp_path: Path, federation: Federations) -> None:
    """``[datasets.X.metadata.v]`` (bounds, unit, resolution) goes from a center's config through
    its ``/v1/info`` to the catalog, per center; a center that declares none shows none."""
    from coordinator.local import in_process_federation

    rng = np.random.default_rng(3)
    # Recorded at the resolution declared (a center refuses data off it).
    declared = federation.dataset(np.round(rng.normal(50, 10, 40), 1),
                                  np.round(rng.normal(50, 10, 40), 1))
    declared["metadata"] = {"crp": {"bounds": [0.0, 300.0], "unit": "mg/L", "resolution": 0.1}}
    plain = federation.dataset(rng.normal(50, 10, 40), rng.normal(50, 10, 40))
    made = in_process_federation({"alpha": {"cohort": declared}, "beta": {"cohort": plain}}, k=K)
    for center in made.values():
        federation.adopt(center)
    async with serving(tmp_path, dict(made)) as coord:
        catalog = (await coord.client.get("/v1/catalog", headers=AUTH)).json()
    entries = {e["center"]: e for e in catalog["datasets"][0]["centers"]}
    assert entries["alpha"]["metadata"] == {
        "crp": {"bounds": [0.0, 300.0], "unit": "mg/L", "resolution": 0.1}}
    assert entries["beta"]["metadata"] == {}


# -- refused at submission when a center's info already says so ------------------------------


class HighK(CountingCenter):
    """A center whose K is above the studies' (it would refuse every release)."""

    async def info(self) -> CenterInfo:
        info = await super().info()
        return info.model_copy(update={"k": 2 * K})


class Broken(CountingCenter):
    """A center that cannot read the dataset's source now (its info says so)."""

    async def info(self) -> CenterInfo:
        info = await super().info()
        datasets = [d.model_copy(update={"available": False}) for d in info.datasets]
        return info.model_copy(update={"datasets": datasets})


async def test_a_study_a_center_would_refuse_is_refused_at_submission_unless_partial(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation, gamma=HighK)
    async with serving(tmp_path, centers) as coord:
        refused = await coord.post({**BASE, "analyses": [{"kind": "table"}]})
        assert refused.status_code == 409, refused.text
        body = refused.json()
        assert body["error"] == "would_be_refused"
        assert body["refusals"] == [{"center": "gamma", "reason": "center_k", "detail": (
            f"center 'gamma' releases only with K >= {2 * K}; the study asks k = {K} (raise "
            f"the study's k to {2 * K}, or leave the center out)")}]
        assert "allow_partial" in body["detail"]
        assert (await coord.client.get("/v1/studies", headers=AUTH)).json() == []
        assert all(released(c) == set() for c in centers.values())
        # Asked to run the rest: the other centers run it.
        study = await coord.run({**BASE, "analyses": [{"kind": "table"}], "allow_partial": True})
        assert study["status"] in ("succeeded", "partially_failed"), study
        assert released(centers["gamma"]) == set() or study["status"] == "partially_failed"


async def test_an_unavailable_dataset_is_shown_and_refused_at_submission(
        tmp_path: Path, federation: Federations) -> None:
    centers = counted(federation, beta=Broken)
    async with serving(tmp_path, centers) as coord:
        catalog = (await coord.client.get("/v1/catalog", headers=AUTH)).json()
        parts = {e["center"]: e for e in catalog["datasets"][0]["centers"]}
        assert parts["beta"]["available"] is False and parts["alpha"]["available"] is True
        admin = coord.app.state.services.accounts.add("root", "admin")
        statuses = (await coord.client.get(
            "/v1/centers", headers={"Authorization": f"Bearer {admin.token}"})).json()
        states = {s["id"]: s["datasets"] for s in statuses}
        assert states["beta"] == {"cohort": "unavailable"}
        assert states["alpha"] == {"cohort": "ok"}
        refused = await coord.post({**BASE, "analyses": [{"kind": "table"}]})
        assert refused.status_code == 409
        assert [r["reason"] for r in refused.json()["refusals"]] == ["dataset_unavailable"]
        plan = (await coord.post({**BASE, "analyses": [{"kind": "table"}]},
                                 dry_run="true")).json()
        assert ("dataset_unavailable", "beta") in {(r["reason"], r["center"])
                                                   for r in plan["refusals"]}


async def test_the_catalog_passes_time_to_event_declarations_through() -> None:
    """A center's time-to-event variables (their public follow-up and unit) reach the catalog
    entry as the center declares them; nothing else of them (``DatasetInfo.time_to_event``)."""
    from coordinator.catalog import build_catalog
    from coordinator.registry import Declaration
    from shared.protocol import DatasetInfo, GroupInfo, TimeToEventInfo

    dataset = DatasetInfo(
        name="cohort", variables=["crp"], group=GroupInfo(column="arm", levels=["ctl", "trt"]),
        n_records=40, n_by_group={"ctl": 20, "trt": 20}, epoch=1,
        time_to_event={"readmission": TimeToEventInfo(follow_up=(0.0, 60.0), unit="days")})
    info = CenterInfo(center_id="h", k=K, neighbouring="add_remove",
                      quantile_loss_enabled=False, datasets=[dataset])
    catalog = build_catalog([Declaration("h", None, info, None, None)])
    entry = catalog.datasets[0].centers[0]
    assert entry.time_to_event["readmission"].model_dump() == {"follow_up": (0.0, 60.0),
                                                               "unit": "days"}
    assert entry.variables == ["crp"]
