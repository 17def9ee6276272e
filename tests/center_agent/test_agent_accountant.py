"""The lifetime guarantee in ``GET /v1/budget``: over a random sequence of DP requests (repeats,
refusals over the budget and the per-request cap, exact tables between them), the accountant's
pure ε is always the ledger's spend, its release count the number of distinct paid requests,
and its (ε, δ) the composition of exactly those ε's (``shared.accounting``, checked against
the exact composition in ``tests/shared/test_accounting.py``)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from shared.accounting import compose_pure
from tests.helpers.center import AUTH

pytestmark = pytest.mark.anyio
DP = "/v1/datasets/cohort/dp"


async def _budget(client: httpx.AsyncClient) -> dict:
    r = await client.get("/v1/budget/cohort", headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


async def test_nothing_released_yet(client: httpx.AsyncClient) -> None:
    guarantee = (await _budget(client))["guarantee"]
    assert (guarantee["epsilon"], guarantee["epsilon_pure"], guarantee["releases"]) == (0, 0, 0)
    assert "nothing released with noise" in guarantee["line"]


async def test_the_accountant_composes_exactly_what_was_paid(client: httpx.AsyncClient) -> None:
    rng = np.random.default_rng(7)
    paid: dict[str, float] = {}  # the reference: request → ε, for every request answered
    asked: list[tuple[str, dict]] = []
    for step in range(30):
        if asked and rng.random() < 0.25:  # the same question again: answered, not paid
            path, body = asked[int(rng.integers(len(asked)))]
        elif rng.random() < 0.15:  # an exact release between the noisy ones: no ε
            path = "/v1/datasets/cohort/table"
            body = {"variable": "x", "groups": ["a", "b"], "k": 10}
        else:
            eps = float(rng.choice([0.01, 0.05, 0.1, 0.2, 0.9]))  # 0.9: over the cap of 0.75
            kind = rng.choice(["quantiles", "extremes"])
            body = {"variable": "x", "epsilon": eps, "bounds": [0, 100 + step]}
            if kind == "quantiles":
                body["levels"] = [0.5]
            path = f"{DP}/{kind}"
        r = await client.post(path, json=body, headers=AUTH)
        assert r.status_code in (200, 403), r.text
        key = f"{path} {sorted(body.items())}"
        if r.status_code == 200 and "epsilon" in body:
            paid.setdefault(key, body["epsilon"])
        asked.append((path, body))
        budget = await _budget(client)
        guarantee = budget["guarantee"]
        assert guarantee["epsilon_pure"] == pytest.approx(budget["spent_epsilon"], abs=1e-9)
        assert guarantee["epsilon_pure"] == pytest.approx(sum(paid.values()), abs=1e-9)
        assert guarantee["releases"] == len(paid)
        expected = compose_pure(list(paid.values()), delta=guarantee["delta"])
        assert guarantee["epsilon"] == pytest.approx(expected.epsilon, abs=1e-12)
        assert guarantee["epsilon"] <= guarantee["epsilon_pure"] + 1e-12
    assert len(paid) >= 10
    assert guarantee["delta"] == 1e-6  # the default accountant_delta
    assert guarantee["line"].startswith("each patient at center ")
    assert "dataset cohort" in guarantee["line"]
