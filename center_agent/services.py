"""What one running center holds: settings, datasets, ledger and the release gate (built once
per app)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from center_agent.accountant import Accountant
from center_agent.core.config import Settings
from center_agent.data import ALL, Datasets
from center_agent.db import Store
from center_agent.gate import ReleaseGate
from center_agent.gate.disclosure import Disclosure
from center_agent.gate.keys import CenterKeys, population_secret, read_peer_keys
from center_agent.ledger import Ledger


@dataclass(frozen=True)
class Services:
    settings: Settings
    datasets: Datasets
    store: Store
    ledger: Ledger
    gate: ReleaseGate

    @cached_property
    def accountant(self) -> Accountant:
        """The lifetime guarantee of each dataset, from the ledger (``GET /v1/budget``)."""
        return Accountant(self.ledger, self.settings.accountant_delta)

    @classmethod
    def build(cls, settings: Settings, *, check_sources: bool = True) -> Services:
        """Open the datasets and the ledger database; run the datasets' start-up checks (a
        dataset that fails them is left unavailable, ``Datasets.check_columns``); load (or
        make) the center's keys."""
        # The ledger first: its leave-out secret keys every population the datasets build
        # (center_agent.data.leave_out), the start-up checks' read included.
        store = Store(settings.ledger_url)
        try:
            datasets = Datasets.from_settings(settings, secret=population_secret(store))
            if check_sources:
                datasets.check_columns()
        except BaseException:
            store.close()
            raise
        store.ensure_budgets({name: d.epsilon_total for name, d in settings.datasets.items()})
        with store.engine.begin() as conn:
            Disclosure.import_auditor_limits(conn, {
                name: list(d.levels) or [ALL] for name, d in datasets.items()
            })
        ledger = Ledger(store, ReleaseGate.caps(settings))
        keys = CenterKeys.load(
            store, settings.center_id, signing_key_file=settings.signing_key_file,
            peers=read_peer_keys(settings.peer_keys_dir, settings.peers),
        )
        return cls(settings, datasets, store, ledger, ReleaseGate(settings, datasets, store,
                                                                  ledger, keys))

    def close(self) -> None:
        self.datasets.close()
        self.store.close()
