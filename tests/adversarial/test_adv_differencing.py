"""Differencing attacks on a real center process: crafted refinement limits that isolate one
record between two requests, and overlapping group definitions. Every answer is searched for an
exact count in 1..K-1; the attack's second step must be refused."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from adv_helpers import Center, center_process, small_counts
from center_helpers import AUTH, K

DATASETS = {f"d{i}": 3.0 for i in range(8)}  # one isolated auditor memory per attack


@pytest.fixture(scope="module")
def center(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Center]:
    with center_process(tmp_path_factory.mktemp("diff"), DATASETS) as running:
        yield running


@pytest.fixture(scope="module")
def client(center: Center) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=center.url, headers=AUTH, timeout=30) as c:
        yield c


def declared_x(center: Center, levels: tuple[str, ...] = ("a", "b")) -> np.ndarray:
    """The attacker's oracle: the sorted x values of the declared groups (it knows the data)."""
    keep = np.array([label in levels for label in center.arm])
    return np.sort(center.x[keep])


def refine(client: httpx.Client, ds: str, limits: list[float], **extra: Any) -> httpx.Response:
    body = {"variable": "x", "groups": ["a", "b"], "k": K, "limits": limits, **extra}
    return client.post(f"/v1/datasets/{ds}/table/refine", json=body)


def assert_clean(*responses: httpx.Response) -> None:
    for r in responses:
        assert r.status_code != 500, r.text
        if r.status_code == 200:
            assert small_counts(r.json()) == [], r.json()


def assert_refused_differencing(r: httpx.Response) -> None:
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "differencing_refused"


def test_two_refinements_one_record_apart_are_refused(center: Center, client: httpx.Client) -> None:
    """Attack: refine with limits {lo, v+δ, hi}, then {lo, v-δ, hi}; the two run totals would
    differ by the one record at v. The second request must be refused (409)."""
    x = declared_x(center)
    v = float(x[x.size // 2])
    lo, hi = float(x[0]) - 1, float(x[-1]) + 1
    first = refine(client, "d0", [lo, v + 1e-6, hi])
    second = refine(client, "d0", [lo, v - 1e-6, hi])
    assert_clean(first, second)
    assert first.status_code == 200, first.text
    assert_refused_differencing(second)


def test_a_cell_holding_one_record_is_never_released(center: Center, client: httpx.Client) -> None:
    """Attack: one refinement whose limits put exactly one record in a cell of their own
    ((v-δ, v+δ]); the answer must hold no count in 1..K-1 (merged runs, or refused)."""
    x = declared_x(center)
    v = float(x[x.size // 3])
    r = refine(client, "d1", [float(x[0]) - 1, v - 1e-6, v + 1e-6, float(x[-1]) + 1])
    assert_clean(r)
    if r.status_code == 200:
        for group in r.json()["runs"]:
            assert all(t == 0 or t >= K for t in group["totals"])


def test_refinements_sliding_one_record_at_a_time(center: Center, client: httpx.Client) -> None:
    """Attack: slide one interior limit across consecutive data values, one request each, hoping
    some pair of answers differs by fewer than K records; every request after the first must be
    refused, and no answer may hold a small count."""
    x = declared_x(center)
    lo, hi = float(x[0]) - 1, float(x[-1]) + 1
    answers = [refine(client, "d2", [lo, float(v) + 1e-6, hi]) for v in x[60:70]]
    assert_clean(*answers)
    assert answers[0].status_code == 200
    for r in answers[1:]:
        assert_refused_differencing(r)


def run_edges(limits: list[float], release: dict[str, Any], group: int) -> list[float]:
    """The interval ends a refinement reveals for one group: the ends of its runs over the
    refined limits (the asked limits with the split limits inserted)."""
    refined = sorted([*limits, *release["split_limits"]])
    runs = release["runs"][group]["run_of_cell"]
    edges = [refined[0]]
    edges += [refined[i + 1] for i in range(len(runs) - 1) if runs[i] != runs[i + 1]]
    return [*edges, refined[-1]]


def exposed_atoms(values: np.ndarray, edge_sets: list[list[float]]) -> list[int]:
    """Counts in 1..K-1 of the cells (a, b] of the common refinement of every released edge set:
    what subtracting the releases could reveal at worst (the auditor's own criterion)."""
    edges = np.unique(np.concatenate([np.asarray(e, float) for e in edge_sets]))
    cells = np.concatenate([[-np.inf], edges, [np.inf]])
    counts = [int(np.sum((values > a) & (values <= b)))
              for a, b in itertools.pairwise(cells)]
    return [c for c in counts if 0 < c < K]


def test_own_table_then_a_refinement_shifted_by_one_record(
    center: Center, client: httpx.Client
) -> None:
    """Attack: get the center's own table, then ask it to refine a copy whose first interior
    limit is moved past one data value; subtracting the two would expose that record. The center
    must refuse (409) or answer with runs that, together with the table, reveal no cell of the
    common refinement holding 1..K-1 records of either group (checked against the raw data)."""
    own = client.post("/v1/datasets/d3/table", json={"variable": "x", "groups": ["a", "b"],
                                                       "k": K})
    assert_clean(own)
    assert own.status_code == 200, own.text
    limits = [float(v) for v in own.json()["limits"]]
    x = declared_x(center)
    lo, hi = float(x[0]) - 1, float(x[-1]) + 1
    finite = [lo if v == -np.inf else hi if v == np.inf else v for v in limits]
    crossing = x[x <= finite[1]][-1]  # the last record at or below the first interior limit
    shifted = [finite[0], float(crossing) - 1e-9, *finite[2:]]
    r = refine(client, "d3", shifted)
    assert_clean(r)
    if r.status_code == 409:
        return
    assert r.status_code == 200, r.text
    for g, level in enumerate(("a", "b")):
        values = center.x[np.array([label == level for label in center.arm])]
        revealed = exposed_atoms(values, [finite, run_edges(shifted, r.json(), g)])
        assert revealed == [], f"group {level}: cells of {revealed} records can be isolated"


def test_overlapping_groupings_one_group_then_two(center: Center, client: httpx.Client) -> None:
    """Attack: a refinement of the whole dataset (no groups) and one of the two declared groups
    with limits one record apart: the auditor must combine groupings (409)."""
    x = declared_x(center)
    v = float(x[x.size // 2])
    lo, hi = float(x[0]) - 1, float(x[-1]) + 1
    whole = refine(client, "d4", [lo, v + 1e-6, hi], groups=None)
    split = refine(client, "d4", [lo, v - 1e-6, hi])
    assert_clean(whole, split)
    assert whole.status_code == 200, whole.text
    assert_refused_differencing(split)


@pytest.mark.parametrize(
    ("groups", "status"),
    [(["a", "a"], 422), (["a", "c"], 404), (["a", "A"], 404), (["a", ""], 404 | 422)],
)
def test_undeclared_or_repeated_levels_are_refused(
    client: httpx.Client, groups: list[str], status: int
) -> None:
    """Attack: overlapping or undeclared group definitions (a level twice; the undeclared label
    'c' present in the data; a case variant; empty) in tables, refinements and MWU."""
    answers = [
        client.post("/v1/datasets/d5/table", json={"variable": "x", "groups": groups, "k": K}),
        client.post("/v1/datasets/d5/mwu", json={"variable": "x", "groups": groups}),
        client.post("/v1/datasets/d5/table/refine",
                    json={"variable": "x", "groups": groups, "k": K, "limits": [0, 50, 100]}),
    ]
    assert_clean(*answers)
    for r in answers:
        assert r.status_code in (404, 422), r.text


def test_mwu_with_the_groups_swapped_reveals_nothing_new(client: httpx.Client) -> None:
    """Attack: the same two groups in both orders (and the DP and exact variants); the sizes are
    each >= K and the statistics are each other's mirror, nothing finer."""
    ab = client.post("/v1/datasets/d6/mwu", json={"variable": "x", "groups": ["a", "b"]})
    ba = client.post("/v1/datasets/d6/mwu", json={"variable": "x", "groups": ["b", "a"]})
    assert_clean(ab, ba)
    assert ab.status_code == ba.status_code == 200
    assert (ab.json()["n_x"], ab.json()["n_y"]) == (ba.json()["n_y"], ba.json()["n_x"])


def test_a_study_k_below_the_centers_k_is_refused(client: httpx.Client) -> None:
    """Attack: ask for tables at k=2 (the wire minimum), below the center's K."""
    answers = [
        client.post("/v1/datasets/d7/table", json={"variable": "x", "groups": ["a", "b"], "k": 2}),
        client.post("/v1/datasets/d7/table/refine",
                    json={"variable": "x", "groups": ["a", "b"], "k": 2,
                          "limits": [0.0, 50.0, 100.0]}),
    ]
    assert_clean(*answers)
    for r in answers:
        assert r.status_code == 403 and r.json()["error"] == "k_anonymity_refused", r.text
