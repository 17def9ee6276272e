"""The bit of a data change in DP mode, attacked on a real center process (docs/privacy.md §16,
"No bit of a data change").

The attacker holds a token and knows every record but the ones that change. It wants to learn
whether a DP-mode dataset's data changed, and whether a change moved a count by 1..K-1 (on the
K-anonymous path such a change is held, and a restarted center pauses the dataset with 409
``data_changed``). One center serves six datasets over equal copies of one file in DP mode: one
is left as it is, the others gain 1, K-1, K or 2K+3 records of one level or lose one. The
attacker asks the same questions of each, while the data change (concurrently), after the change,
after a restart of the process and after the operator's roll, and compares what each dataset
shows with what the unchanged one shows: `/v1/info`, the status and body of every refusal, the
shape of every DP release, the stored answer to a repeated question, the budget and the epoch.
They must be identical; the attack finds no difference."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from tests.helpers.attacks import seen
from tests.helpers.center import AUTH, K, center_config, make_table, write_csv
from tests.helpers.processes import run_module, running_center

pytestmark = pytest.mark.process

SAME = "dsame"
CHANGES = {"dadd1": 1, f"dadd{K - 1}": K - 1, f"dadd{K}": K, f"dadd{2 * K + 3}": 2 * K + 3,
           "ddrop1": -1}
DATASETS = [SAME, *CHANGES]
DP_MODE = {"release_mode": "dp", "declared_n_by_group": {"a": 70}}
BOUNDS = [0.0, 100.0]
MEDIAN = {"variable": "x", "group": "a", "epsilon": 0.1, "bounds": BOUNDS, "levels": [0.5]}
EXTREMES = {"variable": "x", "group": "a", "epsilon": 0.1, "bounds": BOUNDS}
EXACT: list[tuple[str, dict[str, Any]]] = [
    ("table", {"variable": "x", "groups": ["a", "b"], "k": K}),
    ("mwu", {"variable": "x", "groups": ["a", "b"]}),
    ("dp/boxplot", {"variable": "x", "group": "b", "epsilon": 0.1, "bounds": BOUNDS}),
]


def changed_data(records: int) -> pa.Table:
    """The cohort with ``records`` more records of level a (one fewer counted one: -1)."""
    data = make_table()
    rows = data.to_pylist()
    if records >= 0:
        rows += [{**rows[10], "arm": "a", "x": 55.5}] * records
    else:
        last = max(i for i, r in enumerate(rows) if r["arm"] == "a" and r["y"] is not None
                   and r["y"] != float("inf"))
        del rows[last]
    return pa.Table.from_pylist(rows, schema=data.schema)


def replace_csv(table: pa.Table, path: Path) -> None:
    """Write the file whole, then move it in place: a reader sees one version or the other."""
    part = path.with_suffix(".part")
    write_csv(table, part)
    os.replace(part, path)


def anonymous(text: str, dataset: str) -> Any:
    """A JSON answer with the dataset's name replaced (it is in refusal texts)."""
    return json.loads(re.sub(rf"\b{dataset}\b", "D", text))


class Attacker:
    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client, self.url = client, url

    def ask(self, dataset: str, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(f"{self.url}/datasets/{dataset}/{path}", json=body)

    def info(self) -> dict[str, Any]:
        r = self.client.get(f"{self.url}/info")
        assert r.status_code == 200, r.text
        return {d["name"]: {k: v for k, v in d.items() if k != "name"}
                for d in r.json()["datasets"]}

    def view(self, dataset: str, fresh: dict[str, Any]) -> dict[str, Any]:
        """Everything a caller can see of one dataset now: its `/v1/info` entry, the exact
        kinds' refusals, a new DP question's release and its budget."""
        budget = self.client.get(f"{self.url}/budget/{dataset}")
        return {
            "info": self.info()[dataset],
            "exact": [(r.status_code, anonymous(r.text, dataset))
                      for r in (self.ask(dataset, p, b) for p, b in EXACT)],
            "fresh": seen(self.ask(dataset, "dp/extremes", fresh)),
            "budget": (budget.status_code, anonymous(budget.text, dataset)),
        }


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[Path, int, dict[str, Path]]]:
    config, port = center_config(tmp_path, dict.fromkeys(DATASETS, 100.0), name="dpc",
                                 declared=dict.fromkeys(DATASETS, DP_MODE))
    sources = {ds: tmp_path / ("dpc.csv" if ds == SAME else f"dpc-{ds}.csv") for ds in DATASETS}
    assert all(path.exists() for path in sources.values())
    yield config, port, sources


def assert_alike(views: dict[str, dict[str, Any]], when: str) -> None:
    for dataset in CHANGES:
        assert views[dataset] == views[SAME], (when, dataset)


def test_a_dp_mode_change_is_not_seen_by_the_attacker(
        files: tuple[Path, int, dict[str, Path]]) -> None:
    config, port, sources = files
    url = f"http://127.0.0.1:{port}/v1"
    with httpx.Client(headers=AUTH, timeout=120) as client:
        attacker = Attacker(client, url)
        with running_center(config, port):
            first = {ds: attacker.ask(ds, "dp/quantiles", MEDIAN) for ds in DATASETS}
            assert {r.status_code for r in first.values()} == {200}
            assert_alike({ds: attacker.view(ds, EXTREMES) for ds in DATASETS}, "before")
            # The data change while the attacker asks, concurrently, of every dataset.
            asks = [(ds, {**EXTREMES, "epsilon": 0.01 * (i + 1)})
                    for i in range(4) for ds in DATASETS]
            with ThreadPoolExecutor(4) as pool:
                during = pool.map(lambda a: attacker.ask(a[0], "dp/extremes", a[1]), asks)
                for ds, records in CHANGES.items():
                    replace_csv(changed_data(records), sources[ds])
                statuses = [r.status_code for r in during]
            assert statuses == [200] * len(asks)  # never 409 data_changed, never 503
            assert_alike({ds: attacker.view(ds, {**EXTREMES, "epsilon": 0.2})
                          for ds in DATASETS}, "after the change")
            repeated = {ds: attacker.ask(ds, "dp/quantiles", MEDIAN) for ds in DATASETS}
            assert all(repeated[ds].json() == first[ds].json() for ds in DATASETS)
        # A new process: it never held the epoch's population, and needs none.
        with running_center(config, port):
            views = {ds: attacker.view(ds, {**EXTREMES, "epsilon": 0.3}) for ds in DATASETS}
            assert_alike(views, "after a restart")
            assert views[SAME]["info"]["epoch"] == 1 and views[SAME]["info"]["paused"] is False
            assert views[SAME]["fresh"][0] == 200
            assert {s for s, _body in views[SAME]["exact"]} == {403}
            repeated = {ds: attacker.ask(ds, "dp/quantiles", MEDIAN) for ds in DATASETS}
            assert all(repeated[ds].json() == first[ds].json() for ds in DATASETS)
            # The operator rolls, with no --force, the changed and the unchanged alike.
            rolled = run_module("fedstats_cli", "center", "epoch", "--config", str(config),
                                "--roll", timeout_s=120)
            assert rolled.returncode == 0, rolled.stdout + rolled.stderr
            assert rolled.stdout.count("started epoch 2") == len(DATASETS), rolled.stdout
            views = {ds: attacker.view(ds, {**EXTREMES, "epsilon": 0.4}) for ds in DATASETS}
            assert_alike(views, "after the roll")
            assert views[SAME]["info"]["epoch"] == 2
            # A new epoch: the old question is asked afresh (paid again) on every dataset.
            again = {ds: seen(attacker.ask(ds, "dp/quantiles", MEDIAN)) for ds in DATASETS}
            assert all(again[ds] == again[SAME] for ds in CHANGES)
            assert again[SAME][0] == 200
    # The operator's audit trail: the changed datasets' releases really came from two versions
    # of their data (the attack ran on a real change), the unchanged one's from one.
    trail = run_module("fedstats_cli", "center", "audit", "--config", str(config), "--format",
                       "json", timeout_s=120)
    assert trail.returncode == 0, trail.stderr
    versions: dict[str, set[str]] = {ds: set() for ds in DATASETS}
    for record in json.loads(trail.stdout):
        if record["outcome"] == "released":
            versions[record["dataset"]].add(record["data_fingerprint"])
    assert len(versions[SAME]) == 1
    assert all(len(versions[ds]) == 2 for ds in CHANGES), versions
