"""The coordinator operator's tools on its store (``fedstats coordinator analyst|audit``): analyst
accounts, their ε quotas and the audit log, on the store the settings name (the running
coordinator sees every change at once: a revoked token is refused from its next request).

Each returns the command's exit code: 0 done; 2 (through the CLI's error reporting) for bad
settings, an unknown analyst or center, a bad value. A token is printed once, by :func:`add`, alone
on stdout (what it says about it goes to stderr), so ``TOKEN=$(fedstats coordinator analyst add
...)`` keeps it out of the terminal's scrollback.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from pydantic import SecretStr

from coordinator.accounts import Accounts
from coordinator.db import AuditRecord, Store
from fedstats_service.errors import ServiceError

AUDIT_FIELDS = ("id", "at", "analyst_id", "token_id", "action", "target", "request_id", "detail")


class BadValue(ServiceError):
    """A value the command cannot take (reported as exit 2, naming the option)."""

    status_code = 422
    error = "bad_value"


class StoreView(Protocol):
    """What the commands read of the settings: ``coordinator.core.config.StoreSettings`` (the
    CLI's: no token needed) or the service's whole ``Settings``."""

    @property
    def store_url(self) -> str: ...

    @property
    def centers(self) -> Mapping[str, Any]: ...

    @property
    def analyst_tokens(self) -> Sequence[SecretStr]: ...


@contextmanager
def opened(settings: StoreView) -> Iterator[Accounts]:
    """The accounts of the store the settings name, closed after the block."""
    store = Store(settings.store_url)
    try:
        yield Accounts(store, settings.analyst_tokens)
    finally:
        store.close()


def add(settings: StoreView, name: str, role: str, expires_in_days: float | None = None) -> int:
    with opened(settings) as accounts:
        try:
            made = accounts.add(name, role, expires_in_days=expires_in_days)
        except ValueError as exc:
            raise BadValue(f"--name/--role/--expires-in: {exc}") from None
    print(f"analyst {made.analyst.id} ({made.analyst.name}, {made.analyst.role}) added"
          f"{_expiring(made.analyst.expires_at)}; its token follows, shown this once (only its "
          "hash is kept):", file=sys.stderr)
    print(made.token)
    return 0


def rotate(settings: StoreView, analyst_id: str, expires_in_days: float | None = None) -> int:
    """A new token for an account (printed alone on stdout, once); the old one stops working
    at once."""
    with opened(settings) as accounts:
        if analyst_id in accounts.config_ids:
            raise BadValue(f"{analyst_id} is a token of analyst_tokens: replace it in the "
                           "settings and restart the coordinator")
        try:
            made = accounts.rotate(analyst_id, expires_in_days=expires_in_days)
        except ValueError as exc:
            raise BadValue(f"--expires-in: {exc}") from None
    print(f"analyst {made.analyst.id} ({made.analyst.name}): new token"
          f"{_expiring(made.analyst.expires_at)}; the old one is refused from now on. The new "
          "token follows, shown this once:", file=sys.stderr)
    print(made.token)
    return 0


def _expiring(expires_at: str | None) -> str:
    return f", expiring {expires_at[:19]} UTC" if expires_at else ", never expiring"


def list_accounts(settings: StoreView) -> int:
    """Every account, then each configured token's analyst, with their quotas."""
    with opened(settings) as accounts:
        listed = accounts.list()
        quotas = accounts.store.quotas_of()
        config = accounts.config_ids
    print(f"{'ID':<24} {'ROLE':<8} {'CREATED':<20} {'REVOKED':<20} {'EXPIRES':<20} NAME")
    for a in listed:
        expires = "-" if a.expires_at is None else a.expires_at[:19] + (
            " (expired)" if a.expired() else "")
        print(f"{a.id:<24} {a.role:<8} {a.created_at[:19]:<20} "
              f"{(a.revoked_at or '-')[:19]:<20} {expires:<20} {a.name}")
    for analyst_id, where in config.items():
        print(f"{analyst_id:<24} {'analyst':<8} {'(settings)':<20} {'-':<20} {'-':<20} {where}")
    if quotas:
        print(f"\n{'ANALYST':<24} {'CENTER':<16} {'DATASET':<16} {'QUOTA ε':>10} {'SPENT ε':>10}")
        for q in quotas:
            limit = "none" if q.epsilon is None else f"{q.epsilon:g}"
            print(f"{q.analyst_id:<24} {q.center:<16} {q.dataset:<16} {limit:>10} {q.spent:>10g}")
    return 0


def revoke(settings: StoreView, analyst_id: str) -> int:
    with opened(settings) as accounts:
        if analyst_id in accounts.config_ids:
            raise BadValue(f"{analyst_id} is a token of analyst_tokens: remove it from the "
                           "settings and restart the coordinator")
        record = accounts.revoke(analyst_id)
    print(f"analyst {record.id} ({record.name}) revoked at {record.revoked_at}")
    return 0


def set_quota(settings: StoreView, analyst_id: str, *, center: str, dataset: str,
              epsilon: float | None) -> int:
    """Set (``epsilon``) or remove (None) a quota at a registered center's dataset."""
    if center not in settings.centers:
        raise BadValue(f"--center {center!r} is not a registered center "
                       f"({', '.join(sorted(settings.centers))})")
    with opened(settings) as accounts:
        try:
            quota = accounts.set_quota(analyst_id, center, dataset, epsilon)
        except ValueError as exc:
            raise BadValue(f"--epsilon: {exc}") from None
    limit = "no limit" if quota.epsilon is None else f"ε quota {quota.epsilon:g}"
    print(f"analyst {analyst_id} at {center}/{dataset}: {limit}, {quota.spent:g} spent")
    return 0


def audit(settings: StoreView, *, fmt: str = "text", out: Path | None = None,
          analyst: str | None = None, action: str | None = None, limit: int = 100) -> int:
    """The newest ``limit`` audit rows (filtered), as text lines, CSV or JSON, on stdout or in
    ``out`` (made readable by its owner only)."""
    if limit < 1:
        raise BadValue("--limit must be at least 1")
    with opened(settings) as accounts:
        rows = accounts.store.audit_entries(limit=limit, analyst_id=analyst, action=action)
    text = render_audit(rows, fmt)
    if out is None:
        sys.stdout.write(text)
    else:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    return 0


def render_audit(rows: list[AuditRecord], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([asdict(r) for r in rows], indent=2) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=AUDIT_FIELDS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
        return buffer.getvalue()
    return "".join(
        f"{r.at} {r.action:<15} analyst={r.analyst_id or '-'} token={r.token_id or '-'} "
        f"target={r.target or '-'} request={r.request_id or '-'}"
        + (f" {r.detail}" if r.detail else "") + "\n"
        for r in rows)
