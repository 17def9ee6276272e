"""The release gate: the one place a center's data leave through.

Every answer that depends on data goes through :meth:`ReleaseGate.release` (and ``/v1/info``'s
sizes through :meth:`ReleaseGate.describe`). In order, for a request of a declared kind
(``gate.kinds``):

1. **Checks from the request and public settings only** — first the dataset's release mode
   (DP mode refuses every exact kind: ``ReleaseKind.check_release_mode``), then names, levels,
   K, signatures, switches, the sensitivity of what is asked, and a DP release's ε no lower
   than the center's ``min_epsilon_per_release``. Nothing data-dependent decides a refusal or
   goes into an error text (a data-dependent refusal is an oracle).
2. **The population** (``center_agent.data``): the records every release of the dataset counts.
3. **A short transaction holding the dataset's lock** (nothing is computed in it), in which:
   a. the **epoch** is admitted (``gate.epochs``): a release is computed from the data version
      its epoch pinned; changed data are admitted only after the version check (in DP mode
      from the data as they are, in the epoch the operator last started: no check);
   b. the question's **meaning** (not its bytes) and the epoch give the request key: an answer
      stored under it is returned as it is (the same question always gets the same answer, and
      averaging repeats gains nothing), once c. passed; a question this process is computing
      right now (its reservation, step d) waits, outside the lock, for that computation and
      gets its answer (or its error): one computation, one payment;
   c. **public sizes** are checked (a level whose ``/v1/info`` size is below K is refused;
      in DP mode nothing is: ``Dataset.require``), for every request, answered before or not;
   d. **accounting**: the ε caps and the budget are checked and ε is debited; calls limited by
      number are counted; the token's **compute allowance** is charged (records × releases
      computed per ``compute_period_s``, records being the dataset's public size: past
      ``compute_allowance``, 429 with ``Retry-After``); a **reservation** of the request key
      records the payment. The transaction commits here: the release is paid, durably,
      before anything is computed;
   e. an **audit record** is written (``center_agent.audit``: the caller's fingerprint, the
      study, analyst and request ids, the question, ε, the epoch and its data fingerprint).
   A refusal in a.-d. rolls back that item: nothing spent, nothing reserved.
4. **The answer is computed outside the lock** (``kind.compute``): a stored answer, and every
   other question, never waits behind a computation. The exception is **disclosure control**
   of exact releases (``gate.disclosure``: coarsened until no combination with earlier releases
   isolates 1..K-1 records): the candidate table or refinement is computed outside, and its
   admission takes the lock when the kind asks for it (:meth:`ReleaseGate.admit`) and keeps it
   until the answer is stored (step 5), so exact releases are admitted one at a time, each
   against every one before it and on the epoch it was computed from (a new epoch meanwhile:
   503 ``data_moved``, nothing spent).
5. **A short transaction holding the lock** stores the answer under its key in place of its
   reservation (when another process stored one first, that one is the answer).
6. The answer to *this* wording is presented from the stored one (post-processing only).

**When the computation fails.** A refusal raised in step 4 (an exact release's disclosure caps,
earlier releases unsafe on forced data, a new epoch) is decided from the request, public sizes
and earlier releases: its reservation is dropped, its ε given back (0 for the exact kinds, the
only ones that refuse there) and the refusal audited, as the refused call always was. Any other
fault (a bug in the core, a killed process) **keeps the reservation: the ε stays spent** and a
``failed`` audit record follows the ``released`` one (their ε still adds up to the budget
spent). A crash cannot give a committed payment back, so a fault is made to end the same way
(one rule, whatever killed the computation). It is safe: nothing was released, so the ledger
only over-counts; a fault cannot be retried for free with fresh noise (rejection sampling of a
mechanism whose failure would depend on its draw); and the same question asked again is
computed under that payment, never debited twice.

Several requests on one dataset may come in one batch (:meth:`ReleaseGate.release_batch`, a
study's releases to one center in one round): each item passes steps 3-5 in order, as its own
call would, the lock let go between items and between steps (so nothing waits for more than
one item's short step); a question asked twice in one batch is computed once (the second finds
the first's stored answer). A lone request is a batch of one.

Refusals are audited (in the step-3 transaction, or one of their own for a refusal decided in
step 1 or 4). No route touches the data: the routes are made from :data:`gate.kinds.KINDS` and
only call the gate.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from center_agent import audit as trail
from center_agent.core.config import Settings
from center_agent.core.errors import (
    ComputeAllowanceExceeded,
    DataChanged,
    DataMovedDuringRelease,
    DataSourceError,
    InvalidRequest,
    KAnonymityRefusal,
    PrivacyRefusal,
    ReleaseFailed,
    ServiceError,
    UnknownDataset,
    core_errors,
)
from center_agent.data import Dataset, Datasets, Population, round_down
from center_agent.db import Store, UnknownLedgerDataset
from center_agent.gate.disclosure import Candidate, Disclosure
from center_agent.gate.epochs import Epoch, Epochs
from center_agent.ledger import Caps, Ledger, request_key
from shared.wire import WireModel

if TYPE_CHECKING:
    # The kinds (and through them the statistics) and the keys are imported when a gate is
    # built (center_agent.services), not by what only reads the epochs (fedstats center epoch).
    from center_agent.gate.keys import CenterKeys
    from center_agent.gate.kinds import Context, Question, ReleaseKind

log = logging.getLogger(__name__)

__all__ = ["KINDS", "DatasetState", "ReleaseGate"]


@dataclass
class Flight:
    """A release this process is computing (its request key is reserved): whoever asks the same
    question meanwhile waits for it and gets its outcome."""

    done: threading.Event = field(default_factory=threading.Event)
    stored: Any = None
    error: ServiceError | None = None


@dataclass(frozen=True)
class Lead:
    """An item whose step 3 reserved its key: this call computes it."""

    epoch: Epoch
    key: str
    flight: Flight
    population: Population
    """What it is computed from: the epoch's population (a held change answers from it)."""


@dataclass
class _Hold:
    """The exact admission's transaction, opened when the kind asks for it (step 4) and held
    until the answer is stored (step 5)."""

    stack: ExitStack
    conn: Any = None


class _Stored(str):
    """A stored answer's text, read under the lock and decoded after it."""


class _Answered(ServiceError):
    """The answer got stored while this computation ran (another process): that one is it."""

    def __init__(self, stored: Any) -> None:
        super().__init__("answered meanwhile")
        self.stored = stored


class _PlacedMeanwhile(ServiceError):
    """Another exact release of the variable placed numbers while this one was computed
    outside the lock: it is computed again under the lock (``ReleaseGate.remember``)."""

    def __init__(self) -> None:
        super().__init__("numbers placed meanwhile")


_hold: ContextVar[_Hold | None] = ContextVar("fedstats_gate_hold", default=None)


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
    by_variable: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per variable and level, the records whose value is present, rounded down to K (only
    when values may be missing: ``missing = "per_variable"``)."""


def _present(epoch: Epoch, dataset: Dataset, k: int) -> dict[str, dict[str, int]]:
    """An epoch's present counts per numeric variable and level, rounded down to K (none with
    complete cases: they are the levels' sizes)."""
    if epoch.present is None:
        return {}
    return {variable: {level: round_down(epoch.present_count(variable, level), k)
                       for level in (dataset.levels or epoch.sizes)}
            for variable in dataset.variables}


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
        # The releases this process is computing, by request key (step 3b).
        self._flights: dict[str, Flight] = {}
        self._flights_lock = threading.Lock()

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

        Each item passes steps 3-5 in order, each step in a short transaction of its own (the
        lock let go between them: module docstring). Nothing is presented before its answer is
        stored."""
        from center_agent.gate.kinds import KINDS

        for kind, _request in items:
            if kind not in KINDS:
                raise TypeError(f"{kind!r} is not a release kind declared to the gate")
        dataset = self.datasets[dataset_name]
        answers: list[WireModel | ServiceError | None] = [None] * len(items)
        asked = [trail.question_text(request.to_payload()) for _kind, request in items]
        questions: dict[int, Question] = {}
        for index, (kind, request) in enumerate(items):
            # Step 1, from the request and public settings only: a refusal here reads no data.
            try:
                kind.check_release_mode(dataset, request)  # DP mode: no exact kind, first
                kind.check(self, dataset, request)
                question = kind.question(self, dataset, request)
                self._check_epsilon(question)
                questions[index] = question
            except ServiceError as exc:
                answers[index] = self._refused(dataset.name, kind, caller, asked[index], exc)
        stored: dict[int, Any] = {}
        if questions:
            population = dataset.population()
        for index, question in questions.items():
            # Item by item, the lock released between them and between steps: a stored answer
            # asked meanwhile waits for one item's short step at most.
            pending = {index: question}
            while pending:
                leads, follows = self._reserve(dataset, items, pending, population, caller,
                                               asked, answers, stored)
                for lead_index, lead in leads.items():
                    kind, request = items[lead_index]
                    outcome = self._compute(kind, dataset, request, lead.population, caller,
                                            asked[lead_index], lead)
                    if isinstance(outcome, ServiceError):
                        answers[lead_index] = outcome
                    else:
                        stored[lead_index] = outcome
                # A question another call is computing: its outcome, then step 3 again (its
                # stored answer, audited as served from the store).
                pending = {}
                for follow_index, flight in follows.items():
                    flight.done.wait()
                    if flight.error is not None:
                        kind = items[follow_index][0]
                        answers[follow_index] = self._refused(dataset.name, kind, caller,
                                                              asked[follow_index], flight.error)
                    else:
                        pending[follow_index] = questions[follow_index]
        for index, value in stored.items():
            kind, request = items[index]
            answers[index] = self._present(kind, dataset, value, request)
        assert all(answer is not None for answer in answers)
        return [answer for answer in answers if answer is not None]

    def admit(self, ctx: Context, variable: str, candidate: Candidate) -> Candidate:
        """Disclosure control of an exact release computed outside the lock (step 4): takes the
        dataset's lock (kept until the answer is stored), checks that the epoch is still the
        one the candidate was computed on, and admits it (``gate.disclosure``)."""
        return self.disclosure.admit(
            self.held(ctx), dataset=ctx.dataset.name, variable=variable, epoch=ctx.epoch,
            population=ctx.population, candidate=candidate, request_key=ctx.request_key,
        )

    def held(self, ctx: Context) -> Any:
        """The exact release's transaction holding the dataset's lock, opened on first use and
        kept until its answer is stored: its admission (step 4) and the numbers it places
        between data (read from and remembered in the ledger, ``gate.gaps``) are decided in
        it, so two exact releases computed at once never place two numbers in one gap."""
        hold = _hold.get()
        if hold is None:
            raise RuntimeError("an exact release is admitted only while the gate computes it")
        dataset = ctx.dataset.name
        if hold.conn is None:
            hold.conn, _total, _spent = hold.stack.enter_context(self.store.locked(dataset))
            current = self.epochs.current(hold.conn, dataset)
            if current is None or current.number != ctx.epoch:
                raise DataMovedDuringRelease(dataset)
            stored = self.ledger.cached(hold.conn, dataset, ctx.request_key)
            if stored is not None:
                raise _Answered(stored)
        return hold.conn

    def placed(self, ctx: Context, variable: str) -> Any:
        """The numbers this center placed between data of ``variable`` so far (``gate.gaps``),
        read for an exact release's placement: in its transaction when it holds the lock,
        otherwise as they are now (checked again when it is remembered)."""
        from center_agent.gate import gaps

        hold = _hold.get()
        conn = ctx.conn if ctx.conn is not None else (hold.conn if hold is not None else None)
        if conn is not None:
            numbers = gaps.placed(conn, ctx.dataset.name, variable)
        else:
            with self.store.engine.connect() as own:
                numbers = gaps.placed(own, ctx.dataset.name, variable)
        ctx.placed_from[variable] = numbers
        return numbers

    def remember(self, ctx: Context, variable: str, numbers: list[float]) -> None:
        """Record the numbers an admitted exact release placed, in its transaction under the
        lock. If another release placed numbers in the variable's gaps since this one read
        them (both computed outside the lock), this one's placement may have put a second
        number in a gap: it is not kept, and is computed again under the lock
        (``_compute_and_store``), so one gap never holds two numbers (guarantee 13)."""
        import numpy as np

        from center_agent.gate import gaps

        conn = ctx.conn if ctx.conn is not None else self.held(ctx)
        read = ctx.placed_from.get(variable)
        if read is not None and not np.array_equal(
                gaps.placed(conn, ctx.dataset.name, variable), read):
            raise _PlacedMeanwhile()
        gaps.record(conn, ctx.dataset.name, variable, numbers)

    def describe(self, dataset_name: str) -> DatasetState:
        """The dataset's sizes as ``/v1/info`` shows them: those of its epoch, rounded down to
        K. Changed data that pass the version check start a new epoch here; data that fail it
        leave the epoch (and its sizes) as they were, marked paused. In DP mode the epoch is
        the operator's and nothing is paused, whatever the data (``gate.epochs``)."""
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
                by_variable=_present(current, dataset, k) if current is not None else {},
            )
        mode = dataset.config.release_mode
        with self.store.engine.connect() as conn:
            current = self.epochs.current(conn, dataset.name)
        if current is not None and self.epochs.stands(current, population, release_mode=mode):
            # The usual case, read without the dataset's lock (listings must not queue behind
            # releases): the data are still the epoch's (in DP mode: the epoch is DP mode's).
            return DatasetState(
                epoch=current.number, n=round_down(current.n, k),
                sizes={level: round_down(current.sizes.get(level, 0), k)
                       for level in dataset.levels},
                paused=False, by_variable=_present(current, dataset, k),
            )
        try:
            with self.store.locked(dataset.name) as (conn, _total, _spent):
                try:
                    epoch = self.epochs.admit(conn, dataset.name, population,
                                              release_mode=mode)
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
            paused=paused, by_variable=_present(epoch, dataset, k),
        )

    # -- internals ------------------------------------------------------------------------

    def _check_epsilon(self, question: Question) -> None:
        """Step 1: a DP release's ε no lower than the center's minimum (from the request)."""
        least = self.settings.min_epsilon_per_release
        if 0 < question.epsilon < least:
            raise InvalidRequest(
                f"epsilon {question.epsilon:g} is below {least:g}, the least this center spends "
                "on one differentially private release (setting min_epsilon_per_release): ask "
                f"for at least {least:g}",
                extra={"min_epsilon_per_release": least},
            )

    def _reserve(self, ds: Dataset, items: Sequence[tuple[ReleaseKind[Any, Any], WireModel]],
                 questions: dict[int, Question], population: Population, caller: str,
                 asked: list[str], answers: list[WireModel | ServiceError | None],
                 stored: dict[int, Any]) -> tuple[dict[int, Lead], dict[int, Flight]]:
        """Step 3 for each item of ``questions`` (one, from :meth:`release_batch`), in one
        transaction holding the dataset's lock, each item in a savepoint: a stored answer goes
        into ``stored``, a refused or failed item's error into ``answers`` (its savepoint rolled
        back, its refusal audited in the transaction); returns the items this call computes
        (their key reserved), and those that wait for a computation under way."""
        leads: dict[int, Lead] = {}
        follows: dict[int, Flight] = {}
        try:
            with self.store.locked(ds.name) as (conn, _total, _spent):
                for index, question in questions.items():
                    kind, request = items[index]
                    try:
                        with conn.begin_nested():
                            outcome = self._reserve_one(conn, kind, ds, request, question,
                                                        population, caller, asked[index])
                    except ServiceError as exc:
                        answers[index] = self._refused(ds.name, kind, caller, asked[index], exc,
                                                       conn)
                        continue
                    except Exception:
                        # A fault of this item only: its savepoint is rolled back, the others
                        # stand (a lone request would answer the same bare 500).
                        log.exception("%s release of %r raised", kind.name, ds.name)
                        answers[index] = ReleaseFailed(
                            f"the center could not compute this {kind.name} release")
                        continue
                    if isinstance(outcome, Lead):
                        # In flight from now on: the same question asked meanwhile (in this
                        # batch too) waits for it.
                        with self._flights_lock:
                            self._flights[outcome.key] = outcome.flight
                        leads[index] = outcome
                    elif isinstance(outcome, Flight):
                        follows[index] = outcome
                    else:
                        stored[index] = outcome
        except BaseException as exc:
            # Nothing was reserved after all: whoever waits for these hears so.
            for lead in leads.values():
                self._land(lead, error=ReleaseFailed("the center could not reserve this "
                                                     "release"))
            if isinstance(exc, UnknownLedgerDataset):
                raise UnknownDataset(ds.name) from None
            raise
        for index, value in stored.items():
            if isinstance(value, _Stored):  # decoded once the lock is let go
                stored[index] = json.loads(value)
        return leads, follows

    def _reserve_one(self, conn: Any, kind: ReleaseKind[Any, Any], ds: Dataset,
                     request: WireModel, question: Question, population: Population,
                     caller: str, asked: str) -> Lead | Flight | Any:
        """One item's step 3 (module docstring), inside the transaction: its stored answer,
        the :class:`Flight` computing it, or a :class:`Lead` (reserved: this call computes
        it)."""
        # The dataset's lock is held: this joins the transaction and reads the budget as the
        # earlier items left it.
        with self.store.locked(ds.name) as (conn, total, spent):
            # A change of the data that fails the version check is held: the epoch's own
            # population answers (gate.epochs). DP mode: the data as they are, unchecked.
            epoch, population = self.epochs.admit_population(
                conn, ds.name, population, release_mode=ds.config.release_mode)
            key = request_key(ds.name, question.variable, kind.name,
                              {"meaning": question.meaning, "epoch": epoch.number},
                              question.epsilon)
            # Public sizes first, cached or not: one stored answer may serve many wordings
            # (a table's K), and each is refused or not on its own.
            kind.require(self, ds, population, request)
            stored = self.ledger.cached_text(conn, ds.name, key)
            record: dict[str, Any] = {
                "dataset": ds.name, "kind": kind.name, "caller": caller, "question": asked,
                "request_key": key, "epoch": epoch.number, "data_fingerprint": epoch.fingerprint}
            if stored is not None:
                # (The data of a DP-mode answer are named by its `released` record: the data
                # may have moved within the epoch since.)
                trail.record(conn, outcome="cached", epsilon_units=0, **record)
                log.info("%s release of %r (variable %r): cached", kind.name, ds.name,
                         question.variable)
                return _Stored(stored)
            paid = self.ledger.reserved(conn, ds.name, key)
            units = 0
            if paid is not None:
                with self._flights_lock:
                    flight = self._flights.get(key)
                if flight is not None:
                    return flight
                # Paid before, never stored (a computation that failed, a process that was
                # killed): computed again under that payment.
            else:
                units = self.ledger.debit(conn, ds.name, question.epsilon, total, spent)
                kind.count_calls(self, conn, ds, caller)
            self._charge(conn, ds, epoch, caller)
            if paid is None:
                self.ledger.reserve(conn, ds.name, key, units)
            trail.record(conn, outcome="released", epsilon_units=units,
                         **{**record, "data_fingerprint": population.fingerprint})
        lead = Lead(epoch, key, Flight(), population)
        # Only what was asked, and how it went (never a value).
        log.info("%s release of %r (variable %r): paid, epsilon %g", kind.name, ds.name,
                 question.variable, question.epsilon)
        return lead

    def _charge(self, conn: Any, ds: Dataset, epoch: Epoch, caller: str) -> None:
        """The work of computing one release of ``ds``, charged to the caller's allowance:
        the dataset's public size (its epoch's, rounded down to K as ``/v1/info`` shows)."""
        records = max(1, round_down(epoch.n, self.settings.k))
        if ds.config.release_mode == "dp":  # no size rounded to K in DP mode: the declared one
            records = max(1, ds.config.declared_n or 1)
        self.ledger.charge_compute(conn, caller, records, self.settings.compute_allowance,
                                   self.settings.compute_period_s, time.time())

    def _compute(self, kind: ReleaseKind[Any, Any], ds: Dataset, request: WireModel,
                 population: Population, caller: str, asked: str, lead: Lead) -> Any:
        """Steps 4-5 of a reserved item: its stored answer, or the error it answers with (what
        a failure does: module docstring). Whoever waits for the same question gets the
        same."""
        try:
            stored = self._compute_and_store(kind, ds, request, population, lead)
        except _Answered as answered:
            stored = answered.stored
        except ReleaseFailed as failure:
            self._failed(kind, ds, caller, asked, lead)
            self._land(lead, error=failure)
            return failure
        except ServiceError as refusal:
            # Decided from the request, public sizes and earlier releases: as a refused call.
            try:
                with self.store.locked(ds.name) as (conn, _total, _spent):
                    self.ledger.cancel(conn, ds.name, lead.key)
                    answer = self._refused(ds.name, kind, caller, asked, refusal, conn)
            except Exception:
                log.exception("could not drop the reservation of a refused %s release",
                              kind.name)
                answer = refusal
            self._land(lead, error=answer)
            return answer
        except Exception:
            # A fault outside the core (storing the answer): this item's only, as above.
            log.exception("%s release of %r raised", kind.name, ds.name)
            fault = ReleaseFailed(f"the center could not compute this {kind.name} release")
            self._failed(kind, ds, caller, asked, lead)
            self._land(lead, error=fault)
            return fault
        except BaseException:
            self._land(lead, error=ReleaseFailed(
                f"the center could not compute this {kind.name} release"))
            raise
        self._land(lead, stored=stored)
        return stored

    def _compute_and_store(self, kind: ReleaseKind[Any, Any], ds: Dataset, request: WireModel,
                           population: Population, lead: Lead) -> Any:
        from center_agent.gate.kinds import Context

        for serialised in (False, True):
            ctx = Context(self, None, ds, population, lead.epoch.number, lead.key)
            try:
                # The exception leaves through the stack: the admission's transaction, if
                # open, is rolled back (nothing admitted, remembered or stored).
                with ExitStack() as stack:
                    token = _hold.set(_Hold(stack))
                    try:
                        if serialised:
                            # Placed, computed and admitted under the lock this time.
                            self.held(ctx)
                        with core_errors():
                            payload = kind.compute(ctx, request)
                        # Joins the exact admission's transaction when the kind took it.
                        with self.store.locked(ds.name) as (conn, _total, _spent):
                            existing = self.ledger.cached(conn, ds.name, lead.key)
                            if existing is not None:  # another process stored one first
                                return existing
                            return self.ledger.settle(conn, ds.name, lead.key, payload)
                    finally:
                        _hold.reset(token)
            except _PlacedMeanwhile:
                if serialised:
                    raise RuntimeError("numbers placed meanwhile under the lock") from None
        raise AssertionError("unreachable")

    def _failed(self, kind: ReleaseKind[Any, Any], ds: Dataset, caller: str, asked: str,
                lead: Lead) -> None:
        """A fault computing a paid release: the reservation stays (module docstring)."""
        try:
            with self.store.locked(ds.name) as (conn, _total, _spent):
                trail.record(conn, dataset=ds.name, kind=kind.name, caller=caller,
                             outcome="failed", epsilon_units=0, question=asked,
                             request_key=lead.key, epoch=lead.epoch.number,
                             data_fingerprint=lead.population.fingerprint)
        except Exception:
            log.exception("could not record a failed release in the audit log")

    def _land(self, lead: Lead, *, stored: Any = None, error: ServiceError | None = None) -> None:
        """The computation's outcome to whoever waits for it; the question is no longer in
        flight (its answer is stored, or its reservation waits for the next asker)."""
        lead.flight.stored, lead.flight.error = stored, error
        with self._flights_lock:
            if self._flights.get(lead.key) is lead.flight:
                del self._flights[lead.key]
        lead.flight.done.set()

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
        if isinstance(exc, PrivacyRefusal | ComputeAllowanceExceeded):
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
