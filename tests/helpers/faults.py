"""A TCP proxy in front of a real center process that can SIGKILL the center the moment a
request for a given step has been forwarded to it (whatever the center answers to that request
is dropped, so a fast center cannot answer before it dies), or hold the center's answer back for
a while. It runs its own event loop in a thread and reads only the request line (the path) and,
for a batch of releases (``POST /v1/datasets/{dataset}/releases``, ``coordinator.batching``),
the kinds its body names: a batch holding the step's release is that step's request too."""

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


@dataclass
class Fault:
    """What the proxy does to requests whose path ends with ``path``: ``kill`` the center right
    after forwarding the request (its answer never reaches the client), or ``delay_s`` its
    answer."""

    path: str | None = None
    kill: bool = False
    delay_s: float = 0.0
    hits: int = 0
    seen: list[str] = field(default_factory=list)


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
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)

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

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
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
        # Set by the request side, taken by the answer side of this connection: the delay of
        # the next answer, and whether answers are dropped (the center is being killed).
        delay = [0.0]
        drop = [False]
        to_center = asyncio.create_task(self._requests(client_r, up_w, delay, drop))
        to_client = asyncio.create_task(self._answers(up_r, client_w, delay, drop))
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
                        delay: list[float], drop: list[bool]) -> None:
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
            if matched and fault.kill:
                drop[0] = True  # before the center can answer: it dies without being heard
            writer.write(chunk)
            await writer.drain()
            if matched:
                fault.hits += 1
                if fault.kill:
                    await asyncio.sleep(0.01)  # the center has the request: kill it mid-step
                    self.proc().send_signal(signal.SIGKILL)
                    return
                delay[0] = fault.delay_s

    async def _answers(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       delay: list[float], drop: list[bool]) -> None:
        while chunk := await reader.read(65536):
            if drop[0]:
                continue
            if delay[0]:
                wait, delay[0] = delay[0], 0.0
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()


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
