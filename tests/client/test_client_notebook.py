"""``examples/analyst.ipynb`` executed as an analyst runs it (nbclient, the ipykernel of this
Python) against real services: three synthetic hospitals and a coordinator started as
``fedstats demo`` starts them, their URL and token passed in the environment."""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from center_agent.gate.keys import write_key_pair
from fedstats_cli import synth
from fedstats_cli.procs import free_port
from fedstats_cli.settings_files import write_toml
from tests.helpers.processes import REPO, running_center, running_coordinator
from tests.helpers.timing import scaled

NOTEBOOK = REPO / "examples" / "analyst.ipynb"
K = 10

pytestmark = [pytest.mark.process, pytest.mark.slow]


def federation_configs(workdir: Path, *, categorical: bool = False
                       ) -> tuple[dict[str, tuple[Path, int]], Path, int, str]:
    """The demo's federation (``fedstats_cli.demo``): each hospital's CSV and TOML (its own
    token and signing key, the others' keys as peers), and the coordinator's TOML with a fresh
    analyst token. ``categorical``: the centers also declare the CSV's smoking column (its
    public categories). Returns (center -> (config, port), coordinator config, its port,
    token)."""
    keys = {h.center_id: write_key_pair(workdir / f"{h.center_id}.key")
            for h in synth.HOSPITALS}
    centers: dict[str, tuple[Path, int]] = {}
    tokens: dict[str, str] = {}
    for h in synth.HOSPITALS:
        csv = synth.write_hospital(h.center_id, workdir / f"{h.center_id}.csv",
                                   synth.DEFAULT_SEED)
        port, tokens[h.center_id] = free_port(), secrets.token_urlsafe(32)
        declared = {"categorical": {synth.SMOKING: list(synth.SMOKING_LEVELS)}
                    } if categorical else {}
        config = write_toml(
            workdir / f"{h.center_id}.toml",
            {"center_id": h.center_id, "k": K, "tokens": [tokens[h.center_id]],
             "host": "127.0.0.1", "port": port,
             "ledger_url": f"sqlite:///{workdir / f'{h.center_id}-ledger.sqlite'}",
             "signing_key_file": str(workdir / f"{h.center_id}.key"),
             "peers": {cid: key for cid, key in keys.items() if cid != h.center_id}},
            {f"datasets.{synth.DATASET}": {
                "source": {"kind": "csv", "path": str(csv)},
                "variables": [synth.VARIABLE],
                "group": {"column": synth.GROUP_COLUMN, "levels": list(synth.LEVELS)},
                "epsilon_total": 3.0, **declared}},
        )
        centers[h.center_id] = (config, port)
    analyst_token, port = secrets.token_urlsafe(32), free_port()
    coordinator = write_toml(
        workdir / "coordinator.toml",
        {"analyst_tokens": [analyst_token], "min_centers": 2, "host": "127.0.0.1",
         "port": port, "read_timeout_s": scaled(60.0),
         "store_url": f"sqlite:///{workdir / 'coordinator.sqlite'}"},
        {f"centers.{cid}": {"url": f"http://127.0.0.1:{p}", "token": tokens[cid]}
         for cid, (_, p) in centers.items()},
    )
    return centers, coordinator, port, analyst_token


def text_of(cell: Any) -> str:
    """Everything a code cell showed, as text (plain, HTML, streams)."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        data = output.get("data", {})
        parts += [data.get("text/plain", ""), data.get("text/html", "")]
    return "\n".join(parts)


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(URL, analyst token) of a running federation; every process stopped afterwards."""
    centers, config, port, token = federation_configs(tmp_path)
    (a_config, a_port), (b_config, b_port), (c_config, c_port) = centers.values()
    with running_center(a_config, a_port), running_center(b_config, b_port), \
            running_center(c_config, c_port), running_coordinator(config, port):
        yield f"http://127.0.0.1:{port}", token


def test_the_analyst_notebook_runs_against_real_services(
    coordinator: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from ipykernel.kernelspec import install
    from nbclient import NotebookClient

    url, token = coordinator
    # The kernel is this Python's: its kernelspec installed in a folder of the test's own.
    prefix = tmp_path / "jupyter"
    install(prefix=str(prefix), kernel_name="python3")
    spec = (prefix / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").read_text()
    assert sys.executable in spec
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("FEDSTATS_COORDINATOR_URL", url)
    monkeypatch.setenv("FEDSTATS_ANALYST_TOKEN", token)
    monkeypatch.setenv("PYTHONPATH", str(REPO))

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()

    cells = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(not any(o.get("output_type") == "error" for o in c.outputs) for c in cells)
    shown = [text_of(c) for c in cells]
    assert "hospital_a" in shown[1] and "hospital_c" in shown[1]
    assert "succeeded" in shown[2], shown[2]
    for test in ("sum", "weighted", "fisher", "table", "pvalue"):
        assert test in shown[3]
    assert "stratified" in shown[4]
    assert any("image/png" in o.get("data", {}) for o in cells[5].outputs), "no boxplot drawn"
    plain = [o.get("data", {}).get("text/plain", "") for o in cells[6].outputs]
    assert "".join(plain).count("included") == 3
    # The progress in Jupyter: a display updated in place, showing the final status.
    progress = [o for o in cells[2].outputs if o.get("output_type") == "display_data"]
    assert len(progress) == 1
    assert "succeeded" in progress[0]["data"]["text/plain"]
    assert "releases received" in progress[0]["data"]["text/plain"]
    assert token not in "".join(shown)
