"""The coordinator as operators run it: ``python -m coordinator`` under uvicorn, talking to real
``python -m center_agent`` processes on loopback ports; killed with SIGKILL mid-study and
restarted, its record of the study stays consistent."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from center_agent.gate.keys import write_key_pair
from coordinator.client import HttpCenter
from coordinator.core.config import CenterConfig, RetryPolicy
from coordinator.core.errors import CenterFailure
from coordinator.reporting.report import render_html, summary
from fedstats_cli.procs import free_port
from shared.binning import BinTable
from shared.heterogeneity import index_heterogeneity
from shared.hodges_lehmann import hodges_lehmann_table
from shared.mwu import mann_whitney, sum_test
from tests.helpers.config import write_toml
from tests.helpers.coordinator import (
    ANALYST_TOKEN,
    AUTH,
    CENTER_TOKENS,
    K,
    coordinator_config,
    csv_cohort,
    make_data,
)
from tests.helpers.processes import run_module, spawn, stop, wait_healthy
from tests.helpers.timing import scaled
from tests.helpers.tls import self_signed

pytestmark = pytest.mark.process


def center_config(directory: Path, cid: str, x: np.ndarray, y: np.ndarray, port: int,
                  **extra: Any) -> Path:
    """``cid``'s TOML in ``directory``: X and Y as its dataset ``cohort``, its token, a ledger."""
    return write_toml(directory / f"{cid}.toml", {
        "center_id": cid, "k": K, "tokens": [CENTER_TOKENS[cid]], "port": port,
        "ledger_url": f"sqlite:///{directory / f'{cid}-ledger.sqlite'}", **extra,
        "datasets": {"cohort": csv_cohort(directory / f"{cid}.csv", x, y)},
    })


def started(stack: contextlib.ExitStack, module: str, config: Path) -> Any:
    """``python -m <module>`` (:func:`~tests.helpers.processes.spawn`), stopped when ``stack``
    closes."""
    proc = spawn(module, config)
    stack.callback(stop, proc)
    return proc


def test_a_bad_configuration_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    config = write_toml(tmp_path / "coordinator.toml",
                        {"analyst_tokens": [ANALYST_TOKEN], "min_centers": 0,
                         "centers": {"alpha": {"url": "http://127.0.0.1:1",
                                               "token": CENTER_TOKENS["alpha"]}}})
    done = run_module("coordinator", "--config", str(config))
    assert done.returncode == 2
    assert "min_centers: Input should be greater than or equal to 1" in done.stderr
    assert "Traceback" not in done.stderr and CENTER_TOKENS["alpha"] not in done.stderr


def test_real_processes_and_a_sigkill_mid_study(tmp_path: Path) -> None:
    data = make_data()
    ports = {"alpha": free_port(), "beta": free_port()}
    # Each center signs its tables and trusts the other's key (peers/), so beta refines the
    # table alpha built.
    peers = tmp_path / "peers"
    peers.mkdir()
    for cid in ports:
        (peers / f"{cid}.pub").write_text(write_key_pair(tmp_path / f"{cid}.key") + "\n")
    center_configs = {cid: center_config(tmp_path, cid, *data[cid], ports[cid],
                                         signing_key_file=str(tmp_path / f"{cid}.key"),
                                         peer_keys_dir=str(peers)) for cid in ports}
    # gamma accepts connections (the kernel's backlog) and never answers.
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    gamma_port = silent.getsockname()[1]
    config, port = coordinator_config(
        tmp_path / "coordinator.toml",
        {cid: f"http://127.0.0.1:{p}" for cid, p in [*ports.items(), ("gamma", gamma_port)]},
        tokens=CENTER_TOKENS, min_centers=2, read_timeout_s=scaled(60.0))
    base = f"http://127.0.0.1:{port}"
    spec = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
            "analyses": [{"kind": "mwu", "tests": ["sum"]}]}
    with contextlib.ExitStack() as stack:
        stack.callback(silent.close)
        # All three start at once (imports take seconds); none needs another to start.
        centers = [(started(stack, "center_agent", center_configs[c]), ports[c],
                    center_configs[c]) for c in ports]
        coordinator = started(stack, "coordinator", config)
        for proc, p, c in [*centers, (coordinator, port, config)]:
            wait_healthy(proc, p, c)
        client = stack.enter_context(httpx.Client(base_url=base, headers=AUTH, timeout=10))
        # The first study also asks the table and the shift it allows: Q, I² and the shift
        # end to end between processes, and the report and summary the CLI draws from the
        # view it read over HTTP.
        done = client.post("/v1/studies", json={
            **spec, "centers": ["alpha", "beta"],
            "analyses": [*spec["analyses"], {"kind": "table"}, {"kind": "shift"}]})
        assert done.status_code == 202
        view = poll(client, done.json()["status_url"], until="succeeded")
        local = [mann_whitney(*data[c]) for c in ("alpha", "beta")]
        mwu, table, shift = view["result"]["analyses"]
        assert mwu["tests"]["sum"]["pvalue"] == pytest.approx(sum_test(local).pvalue, rel=1e-12)
        between = index_heterogeneity(local)
        assert mwu["heterogeneity"]["statistic"] == pytest.approx(between.statistic, rel=1e-12)
        assert mwu["heterogeneity"]["i_squared"] == pytest.approx(between.i_squared, abs=1e-12)
        expected = hodges_lehmann_table(BinTable(
            np.array([float(v) for v in table["limits"]]), np.array(table["counts"]), K))
        assert (shift["estimate_low"], shift["estimate_high"]) == (
            expected.estimate_low, expected.estimate_high)
        assert tuple(shift["interval"]) == expected.interval
        page, text = render_html(view), summary(view)
        assert "Hodges-Lehmann shift" in page and "Heterogeneity between centers" in page
        assert "Hodges-Lehmann shift" in text and "Cochran's Q" in text

        stuck = client.post("/v1/studies", json=spec).json()
        poll(client, stuck["status_url"], until="running")
        wait_for(lambda: len(client.get(stuck["status_url"]).json()["provenance"]) == 2)
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait(timeout=scaled(10))

        restarted = started(stack, "coordinator", config)
        wait_healthy(restarted, port, config)
        view = client.get(stuck["status_url"]).json()
        assert view["status"] == "failed_resumable"
        assert sorted(p["center"] for p in view["provenance"]) == ["alpha", "beta"]
        assert client.get(done.json()["status_url"]).json()["status"] == "succeeded"
        text = client.get("/v1/studies").text + client.get(stuck["status_url"]).text
        assert not any(token in text for token in CENTER_TOKENS.values())


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def poll(client: httpx.Client, url: str, *, until: str) -> dict[str, Any]:
    view: dict[str, Any] = {}

    def reached() -> bool:
        nonlocal view
        view = client.get(url).json()
        assert view["status"] in ("pending", "running", until), view
        return bool(view["status"] == until)

    wait_for(reached)
    return view



def test_a_center_behind_tls_with_its_ca_bundle(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    port = free_port()
    config = center_config(tmp_path, "gamma", *make_data()["gamma"], port,
                           tls_certfile=str(cert), tls_keyfile=str(key))
    url = f"https://127.0.0.1:{port}"

    async def ask(ca_bundle: Path | None) -> Any:
        center = HttpCenter(
            "gamma", CenterConfig(url=url, token=CENTER_TOKENS["gamma"], ca_bundle=ca_bundle),
            timeout=httpx.Timeout(10, connect=5),
            retry=RetryPolicy(attempts=1),
        )
        try:
            return await center.info()
        finally:
            await center.aclose()

    trusted = ssl.create_default_context(cafile=str(cert))
    with contextlib.ExitStack() as stack:
        proc = started(stack, "center_agent", config)
        # health over TLS, trusting the certificate
        wait_healthy(proc, port, config, scheme="https", verify=trusted)
        info = asyncio.run(ask(cert))
        assert info.center_id == "gamma"
        with pytest.raises(CenterFailure) as caught:  # the system CAs do not know it
            asyncio.run(ask(None))
        assert caught.value.kind == "unreachable" and "CERTIFICATE" in caught.value.detail.upper()
