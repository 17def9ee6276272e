"""Data versions: every release of an epoch is computed from one version of the data.

An **epoch** of a dataset pins the population's fingerprint (``center_agent.data``): the first
release (or ``/v1/info``) of a dataset starts epoch 1 on the data as they are. While the data keep
that fingerprint, every release is computed from them. When they change, a release is answered
only after the **version check** passes, and then in a new epoch:

* every level's size, and the dataset's size, is unchanged or changed by at least K, against the
  sizes of every earlier epoch (the n and m of a Mann-Whitney release, a table's totals and a YJ
  release's n are such sizes);
* every level's **left-out** rows (its enrolled rows, labelled with it in the source, minus its
  size: what a public enrolment minus a released size tells), and theirs over all levels, are
  unchanged or changed by at least K, against every earlier epoch in which the level was in. An
  epoch started before enrolled rows were kept (``enrolled`` NULL) is unknown: the check fails
  against it until the operator starts an epoch that keeps them (``--roll --force``: a decision
  about the epochs before, which later checks then compare through that one);
* every atom of every variable's exact releases (``gate.disclosure``; the snapshot kept per
  epoch) has the same count on the new data as on that epoch's, or a count that differs by at
  least K; and the atoms of everything released so far hold 0 or >= K records of the new data.

Then no count of records that were added or removed, in any set an earlier release determined,
lies in 1..K-1 (with records only added, which is how clinical data grow; with removals the
differences are net changes, not counts of records).

**A change that fails the check is held** (``docs/privacy.md``, "Corrections"): the center keeps
answering every release from the population its epoch pinned, which it still holds in memory
(:meth:`Epochs.admit_population`), as if the data had not changed, and checks the data again at
their next change; the change takes effect when the data as they are then pass the check
(corrections and later loads together: every released set changed by 0 or >= K), or when the
operator starts a new epoch (``fedstats center epoch --roll``; ``--force`` accepts the risk the
check names). No release is ever computed from data that failed the check, so the argument above
covers every release; and a caller sees nothing of a held change (the same answers, the same
``/v1/info``). Only a center that no longer holds its epoch's population (it was restarted since
the data changed) pauses the dataset's releases with 409 ``data_changed``, until the data pass or
the operator rolls: one bit per change of the data, never a count.

**DP mode** (``release_mode = "dp"``; ``docs/privacy.md`` §16, "No bit of a data change") has
none of this: the check protects exact counts, and DP mode refuses every exact release before
reading data. Its releases are computed from the data as they are, each paid, and nothing a
caller sees depends on the data's changes: no check, no hold, no pause, and the epoch moves only
when the operator rolls (always, whatever the data) or the mode changes. A DP-mode epoch is
marked (``release_mode``): the check skips it (nothing of it was released exactly), and a
K-anonymous release after one is admitted only through the check against the K-anonymous
epochs, in a new epoch, even on data equal to the DP epoch's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from sqlalchemy import Connection, select

from center_agent.core.errors import DataChanged
from center_agent.data import Population
from center_agent.db import epochs, utcnow
from center_agent.gate.disclosure import Disclosure
from shared.privacy import isolating

log = logging.getLogger(__name__)

CORRECTIONS_GUIDE = "docs/deploy.md, \"I corrected a value: what now?\""
"""Where an operator reads what a change of the data does and what to do about it."""


@dataclass(frozen=True)
class Epoch:
    dataset: str
    number: int
    fingerprint: str
    sizes: dict[str, int]
    reason: str
    present: dict[str, dict[str, int]] | None = None
    """Per variable and level, the records whose value is present (``missing =
    "per_variable"``); None: complete cases (every variable present on every record)."""
    enrolled: dict[str, int] | None = None
    """Per declared level, the source's rows labelled with it; None: not kept (an epoch started
    before they were, or a population that did not know them)."""
    release_mode: str = "k_anonymous"

    @property
    def dp(self) -> bool:
        """Begun in DP mode: nothing of it was released exactly (module docstring)."""
        return self.release_mode == "dp"

    @property
    def n(self) -> int:
        return sum(self.sizes.values())

    def present_count(self, variable: str, level: str) -> int:
        """Records of ``level`` whose ``variable`` is present in this epoch."""
        if self.present is None or variable not in self.present:
            return self.sizes.get(level, 0)
        return self.present[variable].get(level, 0)


class Epochs:
    """The epochs of every dataset, kept in the ledger's database."""

    def __init__(self, k: int, disclosure: Disclosure) -> None:
        self.k = k
        self.disclosure = disclosure
        # (dataset, fingerprint) of changed data already reported as paused or held: the
        # operator needs one line, not one per call.
        self._reported: set[tuple[str, str]] = set()
        # The population each dataset's current epoch pinned, as this process last saw it: what
        # releases come from while a change of the data is held.
        self._held: dict[str, Population] = {}
        # (dataset, fingerprint, epoch) of data that failed the check: not checked again until
        # the data or the epoch change, so a held dataset does not pay the check on every
        # release. Conservative: keeping a change held longer never computes from it.
        self._failed: set[tuple[str, str, int]] = set()

    def all(self, conn: Connection, dataset: str) -> list[Epoch]:
        rows = conn.execute(
            select(epochs).where(epochs.c.dataset == dataset).order_by(epochs.c.epoch)
        ).all()
        return [Epoch(row.dataset, int(row.epoch), row.fingerprint, json.loads(row.sizes),
                      row.reason, json.loads(row.present) if row.present else None,
                      enrolled=json.loads(row.enrolled) if row.enrolled else None,
                      release_mode=row.release_mode or "k_anonymous")
                for row in rows]

    def current(self, conn: Connection, dataset: str) -> Epoch | None:
        every = self.all(conn, dataset)
        return every[-1] if every else None

    def admit(self, conn: Connection, dataset: str, population: Population, *,
              release_mode: str = "k_anonymous") -> Epoch:
        """The epoch a release from ``population`` belongs to (:meth:`admit_population`)."""
        return self.admit_population(conn, dataset, population, release_mode=release_mode)[0]

    @staticmethod
    def stands(current: Epoch | None, population: Population, *,
               release_mode: str = "k_anonymous") -> bool:
        """Whether :meth:`admit_population` would answer ``current`` as it is, writing nothing
        (a caller may then skip the dataset's lock)."""
        if current is None:
            return False
        if release_mode == "dp":
            return current.dp
        return not current.dp and current.fingerprint == population.fingerprint

    def admit_population(self, conn: Connection, dataset: str, population: Population, *,
                         release_mode: str = "k_anonymous") -> tuple[Epoch, Population]:
        """The epoch a release asked now belongs to and the population it is computed from:
        ``population`` (the data as they are) when it is the epoch's or passes the check (a new
        epoch starts here), else the epoch's own, held in memory (the change waits: module
        docstring); :class:`DataChanged` when the check fails and this process does not hold
        the epoch's population (it was restarted since the data changed). In DP mode always
        ``population``, in the current epoch, unchecked (:meth:`_admit_dp`)."""
        current = self.current(conn, dataset)
        if release_mode == "dp":
            return self._admit_dp(conn, dataset, population, current), population
        if current is None:
            log.info("dataset %r: epoch 1 starts on the data as they are", dataset)
            return self._pin(conn, dataset, population, 1, "first release"), population
        if self.stands(current, population):
            self._held[dataset] = population
            return current, population
        failed = (dataset, population.fingerprint, current.number)
        problems = [] if failed not in self._failed else ["(checked before)"]
        if not problems:
            problems = self.check(conn, dataset, population)
        if not problems:
            log.warning("dataset %r: the data changed and passed the version check; epoch %d "
                        "starts", dataset, current.number + 1)
            return self._pin(conn, dataset, population, current.number + 1,
                             "data changed"), population
        self._failed.add(failed)
        held = self._held.get(dataset)
        first = (dataset, population.fingerprint) not in self._reported
        self._reported.add((dataset, population.fingerprint))
        # A DP-mode epoch's data were never checked: nothing of it is held for exact releases.
        if held is not None and held.fingerprint == current.fingerprint and not current.dp:
            if first:
                # How many problems, never what they are: their words hold counts.
                log.warning("dataset %r: the data changed and the version check found %d "
                            "problem(s); the change is held: releases keep coming from the "
                            "data of epoch %d until the data pass the check or the operator "
                            "starts a new epoch (fedstats center epoch; %s)", dataset,
                            len(problems), current.number, CORRECTIONS_GUIDE)
            return current, held
        if first:
            log.warning("dataset %r: the data changed and the version check found %d "
                        "problem(s); this process does not hold the data of epoch %d (it "
                        "started since they changed), so releases are paused until the data "
                        "pass the check or the operator starts a new epoch (fedstats center "
                        "epoch; %s)", dataset, len(problems), current.number, CORRECTIONS_GUIDE)
        raise DataChanged(dataset, current.number)

    def _admit_dp(self, conn: Connection, dataset: str, population: Population,
                  current: Epoch | None) -> Epoch:
        """DP mode: the current epoch whatever the data (no check, no hold: module docstring);
        epoch 1, or a new epoch after one of K-anonymous mode (its stored answers showed sizes
        rounded to K), starts here, on a condition of the ledger and the configuration only."""
        if current is not None and current.dp:
            return current
        number = 1 if current is None else current.number + 1
        log.info("dataset %r: epoch %d starts in DP mode", dataset, number)
        self._held.pop(dataset, None)
        return self._start(conn, dataset, population, number,
                           "first release" if current is None else "DP mode", "dp")

    def _pin(self, conn: Connection, dataset: str, population: Population, number: int,
             reason: str) -> Epoch:
        epoch = self._start(conn, dataset, population, number, reason)
        self._held[dataset] = population
        return epoch

    def check(self, conn: Connection, dataset: str, population: Population) -> list[str]:
        """What would let an earlier release be subtracted from a new one down to 1..K-1
        records, in words for the operator (empty: the new data may be released)."""
        problems = []
        k = self.k
        new_sizes = population.sizes
        every = self.all(conn, dataset)
        # A DP-mode epoch released nothing exactly: no size or left-out count of it.
        problems += self._check_left_out([e for e in every if not e.dp], population)
        for epoch in every:
            if epoch.dp:
                continue  # never released exactly: no size of it to subtract from
            for level in sorted(set(epoch.sizes) | set(new_sizes)):
                delta = new_sizes.get(level, 0) - epoch.sizes.get(level, 0)
                if isolating(abs(delta), k):
                    problems.append(f"epoch {epoch.number}: the size of level {level!r} changed "
                                    f"by {delta:+d}")
            delta = population.n - epoch.n
            if isolating(abs(delta), k):
                problems.append(f"epoch {epoch.number}: the dataset's size changed by {delta:+d}")
            problems += self._check_present(epoch, population)
        snapshots = self.disclosure.snapshots(conn, dataset)
        latest: dict[str, int] = {}
        for variable, number in snapshots:
            latest[variable] = max(latest.get(variable, 0), number)
        for (variable, number), snapshot in sorted(snapshots.items()):
            if variable not in population.values:
                continue
            after = snapshot.recount(population, variable)
            changed = int(isolating(abs(after - snapshot.totals), k).sum())
            if changed:
                problems.append(f"epoch {number}: {changed} released set(s) of {variable!r} "
                                f"changed by 1..K-1 records")
            if latest[variable] == number:
                small = int(isolating(after, k).sum())
                if small:
                    problems.append(f"{small} released set(s) of {variable!r} would hold "
                                    f"1..K-1 records of the new data")
        return problems

    def _check_left_out(self, every: list[Epoch], population: Population) -> list[str]:
        """Per level in both, and over those levels together, the rows left out changed by 0 or
        >= K since each earlier epoch (module docstring). Epochs before the last one that kept
        no enrolled rows are compared through the epochs after it; that one, while it is the
        latest, fails the check (unknown is never taken for unchanged)."""
        if population.enrolled is None:
            return []
        unknown = [i for i, epoch in enumerate(every) if epoch.enrolled is None]
        if unknown and unknown[-1] == len(every) - 1:
            return [f"epoch {every[-1].number}: its levels' enrolled rows were not kept (a "
                    "ledger from before they were), so the rows they leave out cannot be "
                    "compared; the operator's new epoch keeps them"]
        since = unknown[-1] + 1 if unknown else 0
        problems = []
        now = population.left_out()
        for epoch in every[since:]:
            assert epoch.enrolled is not None
            then = {level: epoch.enrolled.get(level, 0) - size
                    for level, size in epoch.sizes.items()}
            both = sorted(set(then) & set(now))
            deltas = {f"level {level!r}": now[level] - then[level] for level in both}
            deltas["all levels"] = sum(deltas.values())
            for where, delta in deltas.items():
                if isolating(abs(delta), self.k):
                    problems.append(f"epoch {epoch.number}: the rows left out of {where} "
                                    f"changed by {delta:+d}")
        return problems

    def _check_present(self, epoch: Epoch, population: Population) -> list[str]:
        """Per variable, the records present and missing in each level and in all levels
        together (what releases of a variable count when values may be missing: guarantee 15)
        changed by 0 or >= K since ``epoch``."""
        if epoch.present is None and population.level_sizes is None:
            return []  # complete cases, both: every variable's present count is the level's
        problems = []
        levels = sorted(set(epoch.sizes) | set(population.sizes))
        new_sizes = population.sizes
        for variable in sorted(population.values):
            old_p = {lv: epoch.present_count(variable, lv) for lv in levels}
            new_p = {lv: population.size(variable, lv) if lv in population.levels else 0
                     for lv in levels}
            deltas = {lv: (new_p[lv] - old_p[lv],
                           (new_sizes.get(lv, 0) - new_p[lv])
                           - (epoch.sizes.get(lv, 0) - old_p[lv])) for lv in levels}
            deltas["all levels"] = (sum(d[0] for d in deltas.values()),
                                    sum(d[1] for d in deltas.values()))
            for where, (present, missing) in deltas.items():
                if isolating(abs(present), self.k) or isolating(abs(missing), self.k):
                    problems.append(f"epoch {epoch.number}: the records of {variable!r} present "
                                    f"or missing in {where} changed by 1..K-1")
        return problems

    def roll(self, conn: Connection, dataset: str, population: Population, *,
             force: bool = False, release_mode: str = "k_anonymous"
             ) -> tuple[Epoch | None, list[str]]:
        """The operator's new epoch on the data as they are now, and what the check found:
        ``None`` (nothing changes) while the check finds problems, unless ``force``. In DP mode
        always a new epoch, unchecked: whether it moves depends on the operator alone, never
        on whether the data changed (module docstring)."""
        current = self.current(conn, dataset)
        if release_mode == "dp":
            number = 1 if current is None else current.number + 1
            log.warning("dataset %r: the operator starts epoch %d (DP mode)", dataset, number)
            self._held.pop(dataset, None)
            return self._start(conn, dataset, population, number, "operator", "dp"), []
        if self.stands(current, population):
            return current, []
        problems = self.check(conn, dataset, population) if current is not None else []
        if problems and not force:
            return None, problems
        number = 1 if current is None else current.number + 1
        reason = "operator, forced" if problems else "operator"
        log.warning("dataset %r: the operator starts epoch %d%s", dataset, number,
                    f", accepting {len(problems)} problem(s) of the version check"
                    if problems else "")
        return self._pin(conn, dataset, population, number, reason), problems

    @staticmethod
    def _start(conn: Connection, dataset: str, population: Population, number: int,
               reason: str, release_mode: str = "k_anonymous") -> Epoch:
        sizes = population.sizes
        present = None if population.level_sizes is None else {
            variable: {level: population.size(variable, level) for level in population.levels}
            for variable in population.values}
        enrolled = None if population.enrolled is None else dict(population.enrolled)
        conn.execute(epochs.insert().values(
            dataset=dataset, epoch=number, fingerprint=population.fingerprint,
            sizes=json.dumps(sizes, sort_keys=True), reason=reason, started_at=utcnow(),
            present=None if present is None else json.dumps(present, sort_keys=True),
            release_mode="dp" if release_mode == "dp" else None,
            enrolled=None if enrolled is None else json.dumps(enrolled, sort_keys=True),
        ))
        return Epoch(dataset, number, population.fingerprint, sizes, reason, present,
                     enrolled=enrolled, release_mode=release_mode)
