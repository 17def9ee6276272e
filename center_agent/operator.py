"""What a center's operator runs beside the service (``fedstats center ...``).

* ``keygen``: a signing key for ``signing_key_file`` and its public key for the peers;
* ``public-key``: the center's public key, to give to the other centers' operators;
* ``epoch``: each dataset's epoch and what the version check finds in the data as they are now,
  or, for a dataset the center cannot serve from (unavailable), the start-up check's line naming
  what to fix; ``--roll`` starts a new epoch when the check passes (``--force``: even when it
  does not, after reading what it found); each variable a forced epoch left blocked is named
  with its ways out, one of them ``--renew VARIABLE`` (a new version of it; audited, like a
  roll). A dataset in DP mode has no check (its releases come from the data as they are):
  ``--roll`` always starts a new epoch, no ``--force`` needed;
* ``audit``: the audit trail (who asked what, when, on which data, and what came of it), read
  from the ledger directly, as text or exported as CSV or JSON (``docs/privacy.md``, "Audit
  trail").

Each prints plain text and returns an exit code (0 ok, 1 a check that found problems or a roll
refused, 2 bad usage).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from center_agent.audit import AuditQuery, AuditRecord, read
from center_agent.core.config import EpochSettings, LedgerSettings
from center_agent.db import Store

if TYPE_CHECKING:
    from center_agent.core.config import Settings

Say = Callable[[str], None]


def keygen(out: Path, *, public_dir: Path | None, center_id: str | None, force: bool,
           say: Say = print) -> int:
    """Write a key pair at ``out`` (kept when it exists, unless ``force``); copy the public key
    to ``public_dir/<center_id>.pub`` when asked (``center_id`` is then required: checked before
    anything is written)."""
    if public_dir is not None and center_id is None:
        print("--public-dir needs --id (the file is named after the center)", file=sys.stderr)
        return 2
    from center_agent.gate.keys import read_private_key, write_key_pair

    pub = out.with_name(out.name + ".pub")
    if out.exists() and not force:
        from center_agent.gate.keys import encode_public_key

        public = encode_public_key(read_private_key(out).public_key())
        pub.write_text(public + "\n")
        say(f"kept the existing key {out}")
    else:
        public = write_key_pair(out)
        say(f"wrote {out} (keep it secret) and {pub}")
    if public_dir is not None:
        public_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pub, public_dir / f"{center_id}.pub")
        say(f"copied the public key to {public_dir / f'{center_id}.pub'}")
    say(public)
    return 0


def public_key(settings: Settings, say: Say = print) -> int:
    from center_agent.services import Services

    services = Services.build(settings, check_sources=False)
    try:
        say(services.gate.keys.public_key)
    finally:
        services.close()
    return 0


def epoch(settings: EpochSettings, *, dataset: str | None, roll: bool, force: bool,
          renew: str | None = None, say: Say = print) -> int:
    """Report (and with ``roll`` start) the epochs of one dataset or of all; with ``renew``
    (one dataset's variable, blocked since a forced epoch), start a new version of it.

    Reads the ledger and the datasets' sources only (``EpochSettings``: no token, no service
    setting), and builds no service: the epochs and their check (``center_agent.gate.epochs``)
    on the ledger's disclosure memory, as the running center sees them (it takes the same
    per-dataset lock, so a roll and a release never interleave)."""
    from center_agent.core.errors import DataSourceError, UnknownDataset
    from center_agent.data import Dataset
    from center_agent.db import UnknownLedgerDataset, population_secret
    from center_agent.gate.disclosure import Disclosure
    from center_agent.gate.epochs import Epochs

    if dataset is not None and dataset not in settings.datasets:
        raise UnknownDataset(dataset)
    if renew is not None and (dataset is None or roll):
        print("--renew needs --dataset (the variable's dataset) and no --roll (renew after "
              "the epoch has started)", file=sys.stderr)
        return 2
    epochs = Epochs(settings.k, Disclosure(settings.k,
                                           max_releases=settings.max_releases_per_variable,
                                           max_limits=settings.max_limits_per_variable))
    store = Store(settings.ledger_url)
    status = 0
    try:
        # The center's own leave-out secret: the population it serves, the same fingerprint.
        secret = population_secret(store)
        names = [dataset] if dataset is not None else list(settings.datasets)
        for name in names:
            ds = Dataset(name, settings.datasets[name], settings.k, secret=secret)
            try:
                try:
                    # The start-up checks first: a dataset the center cannot serve from is
                    # named with what to fix (the line its log has), and the others reported.
                    ds.check_columns()
                    population = ds.population()  # the one just read (a file's is kept)
                except DataSourceError as exc:
                    say(f"{name}: unavailable: {exc.detail}")
                    status = max(status, 1)
                    continue
                try:
                    with store.locked(name) as (conn, _total, _spent):
                        if renew is not None:
                            status = max(status, _renew(epochs, conn, name, population,
                                                        renew, say=say))
                        elif ds.config.release_mode == "dp":
                            status = max(status, _dp_epoch_of(epochs, conn, name, population,
                                                              roll=roll, say=say))
                        else:
                            status = max(status, _epoch_of(epochs, conn, name, population,
                                                           roll=roll, force=force, say=say))
                except UnknownLedgerDataset:
                    say(f"{name}: no epoch yet (the center has not served it: its first "
                        "release or /v1/info starts one on the data as they are then)")
            finally:
                ds.source.close()
    finally:
        store.close()
    return status


def _epoch_of(epochs: Any, conn: Any, name: str, population: Any, *, roll: bool, force: bool,
              say: Say) -> int:
    """One dataset's report (and roll), inside its lock; the exit code."""
    from center_agent.gate.epochs import CORRECTIONS_GUIDE

    status = 0
    current = epochs.current(conn, name)
    # An epoch of DP mode was never checked: K-anonymous releases need the check first.
    changed = current is not None and (current.dp
                                       or current.fingerprint != population.fingerprint)
    problems = epochs.check(conn, name, population) if changed else []
    if current is None:
        say(f"{name}: no epoch yet (the first release or /v1/info starts one on the data as "
            "they are then)")
    elif current.dp:
        say(f"{name}: epoch {current.number} (since the {current.reason}) was of DP mode: the "
            "data are checked against the K-anonymous epochs before an exact release")
    else:
        say(f"{name}: epoch {current.number} (since the {current.reason}); the data "
            f"{'changed since it began' if changed else 'are those it pinned'}")
    for problem in problems:
        say(f"  - {problem}")
    if changed and not problems:
        say("  the check passes: the next release starts a new epoch by itself")
    if roll and changed:
        new, found = epochs.roll(conn, name, population, force=force)
        if new is None:
            say("  not rolled: earlier releases could be subtracted from new ones (--force "
                "starts the epoch anyway, accepting that risk; what else to do: "
                f"{CORRECTIONS_GUIDE})")
            status = 1
        else:
            say(f"  started epoch {new.number}"
                + (" (forced past the problems above)" if found else ""))
            _audit_operator(conn, name, "epoch_roll", new.number, population.fingerprint,
                            {"forced": bool(found), "problems": len(found)})
            status = max(status, _report_blocked(epochs, conn, name, population, say))
    elif changed and problems and current.dp:
        say("  releases are paused until the data pass the check or a new epoch starts; what "
            f"to do: {CORRECTIONS_GUIDE}")
        status = 1
    elif changed and problems:
        say(f"  the change is held: a running center keeps answering from the data of epoch "
            f"{current.number} (one started since the change pauses them) until the data pass "
            f"the check or a new epoch starts; what to do: {CORRECTIONS_GUIDE}")
        status = 1
    elif current is not None and not changed:
        status = max(status, _report_blocked(epochs, conn, name, population, say))
    return status


def _report_blocked(epochs: Any, conn: Any, name: str, population: Any, say: Say) -> int:
    """Name each variable no exact release of which is possible on the epoch's data (earlier
    releases hold 1..K-1 of its records: only after a forced epoch), why, and the ways out;
    1 when there is one."""
    blocked = epochs.disclosure.blocked(conn, name, population)
    for variable, sets in blocked.items():
        version = epochs.disclosure.version(conn, name, variable)
        say(f"  - {variable!r} is blocked: {sets} set(s) its earlier exact releases counted "
            f"hold 1..K-1 records of these data (the epoch was forced over them), so every "
            f"exact release of it is refused (409 data_changed). Either wait: a change of the "
            f"data that brings every such set to 0 or >= K records passes the check and "
            f"unblocks it by itself (fedstats center epoch shows when); or start version "
            f"{version.number + 1} of it: fedstats center epoch --dataset {name} --renew "
            f"{variable} (its exact releases then start a new memory; anyone holding an "
            f"earlier release of it and a new one may subtract them, the risk the forced "
            f"epoch accepted)")
    return 1 if blocked else 0


def _renew(epochs: Any, conn: Any, name: str, population: Any, variable: str, *,
           say: Say) -> int:
    """Start a new version of a blocked variable in the current epoch (audited)."""
    from center_agent.gate.epochs import CORRECTIONS_GUIDE

    current = epochs.current(conn, name)
    if current is None or current.dp or current.fingerprint != population.fingerprint:
        say(f"{name}: not renewed: "
            + ("no epoch yet" if current is None else
               "its epoch is of DP mode (no exact release to admit)" if current.dp else
               "the data changed since the epoch began (held or paused: see fedstats center "
               "epoch)")
            + f"; a variable is renewed over the data its epoch pinned ({CORRECTIONS_GUIDE})")
        return 1
    if variable not in population.values:
        say(f"{name}: not renewed: no variable {variable!r} (declared: "
            f"{', '.join(sorted(population.values))})")
        return 1
    blocked = epochs.disclosure.blocked(conn, name, population)
    if variable not in blocked:
        say(f"{name}: not renewed: {variable!r} is not blocked (its earlier releases are "
            f"K-anonymous on the data of epoch {current.number}); a new version would only "
            "let them be subtracted from new ones")
        return 1
    version = epochs.disclosure.renew(conn, name, variable, current.number)
    _audit_operator(conn, name, "variable_version", current.number, population.fingerprint,
                    {"variable": variable, "version": version.number})
    say(f"{name}: {variable!r} starts version {version.number} in epoch {current.number}: its "
        f"exact releases are admitted again, against a new memory")
    return 0


def _audit_operator(conn: Any, name: str, kind: str, epoch: int, fingerprint: str,
                    question: dict[str, Any]) -> None:
    """The operator's action in the audit trail, beside the releases it concerns."""
    from center_agent import audit as trail

    trail.record(conn, dataset=name, kind=kind, caller="operator", outcome="done",
                 epsilon_units=0, question=json.dumps(question, sort_keys=True), epoch=epoch,
                 data_fingerprint=fingerprint)


def _dp_epoch_of(epochs: Any, conn: Any, name: str, population: Any, *, roll: bool,
                 say: Say) -> int:
    """A DP-mode dataset's report (and roll), inside its lock: no check (its releases come from
    the data as they are, ``center_agent.gate.epochs``); a roll always starts a new epoch."""
    current = epochs.current(conn, name)
    if current is None:
        say(f"{name}: no epoch yet (DP mode: the first release or /v1/info starts one)")
        return 0
    say(f"{name}: epoch {current.number} (since the {current.reason}); DP mode: releases are "
        "computed from the data as they are, no version check; a repeated question gets its "
        "stored answer until a new epoch (--roll) starts")
    if roll:
        new, _found = epochs.roll(conn, name, population, release_mode="dp")
        say(f"  started epoch {new.number}")
        _audit_operator(conn, name, "epoch_roll", new.number, population.fingerprint,
                        {"forced": False, "problems": 0, "release_mode": "dp"})
    return 0


AuditFormat = Literal["text", "csv", "json"]
TEXT_LIMIT = 100
"""The records ``audit`` prints as text unless told otherwise (an export takes them all)."""


def audit(settings: LedgerSettings, *, fmt: AuditFormat = "text", out: Path | None = None,
          dataset: str | None = None, study: str | None = None, analyst: str | None = None,
          since: datetime | None = None, until: datetime | None = None,
          limit: int | None = None, say: Say = print) -> int:
    """The newest ``limit`` records the filters select, oldest first (``limit`` None: 100 as
    text, all in an export), printed or written to ``out`` (readable by its owner only: the
    trail names studies and analysts)."""
    if limit is not None and limit < 1:
        print("--limit must be at least 1", file=sys.stderr)
        return 2
    if limit is None and fmt == "text":
        limit = TEXT_LIMIT
    store = Store(settings.ledger_url)
    try:
        records = read(store.engine, AuditQuery(
            since=since, until=until, dataset=dataset, study=study, analyst=analyst,
            limit=limit, newest=True)).records
    finally:
        store.close()
    text = render(records, fmt)
    if out is None:
        if text:
            say(text.rstrip("\n"))
        return 0
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    say(f"wrote {len(records)} audit records to {out}")
    return 0


FIELDS = tuple(AuditRecord.model_fields)


def render(records: Sequence[AuditRecord], fmt: AuditFormat) -> str:
    """``records`` as text (a line each), CSV (a header row, then a row each) or JSON (an
    array of objects, one per line)."""
    if fmt == "json":
        lines = [json.dumps(r.model_dump(mode="json")) for r in records]
        return "[\n" + ",\n".join(lines) + "\n]\n" if lines else "[]\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({**r.model_dump(mode="json"), "epsilon": f"{r.epsilon:.10g}"})
        return buffer.getvalue()
    return "".join(_line(r) + "\n" for r in records)


def _line(r: AuditRecord) -> str:
    who = " ".join(f"{name}={value}" for name, value in (
        ("study", r.study_id), ("analyst", r.analyst_id), ("request", r.request_id),
        ("caller", r.caller)) if value is not None)
    version = f"epoch={r.epoch}" if r.epoch is not None else "epoch=-"
    return (f"{r.at:%Y-%m-%d %H:%M:%S} {r.dataset} {r.kind} {r.outcome} "
            f"epsilon={r.epsilon:g} {version} {who} {r.question or ''}").rstrip()
