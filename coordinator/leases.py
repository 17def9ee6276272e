"""Several coordinator processes (or hosts) over one PostgreSQL store: which process runs a study.

Each ``pending``/``running`` study is held by one process, its ``owner`` in the store, until
its lease runs out (``coordinator.db.Store``, ``lease_until`` on the database's clock). The
process running it renews the lease every :attr:`Lease.heartbeat_s` while it runs; a process
that dies stops renewing, and once the lease has run out any process claims the study
(``Store.claim_studies``, ``SELECT ... FOR UPDATE SKIP LOCKED``: two processes never claim one
study) and runs it on from its recorded releases: what was received is taken from the store,
and a release asked again is answered by its center from the center's release memory without
spending again (docs/privacy.md), so nothing is paid twice.

A process that lost a study (it stalled for longer than the lease and another claimed it) finds
out at its next renewal and stops it; until then every write the study makes checks the lease
in its own transaction (``Store.check_lease_in``), so the process records nothing more and asks
no center for a new release. A process that stops cleanly lets its studies go at once
(``Store.release_leases``).

With one process (SQLite, the default) there are no leases: a study found ``pending`` or
``running`` at start-up was interrupted and becomes ``failed_resumable``
(``Store.mark_interrupted``), as the module ``coordinator.runner`` describes.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field


def new_owner() -> str:
    """This process's name in the store: host, PID and a random part (a PID is reused)."""
    return f"{socket.gethostname()[:32]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Lease:
    """How one process holds its studies: its ``owner`` name and the lease's length."""

    seconds: float
    owner: str = field(default_factory=new_owner)

    @property
    def heartbeat_s(self) -> float:
        """How often the leases are renewed and free studies looked for: a third of the lease,
        so two renewals may be missed (a busy moment) before another process may claim."""
        return self.seconds / 3

    def of(self) -> tuple[str, float]:
        """(owner, seconds), as ``coordinator.db.Store`` takes it."""
        return self.owner, self.seconds
