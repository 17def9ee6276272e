"""``fedstats catalog``, ``fedstats centers`` and ``fedstats study plan`` against a real
coordinator and centers (processes on loopback ports): tables for people, ``--json`` for
scripts, exit 0 when answered, 1 when the plan has refusals, 2 for usage and configuration
(docs/coordinator.md, "Catalog" and "Dry run")."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from fedstats_cli.procs import free_port
from tests.helpers.center import AUTH as CENTER_AUTH
from tests.helpers.center import K, center_config
from tests.helpers.coordinator import ANALYST_TOKEN, coordinator_config
from tests.helpers.processes import clean_env, fedstats, running_center, running_coordinator

pytestmark = pytest.mark.process

STUDY = """\
dataset = "cohort"
variable = "{variable}"
groups = ["a", "b"]
k = {k}
centers = ["alpha", "beta"]

[[analyses]]
kind = "mwu"
tests = ["sum", "table"]
epsilon = 0.5

[[analyses]]
kind = "dp_quantiles"
epsilon = 0.25
bounds = [0.0, 100.0]
levels = [0.5]
group = "a"
"""


CENTER_URLS: dict[str, str] = {}


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A coordinator of alpha and beta (running, their URLs in CENTER_URLS) and gamma (a
    closed port)."""
    workdir = tmp_path_factory.mktemp("catalog")
    with ExitStack() as stack:
        urls = {}
        for cid, n in (("alpha", 157), ("beta", 123)):
            config, port = center_config(workdir, {"cohort": 3.0}, name=cid, n=n)
            stack.enter_context(running_center(config, port))
            urls[cid] = f"http://127.0.0.1:{port}"
        urls["gamma"] = f"http://127.0.0.1:{free_port()}"
        config, port = coordinator_config(workdir / "coordinator.toml", urls, min_centers=2,
                                          connect_timeout_s=1.0, retry={"attempts": 1})
        stack.enter_context(running_coordinator(config, port))
        CENTER_URLS.update(urls)
        yield f"http://127.0.0.1:{port}"


def cli(*args: str, token: str | None = ANALYST_TOKEN) -> subprocess.CompletedProcess[str]:
    env = clean_env(FEDSTATS_ANALYST_TOKEN=token) if token else clean_env()
    return subprocess.run([*fedstats(), *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_catalog_and_centers(coordinator: str) -> None:
    as_json = cli("catalog", "--coordinator", coordinator, "--json")
    assert as_json.returncode == 0, as_json.stderr
    catalog = json.loads(as_json.stdout)
    [cohort] = catalog["datasets"]
    assert (cohort["variables"], cohort["levels"]) == (["x", "y"], ["a", "b"])
    for entry in cohort["centers"]:
        # What the center publishes itself, and never finer than its K.
        info = httpx.get(f"{CENTER_URLS[entry['center']]}/v1/info", headers=CENTER_AUTH).json()
        assert entry["n_by_group"] == info["datasets"][0]["n_by_group"]
        assert entry["n_records"] == info["datasets"][0]["n_records"]
        assert all(n % K == 0 for n in entry["n_by_group"].values())
        assert entry["remaining_epsilon"] == pytest.approx(3.0)
    gamma = next(c for c in catalog["centers"] if c["id"] == "gamma")
    assert gamma["problem"]["kind"] == "unreachable"

    human = cli("catalog", "--coordinator", coordinator)
    assert human.returncode == 0, human.stderr
    assert "dataset cohort: variables x, y; group levels a, b" in human.stdout
    assert "gamma: unreachable" in human.stdout
    assert ANALYST_TOKEN not in human.stdout + human.stderr

    centers = cli("centers", "--coordinator", coordinator)
    assert centers.returncode == 0, centers.stderr
    lines = centers.stdout.splitlines()
    assert lines[0].split() == ["center", "url", "healthy", "ε", "left", "problem"]
    assert any(line.startswith("alpha") and " yes " in line for line in lines)
    assert any(line.startswith("gamma") and "unreachable" in line for line in lines)


def test_study_plan(coordinator: str, tmp_path: Path) -> None:
    study = tmp_path / "study.toml"
    study.write_text(STUDY.format(variable="x", k=K))
    planned = cli("study", "plan", str(study), "--coordinator", coordinator, "--json")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["would_run"] is True and plan["refusals"] == []
    assert [c["epsilon"] for c in plan["centers"]] == pytest.approx([0.75, 0.75])

    human = cli("study", "plan", str(study), "--coordinator", coordinator)
    assert human.returncode == 0, human.stderr
    assert "the study would run" in human.stdout
    assert "federated table: new, alpha new, beta new" in human.stdout
    assert any(line.split()[:3] == ["alpha", str(K), "0.75"] for line in human.stdout.splitlines())

    # An unknown variable and a K below the centers': refusals, exit 1, nothing spent.
    study.write_text(STUDY.format(variable="nope", k=5))
    refused = cli("study", "plan", str(study), "--coordinator", coordinator)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "unknown_name at alpha: variable 'nope'" in refused.stdout
    assert "center_k at beta" in refused.stdout and "would NOT run" in refused.stdout
    catalog = json.loads(cli("catalog", "--coordinator", coordinator, "--json").stdout)
    assert all(e["remaining_epsilon"] == pytest.approx(3.0)
               for e in catalog["datasets"][0]["centers"])


def test_usage_and_configuration_errors_exit_2(coordinator: str, tmp_path: Path) -> None:
    no_token = cli("catalog", "--coordinator", coordinator, token=None)
    assert no_token.returncode == 2 and "FEDSTATS_ANALYST_TOKEN" in no_token.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('dataset = "cohort"\nvariable = "x"\nanalyses = []\n')
    invalid = cli("study", "plan", str(bad), "--coordinator", coordinator)
    assert invalid.returncode == 2 and "analyses" in invalid.stderr
    refused = cli("centers", "--coordinator", coordinator, token="wrong-" + "0" * 20)
    assert refused.returncode == 1 and "401" in refused.stderr


def test_a_reused_table_is_printed_by_what_it_is() -> None:
    """``fedstats study plan`` prints a kept table the study would read by what it is; the
    study that obtained it only when the coordinator shows it (an admin, or its owner)."""
    from fedstats_cli.catalog import render_plan

    reused = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": 10,
              "lower": "buffer", "upper": "buffer", "centers": {"alpha": 1, "beta": 2},
              "obtained_at": "2026-12-02T08:00:00+00:00"}
    planned = {"reused": reused, "reused_from": None, "centers": ["alpha", "beta"],
               "releases": {}, "detail": "the kept table of 'crp' ... is reused", "kept": []}
    plan = {"dataset": "cohort", "variable": "crp", "centers": [], "refusals": [],
            "would_run": True, "table": planned}
    text = render_plan(plan)
    assert ("federated table: a kept table reused (K 10, alpha epoch 1, beta epoch 2, "
            "obtained 2026-12-02T08:00:00+00:00)\n") in text
    assert "from study" not in text
    planned["reused_from"] = "s-0001"
    assert "obtained 2026-12-02T08:00:00+00:00), from study s-0001\n" in render_plan(plan)
