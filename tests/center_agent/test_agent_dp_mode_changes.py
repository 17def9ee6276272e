"""DP mode shows nothing that depends on the data's change (docs/privacy.md §16, "No bit of a
data change"): a DP-mode level that gains or loses records, before and after a restart of the
services over the same ledger, gives a caller the same `/v1/info` (no pause, the same epoch),
the same refusals and DP releases of the same shape as data that did not change, each computed
from the data as they are (the audit trail names them); the operator's roll moves the epoch
without ``--force`` whether or not the data changed; a dataset switched back to K-anonymous mode
is checked against its K-anonymous epochs (not the DP-mode ones, never released exactly).

The property test runs two centers side by side over one random sequence of requests, restarts,
rolls and data changes, applied to one center's data only, and checks the caller's view of both
against each other and against a reference (the epoch is one plus the rolls, nothing paused,
every DP question answered, a question repeated in its epoch gets its stored answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pyarrow as pa
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from center_agent.audit import AuditQuery
from center_agent.core.config import load_settings
from center_agent.data import Dataset
from center_agent.main import create_app
from fedstats_cli.cli import main
from tests.helpers.attacks import seen
from tests.helpers.center import AUTH, TOKEN, K, dataset_config, make_table, write_csv
from tests.helpers.config import write_toml

D = "/v1/datasets/cohort"
BOUNDS = [0.0, 100.0]
MEDIAN: dict[str, Any] = {"variable": "x", "group": "a", "epsilon": 0.1, "bounds": BOUNDS,
                          "levels": [0.5]}
EXTREMES = {"variable": "x", "epsilon": 0.1, "bounds": BOUNDS}
TABLE = {"variable": "x", "groups": ["a", "b"], "k": K}


# -- a center over its own copy of the cohort ---------------------------------------------------


def config(folder: Path, release_mode: str = "dp") -> Path:
    """A center over ``folder/cohort.csv`` (``make_table``'s rows, written when missing)."""
    csv = folder / "cohort.csv"
    if not csv.exists():
        write_csv(make_table(), csv)
    dataset = dataset_config({"kind": "csv", "path": str(csv)}, epsilon_total=100.0)
    if release_mode == "dp":
        dataset |= {"release_mode": "dp", "declared_n_by_group": {"a": 70}}
    return write_toml(folder / "center.toml", {
        "center_id": "hospital-test", "k": K, "tokens": [TOKEN],
        "ledger_url": f"sqlite:///{folder / 'ledger.sqlite'}",
        "datasets": {"cohort": dataset},
    })


def change(folder: Path, records: int) -> None:
    """The data of ``folder`` with ``records`` more records of level a (fewer when negative:
    the last records of level a removed), every other record as it was."""
    data = make_table()
    rows = data.to_pylist()
    if records >= 0:
        row = {**rows[10], "arm": "a", "x": 55.5}
        rows += [row] * records
    else:
        # Counted records (complete cases: x and a finite y), so each removal shows.
        of_a = [i for i, r in enumerate(rows) if r["arm"] == "a" and r["y"] is not None
                and r["y"] != float("inf")][records:]
        rows = [r for i, r in enumerate(rows) if i not in of_a]
    write_csv(pa.Table.from_pylist(rows, schema=data.schema), folder / "cohort.csv")


def fingerprint(folder: Path) -> str:
    """The fingerprint of the data of ``folder`` as they are (the operator's view)."""
    settings_ = load_settings(folder / "center.toml")
    dataset = Dataset("cohort", settings_.datasets["cohort"], settings_.k)
    try:
        return dataset.population().fingerprint
    finally:
        dataset.source.close()


class Center:
    """A center's services, in process, restarted at will over the same ledger and data."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.app = self._start()

    def _start(self) -> FastAPI:
        return create_app(load_settings(self.folder / "center.toml"))

    def restart(self) -> None:
        self.close()
        self.app = self._start()

    def close(self) -> None:
        self.app.state.services.close()

    def ask(self, method: str, path: str, body: Any = None) -> httpx.Response:
        async def run() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
                return await client.request(method, path, json=body, headers=AUTH)

        return anyio.run(run)

    def info(self) -> dict[str, Any]:
        """``/v1/info`` less the signing key (each ledger makes its own)."""
        r = self.ask("GET", "/v1/info")
        assert r.status_code == 200, r.text
        return {k: v for k, v in r.json().items() if k != "signing_key"}

    def released_from(self) -> list[str]:
        """The data fingerprint of every `released` audit record, oldest first."""
        records = self.app.state.services.gate.audit(AuditQuery()).records
        return [r.data_fingerprint for r in records if r.outcome == "released"]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Center, Center]]:
    """Two centers over equal data, each with its own ledger: one's data will change."""
    centers = []
    for name in ("changed", "unchanged"):
        (tmp_path / name).mkdir()
        config(tmp_path / name)
        centers.append(Center(tmp_path / name))
    yield centers[0], centers[1]
    for center in centers:
        center.close()


# -- a change, before and after a restart -------------------------------------------------------


@pytest.mark.parametrize("records", [1, K - 1, K, 3 * K, -1, -(K - 1)])
def test_a_change_shows_nothing_before_or_after_a_restart(
        pair: tuple[Center, Center], records: int) -> None:
    changed, unchanged = pair
    before = {}
    for center in pair:
        assert center.info()["datasets"][0]["epoch"] == 1
        before[center.folder.name] = center.ask("POST", f"{D}/dp/quantiles", MEDIAN)
        assert before[center.folder.name].status_code == 200
    change(changed.folder, records)
    new_data = fingerprint(changed.folder)
    assert new_data != fingerprint(unchanged.folder)

    for restart in (False, True):
        if restart:  # a process that does not hold the epoch's population
            for center in pair:
                center.restart()
        views = {}
        for center in pair:
            views[center.folder.name] = [
                center.info(),
                seen(center.ask("POST", f"{D}/dp/extremes",
                                {**EXTREMES, "epsilon": 0.1 + restart})),
                seen(center.ask("POST", f"{D}/table", TABLE)),
                seen(center.ask("POST", f"{D}/mwu", {"variable": "x", "groups": ["a", "b"]})),
                center.ask("GET", "/v1/budget/cohort").json(),
            ]
            # The question asked before the change: its stored answer, as it was.
            again = center.ask("POST", f"{D}/dp/quantiles", MEDIAN)
            assert again.status_code == 200 and again.json() == before[center.folder.name].json()
        assert views["changed"] == views["unchanged"]
        (dataset,) = views["changed"][0]["datasets"]
        assert (dataset["epoch"], dataset["paused"], dataset["available"]) == (1, False, True)
        assert views["changed"][1][0] == 200  # answered, not 409 data_changed
        assert views["changed"][2][1]["error"] == "dp_mode_refuses_exact"
    # Each new DP release came from the data as they were when asked, not from a held epoch.
    assert changed.released_from()[1:] == [new_data, new_data]
    assert len(set(unchanged.released_from())) == 1


def test_the_operator_rolls_a_dp_epoch_without_force_whatever_the_data(
        pair: tuple[Center, Center], capsys: pytest.CaptureFixture[str]) -> None:
    changed, _unchanged = pair
    for center in pair:
        assert center.ask("POST", f"{D}/dp/quantiles", MEDIAN).status_code == 200
    change(changed.folder, 1)
    for center in pair:
        # The report reads no check: nothing is held in DP mode.
        assert main(["center", "epoch", "--config", str(center.folder / "center.toml")]) == 0
        report = capsys.readouterr().out
        assert "epoch 1" in report and "DP mode" in report and "held" not in report
        assert main(["center", "epoch", "--roll",
                     "--config", str(center.folder / "center.toml")]) == 0
        assert "started epoch 2" in capsys.readouterr().out
    views = []
    for center in pair:
        assert center.info()["datasets"][0]["epoch"] == 2
        # A new epoch: the question is asked afresh, paid again.
        again = center.ask("POST", f"{D}/dp/quantiles", MEDIAN)
        assert again.status_code == 200
        spent = center.ask("GET", "/v1/budget/cohort").json()["spent_epsilon"]
        assert spent == pytest.approx(2 * MEDIAN["epsilon"])
        views.append((center.info(), seen(again), spent))
    assert views[0] == views[1]
    assert changed.released_from()[-1] == fingerprint(changed.folder)


# -- the mode switched by the operator -----------------------------------------------------------


def test_back_to_k_anonymous_the_check_protects_the_k_anonymous_epochs(tmp_path: Path) -> None:
    """k_anonymous (epoch 1, a table released) → dp (epoch 2, whatever the data) →
    k_anonymous: data one record away from epoch 1 pause exact releases (409 data_changed),
    data K + 1 records away from epoch 1 but one from the DP epoch's pass (a new epoch 3), and
    data equal to the DP epoch's are checked all the same."""
    config(tmp_path, "k_anonymous")
    center = Center(tmp_path)
    try:
        table = center.ask("POST", f"{D}/table", TABLE)
        assert table.status_code == 200, table.text
        config(tmp_path, "dp")
        change(tmp_path, K)  # the DP epoch starts on K more records of level a
        center.restart()
        assert center.info()["datasets"][0]["epoch"] == 2
        assert center.ask("POST", f"{D}/dp/quantiles", MEDIAN).status_code == 200
        # Back on data one record away from epoch 1's (the DP epoch's started K away).
        change(tmp_path, 1)
        config(tmp_path, "k_anonymous")
        center.restart()
        refused = center.ask("POST", f"{D}/table", TABLE)
        assert refused.status_code == 409 and refused.json()["error"] == "data_changed"
        (dataset,) = center.info()["datasets"]
        assert dataset["paused"] is True and dataset["epoch"] == 2
        assert main(["center", "epoch", "--roll", "--config",
                     str(tmp_path / "center.toml")]) == 1  # refused without --force
        # One record more than the DP epoch's data, K + 1 more than epoch 1's: the DP epoch is
        # no version to subtract from, so this passes the check, in epoch 3.
        change(tmp_path, K + 1)
        after = center.ask("POST", f"{D}/table", TABLE)
        assert after.status_code == 200, after.text
        assert center.info()["datasets"][0]["epoch"] == 3
        assert sum(after.json()["counts"][0]) == sum(table.json()["counts"][0]) + K + 1
    finally:
        center.close()


def test_data_equal_to_the_dp_epochs_are_checked_in_k_anonymous_mode(tmp_path: Path) -> None:
    """The DP epoch's data were never checked: K-anonymous mode does not take them for an
    epoch's own (equal fingerprint), it checks them against epoch 1."""
    config(tmp_path, "k_anonymous")
    center = Center(tmp_path)
    try:
        assert center.ask("POST", f"{D}/table", TABLE).status_code == 200
        config(tmp_path, "dp")
        change(tmp_path, 1)
        center.restart()
        assert center.info()["datasets"][0]["epoch"] == 2  # pinned on one more record
        config(tmp_path, "k_anonymous")
        center.restart()  # the data unchanged since the DP epoch began
        refused = center.ask("POST", f"{D}/table", TABLE)
        assert refused.status_code == 409 and refused.json()["error"] == "data_changed"
        change(tmp_path, 0)  # epoch 1's data again: they pass, in a new epoch
        assert center.ask("POST", f"{D}/table", TABLE).status_code == 200
        assert center.info()["datasets"][0]["epoch"] == 3
    finally:
        center.close()


def test_dp_mode_after_k_anonymous_starts_its_own_epoch(tmp_path: Path) -> None:
    """A DP question stored in a K-anonymous epoch (its n_public a size rounded to K) is not
    served in DP mode: DP mode starts an epoch of its own, data changed or not."""
    config(tmp_path, "k_anonymous")
    center = Center(tmp_path)
    try:
        k_anon = center.ask("POST", f"{D}/dp/quantiles", MEDIAN)
        assert k_anon.status_code == 200 and k_anon.json()["n_public"] % K == 0
        config(tmp_path, "dp")
        center.restart()
        dp = center.ask("POST", f"{D}/dp/quantiles", MEDIAN)
        assert dp.status_code == 200 and dp.json()["n_public"] == 70  # the declared size
        assert center.info()["datasets"][0]["epoch"] == 2
    finally:
        center.close()


# -- as a property: two centers, one sequence, one center's data changing ------------------------

STEPS = st.lists(st.one_of(
    st.tuples(st.just("info")),
    st.tuples(st.just("ask"), st.integers(0, 3)),  # one of four DP questions
    st.tuples(st.just("exact")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("roll")),
    st.tuples(st.just("change"), st.integers(-K, 2 * K)),
), min_size=3, max_size=12)

QUESTIONS = [(f"{D}/dp/quantiles", MEDIAN), (f"{D}/dp/extremes", EXTREMES),
             (f"{D}/dp/threshold-counts", {**EXTREMES, "lower": 40.0, "upper": 60.0}),
             (f"{D}/dp/quantiles", {**MEDIAN, "group": "b", "levels": [0.25, 0.75]})]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=STEPS)
def test_the_callers_view_never_depends_on_the_data(tmp_path_factory: Any,
                                                    steps: list[tuple[Any, ...]]) -> None:
    note(f"steps={steps}")
    folder = tmp_path_factory.mktemp("pair")
    centers = []
    for name in ("changed", "unchanged"):
        (folder / name).mkdir()
        config(folder / name)
        centers.append(Center(folder / name))
    changed, _unchanged = centers
    epoch, started = 1, False  # the reference: an epoch starts on the first info or release
    answers: dict[tuple[int, int], Any] = {}  # (epoch, question) → the changed center's answer
    try:
        for step in steps:
            if step[0] == "change":
                change(changed.folder, step[1])
                continue
            if step[0] == "restart":
                for center in centers:
                    center.restart()
                continue
            if step[0] == "roll":
                for center in centers:
                    assert main(["center", "epoch", "--roll", "--config",
                                 str(center.folder / "center.toml")]) == 0
                epoch += started  # a roll before any epoch leaves none to roll
                continue
            started = started or step[0] in ("info", "ask")
            views: list[Any] = []
            for center in centers:
                if step[0] == "info":
                    views.append(center.info())
                elif step[0] == "exact":
                    views.append(seen(center.ask("POST", f"{D}/table", TABLE)))
                else:
                    r = center.ask("POST", *QUESTIONS[step[1]])
                    views.append(seen(r))
                    if center is changed:
                        # The reference: answered, and a repeat in its epoch is the stored one.
                        assert r.status_code == 200, r.text
                        fresh = (epoch, step[1]) not in answers
                        stored = answers.setdefault((epoch, step[1]), r.json())
                        assert r.json() == stored
                        if fresh:  # computed from the data as they are, never held ones
                            assert changed.released_from()[-1] == fingerprint(changed.folder)
            assert views[0] == views[1]
            if step[0] == "info":
                (dataset,) = views[0]["datasets"]
                assert (dataset["epoch"], dataset["paused"]) == (epoch, False)
            if step[0] == "exact":
                assert views[0][1]["error"] == "dp_mode_refuses_exact"
    finally:
        for center in centers:
            center.close()
