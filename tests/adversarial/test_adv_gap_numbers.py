"""Raw values from released limits, on real processes: the attacks that drew many numbers into
one gap between two raw values, each written as the attacker who knows every value of the
synthetic data and reads off how close the released numbers come to them.

1. **Fresh split limits from varied natural limits.** Every table view with another natural
   ``lower`` is a new signed statement; refining each one drew its split limits afresh inside the
   same gaps, and the most extreme draw converged on the raw value next to it.
2. **A chain of natural lowers.** A natural ``lower`` clipped the refining center's values into a
   tie at it, so the next cut fell right after it; setting the next ``lower`` to that cut gave a
   cut closer still, converging on the raw value. One ulp below a raw value answered 500.

Both through a center token (views of the center's own table, refined by the center) and
through the coordinator as an ordinary analyst (studies that differ only in a natural limit,
the refining hospital's split limits read from the federated table). The check is the one
guarantee (docs/privacy.md, "One number per gap"): over every answer, each gap between
consecutive raw values holds at most one released number, so nothing tells more about a gap's
ends than one random point inside it; and no natural limit, however close to a raw value,
answers 5xx.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest

from tests.helpers.attacks import closest_from_below, crowded_gaps
from tests.helpers.center import (
    AUTH,
    PEER_ID,
    PEER_PUBLIC_KEY,
    Center,
    center_config,
    center_process,
    make_table,
    peer_table,
    write_csv,
)
from tests.helpers.coordinator import ANALYST_TOKEN, coordinator_config
from tests.helpers.processes import running_center, running_coordinator

pytestmark = pytest.mark.process

# One dataset (one disclosure memory) per attack; enough distinct releases for ~100 calls. The
# center trusts a peer, whose genuine tables (views with any natural lower the caller asks
# for) the attacker refines at the center.
DATASETS = {"views": 3.0, "chain": 3.0, "ulps": 3.0}
EXTRA = {"max_releases_per_variable": 400}
GROUPS = ["a", "b"]


def truth_x(table: pa.Table | None = None) -> np.ndarray:
    """The attacker's oracle: x of the population's records (levels a and b, y finite)."""
    table = make_table() if table is None else table
    x = np.asarray(table["x"].to_numpy())
    y = np.asarray(table["y"].to_numpy(zero_copy_only=False), dtype=float)
    arm = table["arm"].to_pylist()
    keep = [a in ("a", "b") and np.isfinite(v) for a, v in zip(arm, y, strict=True)]
    return np.sort(x[keep])


def peer_view(dataset: str, lower: Any, inner: list[float]) -> dict[str, Any]:
    """A peer's table of x (levels a, b) with the interior limits ``inner`` (a peer's bins are
    wide where it holds few records), viewed with the natural ``lower`` (or a buffer), signed
    by the peer as its center signs every view."""
    if lower == "buffer":
        return peer_table([-math.inf, *inner, math.inf], dataset=dataset, groups=GROUPS)
    kept = [c for c in inner if c > lower]
    return peer_table([lower, *kept, math.inf], dataset=dataset, groups=GROUPS,
                      lower="natural")


@pytest.fixture(scope="module")
def center(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    with center_process(tmp_path_factory.mktemp("gaps"), DATASETS,
                        peers={PEER_ID: PEER_PUBLIC_KEY}, **EXTRA) as running:
        yield running


@pytest.fixture(scope="module")
def client(center: Center) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=center.url, headers=AUTH, timeout=60) as c:
        yield c


def view(client: httpx.Client, dataset: str, lower: Any = "buffer") -> dict[str, Any]:
    r = client.post(f"/v1/datasets/{dataset}/table",
                    json={"variable": "x", "k": 10, "lower": lower, "upper": "buffer"})
    assert r.status_code == 200, r.text
    return dict(r.json())


def refine(client: httpx.Client, dataset: str, signed: dict[str, Any],
           failures: list[str] | None = None) -> dict[str, Any]:
    """The center's refinement of ``signed``; a 5xx goes into ``failures`` when given (the
    attack goes on, the test asserts there were none after its other checks)."""
    groups = signed["statement"]["groups"]
    r = client.post(f"/v1/datasets/{dataset}/table/refine",
                    json={"variable": "x", "k": 10, "groups": groups, "table": signed})
    if failures is not None and r.status_code >= 500:
        failures.append(r.text)
        return {"split_limits": [], "lower": None, "upper": None}
    assert r.status_code == 200, r.text
    return dict(r.json())


def placed(release: dict[str, Any], sent: float | None = None) -> list[float]:
    """The numbers a release placed between data: a table's finite limits, a refinement's split
    limits and moved buffers; never the natural limit the caller sent."""
    if "split_limits" in release:
        numbers = [*release["split_limits"], release["lower"], release["upper"]]
    else:
        numbers = release["limits"]
    return [float(v) for v in numbers
            if isinstance(v, (int, float)) and math.isfinite(v) and v != sent]


def test_views_with_varied_natural_limits_draw_no_fresh_split_limits(
        client: httpx.Client) -> None:
    """Attack 1 with a token: 50 views of a peer's table, each with another natural lower
    (some a hair below a raw value), each refined by the center; and 20 views of the center's
    own table, refined too. Before: every refinement drew its split limits afresh in the same
    gaps (the randomness was keyed on the statement), and the extreme draws came within 1 % of
    the raw values next to them; one ulp below a raw value answered 500."""
    truth = truth_x()
    inner = [float(np.median(truth)) + 0.0123]
    rng = np.random.default_rng(11)
    first = placed(refine(client, "views", peer_view("views", "buffer", inner)))
    numbers = list(first)
    failures: list[str] = []
    for i in range(50):
        if i % 5 == 4:  # one ulp below a raw value
            lower = math.nextafter(float(truth[int(rng.integers(truth.size // 2))]), -math.inf)
        else:
            lower = float(rng.uniform(truth[0] - 5.0, np.median(truth)))
        numbers += placed(refine(client, "views", peer_view("views", lower, inner), failures),
                          lower)
    for _ in range(20):
        lower = float(rng.uniform(truth[0] - 5.0, np.median(truth)))
        table = view(client, "views", lower)
        numbers += placed(table, lower) + placed(refine(client, "views", table["signed"]), lower)
    assert crowded_gaps(numbers, truth) == {}
    # What an attacker recovers of each raw value is what one number in its gap tells: the
    # same as from the first refinement alone.
    for value, share in closest_from_below(first, truth).items():
        assert closest_from_below(numbers, truth)[value] == share
    assert failures == []


def test_a_chain_of_natural_lowers_converges_on_nothing(client: httpx.Client) -> None:
    """Attack 2 with a token: each peer view's natural lower set to the smallest split limit
    the center placed above the previous lower, 30 times. Before: the cut fell right after the
    lower each time, and the chain reached the raw value above it to the last digit."""
    truth = truth_x()
    inner = [float(np.median(truth)) + 0.0123]
    lower = float(truth[0]) - 1.0
    numbers: list[float] = []
    lowers = []
    failures: list[str] = []
    for _ in range(30):
        release = refine(client, "chain", peer_view("chain", lower, inner), failures)
        numbers += placed(release, lower)
        above = [v for v in release["split_limits"] if lower < v < inner[0]]
        if not above:
            break
        lower = min(above)
        lowers.append(lower)
    assert lowers, "the center split nothing: the attack was not tried"
    assert crowded_gaps(numbers, truth) == {}
    # The chain moves from one released number to the next, never twice into one gap: each
    # step lands on a number the first refinement already placed.
    first = set(placed(refine(client, "chain", peer_view("chain", float(truth[0]) - 1.0,
                                                            inner))))
    assert set(lowers) <= first
    assert failures == []


def test_no_natural_limit_near_a_raw_value_answers_5xx(client: httpx.Client) -> None:
    """A natural lower (or upper) at a raw value, one ulp below or above it, in the center's
    own views and in peers' tables: every view and refinement answers 200, and no gap gets a
    second number."""
    truth = truth_x()
    inner = [float(np.median(truth)) + 0.0123]
    numbers: list[float] = []
    for value in truth[:: max(1, truth.size // 10)]:
        for lower in (math.nextafter(float(value), -math.inf), float(value),
                      math.nextafter(float(value), math.inf)):
            table = view(client, "ulps", lower)
            numbers += placed(table, lower) + placed(refine(client, "ulps", table["signed"]),
                                                     lower)
            if lower < inner[0]:
                numbers += placed(refine(client, "ulps", peer_view("ulps", lower, inner)),
                                  lower)
        r = client.post("/v1/datasets/ulps/table", json={
            "variable": "x", "k": 10, "lower": "buffer",
            "upper": math.nextafter(float(value), -math.inf)})
        assert r.status_code == 200, r.text
        numbers += placed(refine(client, "ulps", r.json()["signed"]))
    assert crowded_gaps(numbers, truth) == {}


# -- through the coordinator, as an analyst ---------------------------------------------------


def study(client: httpx.Client, lower: Any) -> dict[str, Any]:
    """A study of x's federated table (levels a, b) with the natural ``lower``, run to its
    end."""
    spec = {"dataset": "d", "variable": "x", "k": 10, "groups": GROUPS,
            "analyses": [{"kind": "table", "lower": lower, "upper": "buffer"}]}
    created = client.post("/v1/studies", json=spec)
    assert created.status_code == 202, created.text
    url = created.json()["status_url"]
    while (body := client.get(url, params={"provenance": "false"}).json())["status"] in (
            "pending", "running"):
        time.sleep(0.05)
    assert body["status"] == "succeeded", body
    return dict(body["result"]["analyses"][0])


@pytest.mark.slow  # three processes, about 40 studies
def test_an_analyst_varying_natural_limits_recovers_no_raw_value(tmp_path: Path) -> None:
    """Attacks 1 and 2 as an ordinary analyst: studies that differ only in the table's natural
    lower, the refining hospital's split limits read off the federated table (its numbers are
    the table's limits less the building hospital's and the lower sent). Before: 14 of 18 of its
    raw values to < 5 % of their gap from about 20 studies, and one exactly by a chain of 30."""
    # The building hospital's x holds two values only, 0 and 1: its table's last bin holds
    # every value of the refining one (around 50), which splits it.
    coarse = make_table(300, 1)
    coarse = coarse.set_column(0, "x", pa.array(np.where(np.arange(300) % 2 == 0, 0.0, 1.0)))
    write_csv(coarse, tmp_path / "big.csv")
    fine = make_table(160, 2)
    write_csv(fine, tmp_path / "small.csv")
    big, big_port = center_config(tmp_path, {"d": 3.0}, name="big", **EXTRA)
    small, small_port = center_config(tmp_path, {"d": 3.0}, name="small", **EXTRA)
    coordinator, port = coordinator_config(
        tmp_path / "coordinator.toml", {"big": f"http://127.0.0.1:{big_port}",
                                        "small": f"http://127.0.0.1:{small_port}"},
        min_centers=2)
    refiner = truth_x(fine)
    with running_center(big, big_port), running_center(small, small_port), \
            running_coordinator(coordinator, port), \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                         headers={"Authorization": f"Bearer {ANALYST_TOKEN}"}) as analyst, \
            httpx.Client(base_url=f"http://127.0.0.1:{big_port}", headers=AUTH,
                         timeout=60) as builder:
        # The test's own knowledge (not the attacker's): the building hospital's limits.
        r = builder.post("/v1/datasets/d/table", json={
            "variable": "x", "k": 10, "groups": GROUPS, "lower": "buffer", "upper": "buffer"})
        assert r.status_code == 200, r.text
        built = {float(v) for v in r.json()["limits"] if math.isfinite(float(v))}

        def refiners_numbers(result: dict[str, Any], lower: Any) -> list[float]:
            assert result["order"] == ["big", "small"], result["order"]
            return [float(v) for v in result["limits"]
                    if isinstance(v, (int, float)) and math.isfinite(v)
                    and v != lower and float(v) not in built]

        rng = np.random.default_rng(5)
        numbers = refiners_numbers(study(analyst, "buffer"), "buffer")
        first = list(numbers)
        assert first, "the refining hospital split nothing: the attack was not tried"
        for _ in range(20):  # attack 1: natural lowers anywhere below the median
            lower = float(rng.uniform(refiner[0] - 5.0, np.median(refiner)))
            numbers += refiners_numbers(study(analyst, lower), lower)
        lower = float(refiner[0]) - 1.0
        for _ in range(15):  # attack 2: each lower the refiner's smallest number above the last
            found = refiners_numbers(study(analyst, lower), lower)
            numbers += found
            above = [v for v in found if v > lower]
            if not above:
                break
            lower = min(above)
        for value in refiner[:4]:  # one ulp below a raw value
            lower = math.nextafter(float(value), -math.inf)
            numbers += refiners_numbers(study(analyst, lower), lower)
    assert crowded_gaps(numbers, refiner) == {}
    for value, share in closest_from_below(first, refiner).items():
        assert closest_from_below(numbers, refiner)[value] == share
