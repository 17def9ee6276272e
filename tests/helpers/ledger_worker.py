"""A separate process hitting a ledger (run by the ledger tests; not a test module).

    python -m tests.helpers.ledger_worker spend URL DATASET N EPSILON
        N concurrent releases (threads)
    python -m tests.helpers.ledger_worker loop URL DATASET EPSILON
        release forever, announcing each step
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from center_agent.core.errors import BudgetExceeded
from center_agent.db import Store
from center_agent.ledger import Ledger


def at_once(n: int, attempt: Callable[[int], object], refused: type[Exception]) -> int:
    """How many of ``n`` threads, all released at the same moment, get through ``attempt(i)``
    without ``refused``."""
    barrier = threading.Barrier(n)

    def one(i: int) -> bool:
        barrier.wait()
        try:
            attempt(i)
            return True
        except refused:
            return False

    with ThreadPoolExecutor(max_workers=n) as pool:
        return sum(pool.map(one, range(n)))


def spend(url: str, dataset: str, n: int, epsilon: float) -> None:
    ledger = Ledger(Store(url))
    ok = at_once(n, lambda i: ledger.release(dataset, f"{os.getpid()}-{i}", epsilon,
                                             lambda: time.sleep(0.001)), BudgetExceeded)
    print(json.dumps({"ok": ok, "refused": n - ok}), flush=True)


def loop(url: str, dataset: str, epsilon: float) -> None:
    ledger = Ledger(Store(url))
    i = 0
    while True:
        def compute(i: int = i) -> dict[str, int]:
            print(f"computing {i}", flush=True)
            time.sleep(0.02)
            return {"i": i}

        ledger.release(dataset, f"loop-{i}", epsilon, compute)
        print(f"released {i}", flush=True)
        i += 1


if __name__ == "__main__":
    mode, url, dataset, *rest = sys.argv[1:]
    if mode == "spend":
        spend(url, dataset, int(rest[0]), float(rest[1]))
    else:
        loop(url, dataset, float(rest[0]))
