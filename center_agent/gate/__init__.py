"""The release gate: the one place a center's data leave through.

Every answer that depends on data goes through :meth:`ReleaseGate.release` (and ``/v1/info``'s
sizes through :meth:`ReleaseGate.describe`). In order, for a request of a declared kind
(``gate.kinds``):

1. **Checks from the request and public settings only** — names, levels, K, signatures,
   switches, the sensitivity of what is asked. Nothing data-dependent decides a refusal or goes
   into an error text (a data-dependent refusal is an oracle).
2. **The population** (``center_agent.data``): the records every release of the dataset counts.
3. **One transaction holding the dataset's lock**, in which:
   a. the **epoch** is admitted (``gate.epochs``): a release is computed from the data version
      its epoch pinned; changed data are admitted only after the version check;
   b. the question's **meaning** (not its bytes) and the epoch give the request key: an answer
      stored under it is returned as it is (the same question always gets the same answer, and
      averaging repeats gains nothing), once c. passed;
   c. **public sizes** are checked (a level whose ``/v1/info`` size is below K is refused),
      for every request, answered before or not;
   d. **accounting**: the ε caps and the budget are checked and ε is debited (before anything is
      computed); calls limited by number are counted;
   e. the answer is **computed**, exact ones **admitted by disclosure control**
      (``gate.disclosure``: coarsened until no combination with earlier releases isolates
      1..K-1 records), and stored;
   f. an **audit record** is written (``center_agent.audit``: the caller's fingerprint, the
      study, analyst and request ids, the question, ε, the epoch and its data fingerprint).
   Anything that fails rolls all of it back: nothing spent, nothing stored, nothing released.
4. The answer to *this* wording is presented from the stored one (post-processing only).

Refusals are audited in a transaction of their own. No route touches the data: the routes are
made from :data:`gate.kinds.KINDS` and only call the gate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from center_agent import audit as trail
from center_agent.core.config import Settings
from center_agent.core.errors import (
    DataChanged,
    KAnonymityRefusal,
    PrivacyRefusal,
    ServiceError,
    UnknownDataset,
    core_errors,
)
from center_agent.data import Datasets, Population, round_down
from center_agent.db import Store, UnknownLedgerDataset
from center_agent.gate.disclosure import Disclosure
from center_agent.gate.epochs import Epochs
from center_agent.gate.keys import CenterKeys
from center_agent.gate.kinds import KINDS, Context, ReleaseKind
from center_agent.ledger import Caps, Ledger, request_key
from shared.protocol import WireModel

log = logging.getLogger(__name__)

__all__ = ["KINDS", "DatasetState", "ReleaseGate"]


@dataclass(frozen=True)
class DatasetState:
    """What ``/v1/info`` may show of a dataset: its epoch's sizes, rounded down to K."""

    epoch: int
    n: int
    sizes: dict[str, int]
    paused: bool


class ReleaseGate:
    """The center's one release path (module docstring)."""

    def __init__(self, settings: Settings, datasets: Datasets, store: Store, ledger: Ledger,
                 keys: CenterKeys) -> None:
        self.settings = settings
        self.datasets = datasets
        self.store = store
        self.ledger = ledger
        self.keys = keys
        self.disclosure = Disclosure(settings.k,
                                     max_releases=settings.max_releases_per_variable,
                                     max_limits=settings.max_limits_per_variable)
        self.epochs = Epochs(settings.k, self.disclosure)

    @staticmethod
    def caps(settings: Settings) -> dict[str, Caps]:
        """Each dataset's ε caps, as the ledger applies them."""
        from datetime import timedelta

        return {
            name: Caps(per_request=d.request_cap, per_period=d.epsilon_per_period,
                       period=timedelta(days=d.period_days))
            for name, d in settings.datasets.items()
        }

    def check_k(self, k: int) -> None:
        """A study's K may not be below this center's (decided from the request)."""
        if k < self.settings.k:
            raise KAnonymityRefusal(
                f"this center releases tables with K >= {self.settings.k}; the request asked "
                f"for K = {k}"
            )

    def release(self, kind: ReleaseKind[Any, Any], dataset_name: str, request: WireModel,
                caller: str) -> WireModel:
        """The answer to ``request`` of ``kind`` on ``dataset_name`` (see the module docstring);
        ``caller`` is the token's fingerprint."""
        if kind not in KINDS:
            raise TypeError(f"{kind!r} is not a release kind declared to the gate")
        dataset = self.datasets[dataset_name]
        # What the audit record shows of the question: the request as validated (parameters,
        # never data).
        asked = trail.question_text(request.to_payload())
        try:
            kind.check(self, dataset, request)
            question = kind.question(self, dataset, request)
            population = dataset.population()
            stored, outcome = self._transaction(kind, dataset.name, request, question,
                                                population, caller, asked)
        except PrivacyRefusal as refusal:
            log.info("%s release of %r refused: %s", kind.name, dataset.name, refusal.error)
            self._audit_refusal(dataset.name, kind.name, caller, asked, refusal)
            raise
        # After the commit, and never a value: what was asked, and how it went.
        log.info("%s release of %r (variable %r): %s, epsilon %g", kind.name, dataset.name,
                 question.variable, outcome, question.epsilon)
        return kind.present(self, dataset, stored, request)

    def describe(self, dataset_name: str) -> DatasetState:
        """The dataset's sizes as ``/v1/info`` shows them: those of its epoch, rounded down to
        K. Changed data that pass the version check start a new epoch here; data that fail it
        leave the epoch (and its sizes) as they were, marked paused."""
        dataset = self.datasets[dataset_name]
        population = dataset.population()
        k = self.settings.k
        with self.store.engine.connect() as conn:
            current = self.epochs.current(conn, dataset.name)
        if current is not None and current.fingerprint == population.fingerprint:
            # The usual case, read without the dataset's lock (listings must not queue behind
            # releases): the data are still the epoch's.
            return DatasetState(
                epoch=current.number, n=round_down(current.n, k),
                sizes={level: round_down(current.sizes.get(level, 0), k)
                       for level in dataset.levels},
                paused=False,
            )
        try:
            with self.store.locked(dataset.name) as (conn, _total, _spent):
                try:
                    epoch = self.epochs.admit(conn, dataset.name, population)
                    paused = False
                except DataChanged:
                    current = self.epochs.current(conn, dataset.name)
                    assert current is not None  # DataChanged needs an epoch to differ from
                    epoch, paused = current, True
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset.name) from None
        return DatasetState(
            epoch=epoch.number, n=round_down(epoch.n, k),
            sizes={level: round_down(epoch.sizes.get(level, 0), k) for level in dataset.levels},
            paused=paused,
        )

    # -- internals ------------------------------------------------------------------------

    def _transaction(self, kind: ReleaseKind[Any, Any], dataset: str, request: WireModel,
                     question: Any, population: Population, caller: str,
                     asked: str) -> tuple[Any, str]:
        """The stored answer and the outcome (``released``, or ``cached``: asked before)."""
        ds = self.datasets[dataset]
        try:
            with self.store.locked(dataset) as (conn, total, spent):
                epoch = self.epochs.admit(conn, dataset, population)
                key = request_key(dataset, question.variable, kind.name,
                                  {"meaning": question.meaning, "epoch": epoch.number},
                                  question.epsilon)
                # Public sizes first, cached or not: one stored answer may serve many wordings
                # (a table's K), and each is refused or not on its own.
                kind.require(self, ds, population, request)
                stored = self.ledger.cached(conn, dataset, key)
                outcome = "cached"
                units = 0
                if stored is None:
                    units = self.ledger.debit(conn, dataset, question.epsilon, total, spent)
                    kind.count_calls(self, conn, ds, caller)
                    ctx = Context(self, conn, ds, population, epoch.number, key)
                    with core_errors():
                        payload = kind.compute(ctx, request)
                    stored = self.ledger.keep(conn, dataset, key, units, payload)
                    outcome = "released"
                trail.record(conn, dataset=dataset, kind=kind.name, caller=caller,
                             outcome=outcome, epsilon_units=units, question=asked,
                             request_key=key, epoch=epoch.number,
                             data_fingerprint=epoch.fingerprint)
                return stored, outcome
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None

    def _audit_refusal(self, dataset: str, kind: str, caller: str, asked: str,
                       refusal: ServiceError) -> None:
        # Nothing was spent (the transaction rolled back): ε 0, so a dataset's records add up
        # to its spent budget; the ε asked is in the question.
        try:
            with self.store.engine.begin() as conn:
                trail.record(conn, dataset=dataset, kind=kind, caller=caller,
                             outcome=f"refused:{refusal.error}", epsilon_units=0,
                             question=asked)
        except Exception:  # the refusal stands whether or not its record could be written
            log.exception("could not record a refusal in the audit log")

    def exact_release_use(self, dataset_name: str) -> dict[str, tuple[int, int]]:
        """Per variable of the dataset: its exact releases remembered and their limits (what
        the disclosure caps count; ``/v1/budget`` shows them)."""
        with self.store.engine.connect() as conn:
            return self.disclosure.usage(conn, dataset_name)

    def audit(self, query: trail.AuditQuery) -> trail.AuditPage:
        """The audit records ``query`` selects (``GET /v1/audit``, the operator's CLI)."""
        return trail.read(self.store.engine, query)
