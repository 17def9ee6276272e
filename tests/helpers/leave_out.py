"""A per-record reference of the rows a level leaves out beyond its own
(``center_agent.data.leave_out``), written from its documented rule with none of its code: each
record's AES-CBC-MAC computed on its own, the records sorted by (MAC, occurrence)."""

from __future__ import annotations

import functools
import hmac
import math
import struct
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

SECRET = bytes(range(100, 132))
"""The leave-out secret tests give the datasets they build (``Dataset(secret=SECRET)``)."""

Record = Sequence[float | None]
"""A record's content: each declared variable's value (None or NaN: missing), then each
categorical code, in declared order."""


def key_of(dataset: str, secret: bytes = SECRET) -> bytes:
    return hmac.digest(secret, b"leave-out\0" + dataset.encode(), "sha256")


@functools.lru_cache(maxsize=1 << 16)  # the property test asks the same records again and again
def _mac(key: bytes, record: tuple[float | None, ...]) -> bytes:
    return _compute_mac(key, record)


def mac(key: bytes, record: Record) -> bytes:
    return _mac(key, tuple(record))


def _compute_mac(key: bytes, record: Record) -> bytes:
    raw = b"".join(struct.pack(">d", math.nan if v is None or math.isnan(v) else v)
                   for v in record)
    raw += bytes(-len(raw) % 16 if raw else 16)
    state = bytes(16)
    for start in range(0, len(raw), 16):
        block = bytes(a ^ b for a, b in zip(state, raw[start:start + 16], strict=True))
        encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        state = encryptor.update(block) + encryptor.finalize()
    return state


def least_ranked(key: bytes, records: Sequence[Record], count: int) -> set[int]:
    """The indices of the ``count`` records of least keyed rank (ties: first occurrence)."""
    ranked = sorted(range(len(records)), key=lambda i: (mac(key, records[i]), i))
    return set(ranked[:count])


def fill_up(level_rows: int, kept: Sequence[Record], k: int, key: bytes) -> list[Record] | None:
    """Complete cases: the records a level keeps from its ``kept`` complete ones, of
    ``level_rows`` labelled with it; None when the level is out."""
    left_out = level_rows - len(kept)
    more = k - left_out if 0 < left_out < k else 0
    if len(kept) - more < k:
        return None
    dropped = least_ranked(key, kept, more)
    return [r for i, r in enumerate(kept) if i not in dropped]


def ledger_secret(ledger: Path) -> bytes:
    """The leave-out secret a center made in its SQLite ledger (the checker reads it; a caller
    never can: it is never released)."""
    engine = sa.create_engine(f"sqlite:///{ledger}")
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT value FROM fedstats_secret WHERE name = :n"),
                               {"n": "population_leave_out"}).first()
    finally:
        engine.dispose()
    assert row is not None, "the center made no leave-out secret"
    return bytes(row[0])


def per_variable(records: Sequence[Record], n_variables: int, k: int, key: bytes
                 ) -> tuple[list[Record], set[int]] | None:
    """``missing = "per_variable"``, one level's records (content: variables first): the
    records kept and the variables withheld, by the documented rule record by record
    (available cases, then K - e more of least keyed rank when 1..K-1 left, then available
    cases again); None when the level is out."""
    def available(rows: list[Record]) -> tuple[list[Record], set[int]]:
        withheld: set[int] = set()
        changed = True
        while changed and len(rows) >= k:
            changed = False
            for j in range(n_variables):
                if j in withheld:
                    continue
                p = sum(1 for r in rows if not _missing(r[j]))
                if 0 < len(rows) - p < k:
                    rows = [r for r in rows if not _missing(r[j])]
                    changed = True
                    break
                if 0 < p < k:
                    withheld.add(j)
                    changed = True
        return rows, withheld

    kept, withheld = available(list(records))
    left_out = len(records) - len(kept)
    if 0 < left_out < k and len(kept) >= k:
        dropped = least_ranked(key, kept, k - left_out)
        kept, withheld = available([r for i, r in enumerate(kept) if i not in dropped])
    if len(kept) < k or 0 < len(records) - len(kept) < k:
        return None
    return kept, withheld


def _missing(value: float | None) -> bool:
    return value is None or not math.isfinite(value)
