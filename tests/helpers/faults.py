"""A TCP proxy in front of a real center process that can SIGKILL the center the moment a
request for a given step has been forwarded to it (whatever the center answers to that request
is dropped, so a fast center cannot answer before it dies), or hold the center's answer to it
back for good (the client gives up on its own read timeout, however slow the machine). It runs
its own event loop in a thread and reads only the request line (the path) and, for a batch of
releases (``POST /v1/datasets/{dataset}/releases``, ``coordinator.batching``), the kinds its
body names: a batch holding the step's release is that step's request too.

A fault fires once per arming (:meth:`Fault.arm`): the first request of its step is the one
killed or held, and ``fired`` counts exactly that. Requests of the step after it (a client's
retry, which on a loaded machine may still reach the dying center's listening socket, or the
next batch holding the same kind) pass untouched and are only counted in ``hits``: a retry is
never a second kill."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from shared.kinds import BATCH_PATH, KINDS
from tests.helpers.timing import scaled


@dataclass
class Fault:
    """What the proxy does to the first request whose path ends with ``path`` (or the first
    batch holding that step's release) once armed: ``kill`` the center right after forwarding
    it (its answer never reaches the client), or ``hold`` its answer (never forwarded).

    ``fired``: how many times it acted (at most once per arming); ``hits``: the step's requests
    seen since armed, the fired one and any retries after it; ``seen``: every request path."""

    path: str | None = None
    kill: bool = False
    hold: bool = False
    fired: int = 0
    hits: int = 0
    seen: list[str] = field(default_factory=list)

    def arm(self, path: str, *, kill: bool = False, hold: bool = False) -> None:
        """Act on the next request of ``path``'s step (counts reset)."""
        self.kill, self.hold, self.fired, self.hits, self.seen = kill, hold, 0, 0, []
        self.path = path

    def disarm(self) -> None:
        """Forward everything untouched from now on (counts kept)."""
        self.path, self.kill, self.hold = None, False, False

    def take(self) -> bool:
        """A request of the step arrives: whether the fault acts on it (the first one only)."""
        self.hits += 1
        if self.fired or not (self.kill or self.hold):
            return False
        self.fired += 1
        return True


class Proxy:
    def __init__(self, upstream_port: int, proc: Callable[[], subprocess.Popen[bytes]]) -> None:
        self.upstream_port = upstream_port
        self.proc = proc  # the center process of the moment (it is restarted between cases)
        self.fault = Fault()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = int(sock.getsockname()[1])
        self._sock = sock
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=scaled(10))

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            for writer in list(self._writers):
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            if self._server is not None:
                await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=scaled(10))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=scaled(10))
        self._loop.close()

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, sock=self._sock)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        assert me is not None
        self._handlers.add(me)
        self._writers.add(client_w)
        try:
            await self._pipe(client_r, client_w)
        finally:
            self._handlers.discard(me)

    async def _pipe(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_w.close()
            return
        self._writers.add(up_w)
        # Set by the request side, taken by the answer side of this connection: whether answers
        # are dropped (the center is being killed, or its answer is held).
        drop = [""]
        to_center = asyncio.create_task(self._requests(client_r, up_w, drop))
        to_client = asyncio.create_task(self._answers(up_r, client_w, drop))
        await asyncio.wait([to_center, to_client], return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(0.05)
        for task in (to_center, to_client):
            task.cancel()
        await asyncio.gather(to_center, to_client, return_exceptions=True)
        for writer in (up_w, client_w):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._writers.discard(writer)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        drop: list[str]) -> None:
        path, counted = "", False  # the request being forwarded, and whether it matched
        while chunk := await reader.read(65536):
            first = chunk.split(b"\r\n", 1)[0].decode("latin-1")
            parts = first.split(" ")
            fault = self.fault
            if len(parts) == 3 and parts[2].startswith("HTTP/"):
                path, counted = parts[1], False
                fault.seen.append(path)
            # A batch's body may come in a chunk after its request line: each chunk is looked
            # at until the request matched once.
            matched = (not counted and bool(path) and fault.path is not None
                       and (path.endswith(fault.path) or in_batch(fault.path, path, chunk)))
            counted = counted or matched
            acts = matched and fault.take()
            if acts:
                # Before the center can answer: it dies without being heard, or is never heard.
                drop[0] = "kill" if fault.kill else "hold"
            writer.write(chunk)
            await writer.drain()
            if acts and fault.kill:
                await asyncio.sleep(0.01)  # the center has the request: kill it mid-step
                self.proc().send_signal(signal.SIGKILL)
                return

    async def _answers(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       drop: list[str]) -> None:
        while chunk := await reader.read(65536):
            if drop[0]:
                continue
            writer.write(chunk)
            await writer.drain()
        if drop[0] == "hold":
            # The center closed its side (its keep-alive ran out): closing the client's now
            # would tell it the connection dropped before any answer, which it may retry. A
            # held answer is silence until the client gives up and closes (its read timeout).
            await asyncio.Event().wait()


def in_batch(step: str, path: str, request: bytes) -> bool:
    """Whether ``request`` (to ``path``) is a batch of releases holding one of the kind whose
    route ``step`` is (``/v1/datasets/<dataset>/<kind's path>``)."""
    parts = step.split("/")
    if len(parts) < 5 or parts[1:3] != ["v1", "datasets"]:
        return False
    dataset = parts[3]
    if path != "/v1" + BATCH_PATH.format(dataset=dataset):
        return False
    names = [kind.name for kind in KINDS if "/v1" + kind.url(dataset) == step]
    return any(b'"kind":"%s"' % name.encode() in request for name in names)


@contextlib.contextmanager
def proxied(upstream_port: int, proc: Callable[[], subprocess.Popen[bytes]]) -> Iterator[Proxy]:
    proxy = Proxy(upstream_port, proc)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
