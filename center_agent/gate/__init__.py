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

Several requests on one dataset may come in one batch (:meth:`ReleaseGate.release_batch`, a
study's releases to one center in one round): each passes the same steps, in order, in one
transaction holding the lock, each in a savepoint of it, so a refused or failed item rolls back
alone. A lone request is a batch of one.

Refusals are audited (in the batch's transaction, or one of their own for a refusal decided in
step 1). No route touches the data: the routes are
made from :data:`gate.kinds.KINDS` and only call the gate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from center_agent import audit as trail
from center_agent.core.config import Settings
from center_agent.core.errors import (
    DataChanged,
    DataSourceError,
    KAnonymityRefusal,
    PrivacyRefusal,
    ReleaseFailed,
    ServiceError,
    UnknownDataset,
    core_errors,
)
from center_agent.data import Dataset, Datasets, Population, round_down
from center_agent.db import Store, UnknownLedgerDataset
from center_agent.gate.disclosure import Disclosure
from center_agent.gate.epochs import Epochs
from center_agent.ledger import Caps, Ledger, request_key
from shared.wire import WireModel

if TYPE_CHECKING:
    # The kinds (and through them the statistics) and the keys are imported when a gate is
    # built (center_agent.services), not by what only reads the epochs (fedstats center epoch).
    from center_agent.gate.keys import CenterKeys
    from center_agent.gate.kinds import ReleaseKind

log = logging.getLogger(__name__)

__all__ = ["KINDS", "DatasetState", "ReleaseGate"]


def __getattr__(name: str) -> Any:
    if name == "KINDS":  # re-exported, imported on first use
        from center_agent.gate.kinds import KINDS

        return KINDS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class DatasetState:
    """What ``/v1/info`` may show of a dataset: its epoch's sizes, rounded down to K;
    ``available`` False when its source cannot be read now (the sizes are then its current
    epoch's, or 0 before any)."""

    epoch: int
    n: int
    sizes: dict[str, int]
    paused: bool
    available: bool = True


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
        answer = self.release_batch(dataset_name, [(kind, request)], caller)[0]
        if isinstance(answer, ServiceError):
            raise answer
        return answer

    def release_batch(self, dataset_name: str,
                      items: Sequence[tuple[ReleaseKind[Any, Any], WireModel]],
                      caller: str) -> list[WireModel | ServiceError]:
        """The answers to several requests on one dataset, in order, each what its own
        :meth:`release` would answer (an error in place of a refused or failed one).

        Each item passes the same steps; the dataset's lock and transaction are taken once, and
        each item runs in a savepoint of it, so one item's refusal or failure rolls back only
        that item. Nothing is presented before the transaction commits."""
        from center_agent.gate.kinds import KINDS

        for kind, _request in items:
            if kind not in KINDS:
                raise TypeError(f"{kind!r} is not a release kind declared to the gate")
        dataset = self.datasets[dataset_name]
        answers: list[WireModel | ServiceError | None] = [None] * len(items)
        asked = [trail.question_text(request.to_payload()) for _kind, request in items]
        questions: dict[int, Any] = {}
        for index, (kind, request) in enumerate(items):
            # Step 1, from the request and public settings only: a refusal here reads no data.
            try:
                kind.check(self, dataset, request)
                questions[index] = kind.question(self, dataset, request)
            except ServiceError as exc:
                answers[index] = self._refused(dataset.name, kind, caller, asked[index], exc)
        if questions:
            population = dataset.population()
            stored = self._transaction(dataset.name, items, questions, population, caller,
                                       asked, answers)
            for index, value in stored.items():
                kind, request = items[index]
                answers[index] = self._present(kind, dataset, value, request)
        assert all(answer is not None for answer in answers)
        return [answer for answer in answers if answer is not None]

    def describe(self, dataset_name: str) -> DatasetState:
        """The dataset's sizes as ``/v1/info`` shows them: those of its epoch, rounded down to
        K. Changed data that pass the version check start a new epoch here; data that fail it
        leave the epoch (and its sizes) as they were, marked paused."""
        dataset = self.datasets[dataset_name]
        k = self.settings.k
        try:
            population = dataset.population()
        except DataSourceError:
            # One dataset's broken source is its own state, not the center's: the others are
            # described (and released) as usual. What is shown was public already: its epoch.
            with self.store.engine.connect() as conn:
                current = self.epochs.current(conn, dataset.name)
            sizes = current.sizes if current is not None else {}
            return DatasetState(
                epoch=current.number if current is not None else 1,
                n=round_down(current.n, k) if current is not None else 0,
                sizes={level: round_down(sizes.get(level, 0), k) for level in dataset.levels},
                paused=False, available=False,
            )
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

    def _transaction(self, dataset: str,
                     items: Sequence[tuple[ReleaseKind[Any, Any], WireModel]],
                     questions: dict[int, Any], population: Population, caller: str,
                     asked: list[str],
                     answers: list[WireModel | ServiceError | None]) -> dict[int, Any]:
        """Steps 3a-f for each item with a question, in one transaction holding the dataset's
        lock: the stored answers by item; a refused or failed item's error goes into
        ``answers`` (its savepoint rolled back, its refusal audited in the transaction)."""
        ds = self.datasets[dataset]
        stored: dict[int, Any] = {}
        try:
            with self.store.locked(dataset) as (conn, _total, _spent):
                for index, question in questions.items():
                    kind, request = items[index]
                    try:
                        with conn.begin_nested():
                            stored[index] = self._one(conn, kind, ds, request, question,
                                                      population, caller, asked[index])
                    except ServiceError as exc:
                        answers[index] = self._refused(dataset, kind, caller, asked[index], exc,
                                                       conn)
                    except Exception:
                        # A fault of this item only: its savepoint is rolled back, the others
                        # stand (a lone request would answer the same bare 500).
                        log.exception("%s release of %r raised", kind.name, dataset)
                        answers[index] = ReleaseFailed(
                            f"the center could not compute this {kind.name} release")
        except UnknownLedgerDataset:
            raise UnknownDataset(dataset) from None
        return stored

    def _one(self, conn: Any, kind: ReleaseKind[Any, Any], ds: Dataset, request: WireModel,
             question: Any, population: Population, caller: str, asked: str) -> Any:
        """One item's steps 3a-f (module docstring), inside the batch's transaction: its
        stored answer."""
        # The dataset's lock is held: this joins the batch's transaction and reads the budget
        # as the earlier items left it.
        with self.store.locked(ds.name) as (conn, total, spent):
            # A change of the data that fails the version check is held: the epoch's own
            # population answers (gate.epochs).
            epoch, population = self.epochs.admit_population(conn, ds.name, population)
            key = request_key(ds.name, question.variable, kind.name,
                              {"meaning": question.meaning, "epoch": epoch.number},
                              question.epsilon)
            # Public sizes first, cached or not: one stored answer may serve many wordings
            # (a table's K), and each is refused or not on its own.
            kind.require(self, ds, population, request)
            stored = self.ledger.cached(conn, ds.name, key)
            outcome = "cached"
            units = 0
            if stored is None:
                units = self.ledger.debit(conn, ds.name, question.epsilon, total, spent)
                kind.count_calls(self, conn, ds, caller)
                from center_agent.gate.kinds import Context

                ctx = Context(self, conn, ds, population, epoch.number, key)
                with core_errors():
                    payload = kind.compute(ctx, request)
                stored = self.ledger.keep(conn, ds.name, key, units, payload)
                outcome = "released"
            trail.record(conn, dataset=ds.name, kind=kind.name, caller=caller,
                         outcome=outcome, epsilon_units=units, question=asked,
                         request_key=key, epoch=epoch.number,
                         data_fingerprint=epoch.fingerprint)
        # Only what was asked, and how it went (never a value); it is released once the
        # transaction commits.
        log.info("%s release of %r (variable %r): %s, epsilon %g", kind.name, ds.name,
                 question.variable, outcome, question.epsilon)
        return stored

    def _present(self, kind: ReleaseKind[Any, Any], dataset: Dataset, stored: Any,
                 request: WireModel) -> WireModel | ServiceError:
        try:
            return kind.present(self, dataset, stored, request)
        except ServiceError as exc:
            return exc
        except Exception:
            log.exception("%s release of %r could not be presented", kind.name, dataset.name)
            return ReleaseFailed(f"the center could not present this {kind.name} release")

    def _refused(self, dataset: str, kind: ReleaseKind[Any, Any], caller: str, asked: str,
                 exc: ServiceError, conn: Any = None) -> ServiceError:
        """``exc`` as an item's answer; a privacy refusal is logged and audited (ε 0: nothing
        was spent, so a dataset's records add up to its spent budget; the ε asked is in the
        question), in the batch's transaction when one is open."""
        if isinstance(exc, PrivacyRefusal):
            log.info("%s release of %r refused: %s", kind.name, dataset, exc.error)
            try:
                if conn is not None:
                    with conn.begin_nested():
                        self._record_refusal(conn, dataset, kind.name, caller, asked, exc)
                else:
                    with self.store.engine.begin() as own:
                        self._record_refusal(own, dataset, kind.name, caller, asked, exc)
            except Exception:  # the refusal stands whether or not its record could be written
                log.exception("could not record a refusal in the audit log")
        return exc

    @staticmethod
    def _record_refusal(conn: Any, dataset: str, kind: str, caller: str, asked: str,
                        refusal: ServiceError) -> None:
        trail.record(conn, dataset=dataset, kind=kind, caller=caller,
                     outcome=f"refused:{refusal.error}", epsilon_units=0, question=asked)

    def exact_release_use(self, dataset_name: str) -> dict[str, tuple[int, int]]:
        """Per variable of the dataset: its exact releases remembered and their limits (what
        the disclosure caps count; ``/v1/budget`` shows them)."""
        with self.store.engine.connect() as conn:
            return self.disclosure.usage(conn, dataset_name)

    def audit(self, query: trail.AuditQuery) -> trail.AuditPage:
        """The audit records ``query`` selects (``GET /v1/audit``, the operator's CLI)."""
        return trail.read(self.store.engine, query)
