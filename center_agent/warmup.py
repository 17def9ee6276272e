"""Warming a center's routes as it starts, before it answers its first request.

The first request a fresh process serves pays for code run once (the middleware stack, the
authentication dependency, request validation, error rendering: about 60 ms here), the first
of each route a few ms more; a study's first round would pay it at every center. At start-up
:func:`warm_routes` sends every release route (and the batch route) one request through the app
itself, in process: a valid token, an empty body, and a dataset name no center can declare
(names are lower-case), so each is refused by validation (422) before anything reaches the
release gate: no data read, no ledger touched, nothing audited, nothing on the network.

:func:`warm_kernels` then loads the compiled walk and merge (``shared._walk``: Numba's import and
its cached kernels, about a CPU second) on made-up numbers, and imports the privacy accountant's
library (``dp_accounting``'s PLD module, which ``/v1/budget`` uses for the lifetime guarantee:
``shared.accounting``). Without it the first table or Mann-Whitney release of the process pays
that second, and a study's refinement chain pays it at each center in turn, one after the
other; a cold center's first ``/v1/budget`` spent 43 % of its samples importing the library.
"""

from __future__ import annotations

import asyncio
import logging
import time

import httpx
from fastapi import FastAPI

from shared.kinds import BATCH_PATH, KINDS

log = logging.getLogger(__name__)

#: Not a dataset name a center can declare (``center_agent.core.config``: lower-case only).
NO_DATASET = "WARM-UP"


async def warm_routes(app: FastAPI, token: str) -> None:
    """One refused request per release route of ``app`` (see the module docstring)."""
    start = time.perf_counter()
    paths = [kind.url(NO_DATASET) for kind in KINDS] + [BATCH_PATH.format(dataset=NO_DATASET)]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://warm-up") as client:
        for path in paths:
            answer = await client.post(f"/v1{path}", json={},
                                       headers={"Authorization": f"Bearer {token}"})
            # Anything else means a route took an empty body: a bug to hear about, not to hide.
            if answer.status_code != 422:
                log.warning("warming %s: HTTP %d instead of 422", path, answer.status_code)
    log.info("routes warmed in %.0f ms", (time.perf_counter() - start) * 1000)


async def warm_kernels() -> None:
    """Load the compiled kernels (module docstring), off the event loop."""
    from shared import _walk

    start = time.perf_counter()
    try:
        await asyncio.to_thread(_walk.warm)
        await asyncio.to_thread(_import_accountant)
    except Exception:
        # A head start only: the center serves without it, and a release that needs a kernel
        # that cannot load fails on its own, naming itself.
        log.exception("could not load the compiled kernels at start-up")
        return
    log.info("compiled kernels loaded in %.0f ms", (time.perf_counter() - start) * 1000)


def _import_accountant() -> None:
    import dp_accounting.pld.privacy_loss_distribution  # noqa: F401
