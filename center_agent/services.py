"""What one running center holds: settings, datasets, ledger and auditor (built once per app)."""

from __future__ import annotations

from dataclasses import dataclass

from center_agent.auditor import Auditor
from center_agent.core.config import Settings
from center_agent.data import Datasets
from center_agent.db import Store
from center_agent.ledger import Ledger


@dataclass(frozen=True)
class Services:
    settings: Settings
    datasets: Datasets
    store: Store
    ledger: Ledger
    auditor: Auditor

    @classmethod
    def build(cls, settings: Settings, *, check_sources: bool = True) -> Services:
        """Open the datasets and the ledger database; check every declared column exists."""
        datasets = Datasets.from_settings(settings)
        if check_sources:
            datasets.check_columns()
        store = Store(settings.ledger_url)
        store.ensure_budgets({name: d.epsilon_total for name, d in settings.datasets.items()})
        return cls(settings, datasets, store, Ledger(store), Auditor(store))

    def close(self) -> None:
        self.datasets.close()
        self.store.close()
