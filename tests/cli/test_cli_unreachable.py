"""An unreachable coordinator is named with its URL and what to check, in the CLI and the
Python client (not a bare ``[Errno 111] Connection refused``)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from fedstats_cli.cli import main
from fedstats_client import Client
from fedstats_client.errors import ConnectionFailed


@pytest.fixture
def refusing() -> Iterator[str]:
    """A URL whose port is bound but not listening: every connection is refused (the OS
    chose the port and holds it, so no other process answers there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_cli_names_the_url_and_the_check(refusing: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["study", "status", "f" * 32, "--coordinator", refusing, "--token", "t"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot reach the coordinator at {refusing}" in err
    assert f"fedstats health {refusing}" in err and "--coordinator" in err


def test_the_python_client_names_the_url_and_the_check(refusing: str) -> None:
    with Client(refusing, token="t") as client, pytest.raises(ConnectionFailed) as caught:
        client.studies()
    assert caught.value.code == "unreachable"
    assert f"cannot reach the coordinator at {refusing}" in caught.value.detail
    assert f"fedstats health {refusing}" in caught.value.detail
