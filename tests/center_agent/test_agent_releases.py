"""The K-anonymous and MWU release endpoints, end to end in process (ASGITransport).

Each answer is checked against the raw data the test can see and against the shared core run
in process on the same arrays: the service adds no arithmetic of its own.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from center_agent.gate.keys import decode_public_key
from shared.binning import bin_table
from shared.federation import apply_refinement, refined_limits
from shared.mwu import mann_whitney, tie_variance
from shared.protocol import BinTableRelease, LimitsStatement, MWURelease, RefinementRelease
from tests.helpers.center import AUTH, PEER_ID, K, peer_table

pytestmark = pytest.mark.anyio

TABLE = "/v1/datasets/cohort/table"
REFINE = "/v1/datasets/cohort/table/refine"
MWU = "/v1/datasets/cohort/mwu"


def arrays(app: FastAPI, variable: str = "x") -> tuple[np.ndarray, np.ndarray]:
    population = app.state.services.datasets["cohort"].population()
    return population.level(variable, "a"), population.level(variable, "b")


def counts_in(limits: list[float], values: np.ndarray) -> np.ndarray:
    lim = np.asarray(limits)
    return np.bincount(np.searchsorted(lim[1:-1], values, side="left"), minlength=lim.size - 1)


async def test_own_table_is_k_anonymous_and_true(client: httpx.AsyncClient, app: FastAPI) -> None:
    body = {"variable": "x", "groups": ["a", "b"], "k": K}
    r = await client.post(TABLE, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    table = BinTableRelease.model_validate_json(r.content)
    for g, values in enumerate(arrays(app)):
        counts = np.asarray(table.counts[g])
        assert np.all((counts == 0) | (counts >= K))
        np.testing.assert_array_equal(counts, counts_in(table.limits, values))
    # The same request again: the stored answer, not fresh limits to average.
    again = await client.post(TABLE, json=body, headers=AUTH)
    assert again.json() == r.json()


async def test_budget_shows_the_exact_release_caps_use(client: httpx.AsyncClient,
                                                       app: FastAPI) -> None:
    """``/v1/budget`` counts a variable's remembered exact releases and their limits against the
    caps (what a coordinator's dry run reads); a cached answer adds nothing."""
    settings = app.state.services.settings
    body = {"variable": "x", "groups": ["a", "b"], "k": K}
    table = (await client.post(TABLE, json=body, headers=AUTH)).json()
    await client.post(TABLE, json=body, headers=AUTH)
    use = (await client.get("/v1/budget/cohort", headers=AUTH)).json()["exact_releases"]
    assert use == {"x": {"releases": 1, "max_releases": settings.max_releases_per_variable,
                         "limits": len(table["limits"]) - 2,
                         "max_limits": settings.max_limits_per_variable}}


async def test_every_wording_of_a_table_has_the_same_limits(client: httpx.AsyncClient) -> None:
    """Levels swapped, other extremes, ungrouped, a larger K: views of one canonical table, so
    no variant can be subtracted from another (each interior limit of a view is one of its)."""
    base = (await client.post(TABLE, json={"variable": "x", "groups": ["a", "b"], "k": K},
                              headers=AUTH)).json()
    inner = set(base["limits"][1:-1])
    variants = [
        {"groups": ["b", "a"]},
        {"groups": ["a", "b"], "lower": -1000.001, "upper": "infinite"},
        {"groups": ["a", "b"], "lower": -1000.002},
        {},
        {"k": 2 * K},
        {"groups": ["a", "b"], "k": 37},
    ]
    for extra in variants:
        body = {"variable": "x", "k": K, **extra}
        r = await client.post(TABLE, json=body, headers=AUTH)
        assert r.status_code == 200, (extra, r.text)
        table = r.json()
        assert set(table["limits"][1:-1]) <= inner, extra
        k = body["k"]
        assert all(c == 0 or c >= k for row in table["counts"] for c in row)
    swapped = (await client.post(TABLE, json={"variable": "x", "groups": ["b", "a"], "k": K},
                                 headers=AUTH)).json()
    assert swapped["limits"] == base["limits"]
    assert swapped["counts"] == base["counts"][::-1]


async def test_a_natural_limit_that_leaves_data_out_clips_it(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    """A natural limit is a public input: values beyond it are counted in the extreme bin, and
    nothing in the answer depends on where the data's minimum is."""
    x, y = arrays(app)
    lower = float(np.median(np.concatenate([x, y])))
    r = await client.post(TABLE, json={"variable": "x", "groups": ["a", "b"], "k": K,
                                       "lower": lower}, headers=AUTH)
    assert r.status_code == 200, r.text
    table = r.json()
    assert table["limits"][0] == lower
    assert [sum(row) for row in table["counts"]] == [x.size, y.size]  # nothing dropped
    clipped = counts_in(table["limits"], np.maximum(x, lower))
    np.testing.assert_array_equal(table["counts"][0], clipped)


async def test_infinite_limits_cross_the_wire(client: httpx.AsyncClient) -> None:
    body = {"variable": "x", "k": K, "lower": "infinite", "upper": "infinite"}
    r = await client.post(TABLE, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["limits"][0] == "-Infinity" and r.json()["limits"][-1] == "Infinity"
    table = BinTableRelease.model_validate_json(r.content)
    assert table.limits[0] == -np.inf and len(table.counts) == 1


async def test_the_table_is_signed(client: httpx.AsyncClient, app: FastAPI) -> None:
    r = await client.post(TABLE, json={"variable": "x", "groups": ["a", "b"], "k": K,
                                       "lower": 0.0}, headers=AUTH)
    table = BinTableRelease.model_validate_json(r.content)
    assert table.signed is not None
    statement = table.signed.statement
    assert statement.limits == table.limits and statement.center_id == "hospital-test"
    assert (statement.lower, statement.upper) == ("natural", "buffer")
    info = (await client.get("/v1/info", headers=AUTH)).json()
    key = decode_public_key(info["signing_key"])
    import base64
    key.verify(base64.b64decode(table.signed.signature), statement.signing_bytes())


async def test_table_refusals(client: httpx.AsyncClient) -> None:
    r = await client.post(TABLE, json={"variable": "x", "k": 2}, headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "k_anonymity_refused"
    assert "K >= 10" in r.json()["detail"]
    r = await client.post(TABLE, json={"variable": "x", "groups": ["a", "z"], "k": K},
                          headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_level"
    r = await client.post(TABLE, json={"variable": "weight", "k": K}, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_variable"
    r = await client.post(TABLE, json={"variable": "x", "k": K, "lower": 5.0, "upper": 5.0},
                          headers=AUTH)
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    # A K no level's public size reaches: decided from /v1/info's sizes (multiples of 10).
    r = await client.post(TABLE, json={"variable": "x", "groups": ["a", "b"], "k": 1000},
                          headers=AUTH)
    assert r.status_code == 403 and r.json()["error"] == "k_anonymity_refused"
    assert "/v1/info" in r.json()["detail"]
    r = await client.post(TABLE, json={"variable": "x", "k": K})
    assert r.status_code == 401


async def test_refinement_of_a_peer_table(client: httpx.AsyncClient, app: FastAPI) -> None:
    rng = np.random.default_rng(3)
    existing = bin_table(rng.normal(50, 10, 300), rng.normal(52, 10, 300), k=K, rng=rng)
    signed = peer_table(existing.limits.tolist())
    body = {"variable": "x", "groups": ["a", "b"], "k": K, "table": signed}
    r = await client.post(REFINE, json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    release = RefinementRelease.model_validate_json(r.content)
    cells = refined_limits(existing.limits, release.to_result())
    for g, values in enumerate(arrays(app)):
        runs = release.runs[g]
        totals = np.asarray(runs.totals)
        assert np.all((totals == 0) | (totals >= K))
        per_cell = counts_in(cells.tolist(), values)
        np.testing.assert_array_equal(
            np.bincount(runs.run_of_cell, weights=per_cell, minlength=totals.size), totals
        )
    merged = apply_refinement(existing, release.to_result())
    x, y = arrays(app)
    np.testing.assert_allclose(merged.counts.sum(axis=1), [300 + x.size, 300 + y.size])
    # The refined limits are stated and signed for the next center, naming their parent.
    assert release.signed is not None
    statement = release.signed.statement
    assert statement.limits == cells.tolist()
    assert statement.parent == LimitsStatement.model_validate(signed["statement"]).digest()
    # The same table with the groups the other way: the stored answer, runs swapped.
    swapped = await client.post(REFINE, json={**body, "groups": ["b", "a"]}, headers=AUTH)
    assert swapped.json()["runs"] == r.json()["runs"][::-1]


@pytest.mark.parametrize("tamper", ["unsigned", "forged", "unknown_signer", "other_variable",
                                    "other_k", "other_dataset", "moved_limit"])
async def test_refinement_of_limits_no_trusted_center_signed_is_refused(
    client: httpx.AsyncClient, app: FastAPI, tamper: str
) -> None:
    """Limits a caller makes up (say around one record) are refused before any data is read."""
    x, _ = arrays(app)
    v = float(x[x.size // 2])
    limits = [0.0, v - 1e-6, v + 1e-6, 100.0]
    signed = peer_table(limits)
    if tamper == "unsigned":
        signed["signature"] = "A" * 88
    elif tamper == "forged":
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from center_agent.gate.keys import CenterKeys
        forger = CenterKeys(PEER_ID, b"0" * 32, Ed25519PrivateKey.generate(), {})
        signed = peer_table(limits, signer=forger)
    elif tamper == "unknown_signer":
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from center_agent.gate.keys import CenterKeys
        stranger = CenterKeys("hospital-x", b"0" * 32, Ed25519PrivateKey.generate(), {})
        signed = peer_table(limits, signer=stranger)
    elif tamper == "other_variable":
        signed = peer_table(limits, variable="y")
    elif tamper == "other_k":
        signed = peer_table(limits, k=2 * K)
    elif tamper == "other_dataset":
        signed = peer_table(limits, dataset="elsewhere")
    elif tamper == "moved_limit":
        signed["statement"]["limits"][1] = v - 2e-6
    r = await client.post(REFINE, json={"variable": "x", "groups": ["a", "b"], "k": K,
                                        "table": signed}, headers=AUTH)
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "untrusted_table"
    assert str(v) not in r.text


async def test_mwu_equals_the_core(client: httpx.AsyncClient, app: FastAPI) -> None:
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "b"]}, headers=AUTH)
    assert r.status_code == 200, r.text
    release = MWURelease.model_validate_json(r.content)
    core = mann_whitney(*arrays(app))
    assert release.statistic == core.statistic and release.variance == core.variance
    assert (release.n_x, release.n_y, release.noise_variance) == (core.n_x, core.n_y, 0.0)
    # The levels the other way round: the same stored answer, U negated, sizes swapped.
    swapped = await client.post(MWU, json={"variable": "x", "groups": ["b", "a"]}, headers=AUTH)
    assert swapped.json()["statistic"] == -release.statistic
    assert (swapped.json()["n_x"], swapped.json()["n_y"]) == (release.n_y, release.n_x)


async def test_noisy_mwu_spends_once_and_releases_nothing_exact_but_sizes(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    before = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    body = {"variable": "x", "groups": ["a", "b"], "epsilon": 0.5}
    first = await client.post(MWU, json=body, headers=AUTH)
    second = await client.post(MWU, json=body, headers=AUTH)
    assert first.status_code == 200 and first.json() == second.json()
    after = (await client.get("/v1/budget", headers=AUTH)).json()["datasets"]["cohort"]
    assert after["spent_epsilon"] == pytest.approx(before["spent_epsilon"] + 0.5)
    x, y = arrays(app)
    scale = 2 * max(x.size, y.size) / 0.5
    assert first.json()["noise_variance"] == pytest.approx(2 * scale**2)
    # V is the no-ties null variance, a function of n and m alone (the tie-corrected one would
    # carry the data past the noise).
    assert first.json()["variance"] == tie_variance(x.size, y.size, np.zeros(0))
    too_much = await client.post(MWU, json={**body, "epsilon": 100.0}, headers=AUTH)
    assert too_much.status_code == 403 and too_much.json()["error"] == "epsilon_cap_exceeded"


async def test_mwu_bad_input(client: httpx.AsyncClient) -> None:
    r = await client.post(MWU, json={"variable": "x", "groups": ["a"]}, headers=AUTH)
    assert r.status_code == 422
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "b"], "epsilon": -1},
                          headers=AUTH)
    assert r.status_code == 422 and "epsilon" in r.text
    r = await client.post(MWU, json={"variable": "x", "groups": ["a", "a"]}, headers=AUTH)
    assert r.status_code == 404 and r.json()["error"] == "unknown_level"
