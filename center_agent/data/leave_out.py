"""Which more rows a level leaves out so that the rows it leaves out number 0 or >= K
(``docs/privacy.md``, "No count in 1..K−1" and guarantee 15).

A level's enrolment is often public (a trial publishes its arms' sizes), and every exact release
of a level's size lets a caller subtract it from that enrolment. So the rows of a level that the
population leaves out (missing or non-finite values, the records :func:`available_cases
<center_agent.data.missing.available_cases>` drops) must number 0 or >= K: when ``e`` in 1..K-1
would be left out, ``K - e`` more of the level's rows are left out too.

Those rows are the ones of least **keyed rank**: a MAC of the row's content (its values of every
declared variable, categorical codes and time-to-event parts included, as exact doubles) under
a key derived from a secret kept in the ledger (``center_agent.gate.keys.population_secret``).
So the choice

* depends on the data only: the same rows, in any order, leave out the same contents (rows of
  equal content have equal ranks and are taken in their order of occurrence, and whichever of
  them is taken, the rows kept are the same multiset), hence the same population and the same
  fingerprint in every process of a center;
* cannot be predicted or steered by a caller, who never holds the key (it is never released);
* is not a function of a row alone, which is why DP mode, whose populations must be neighbours
  for neighbouring sources, never uses it (no K rule there).

The MAC is AES-CBC-MAC over the row's bytes in 16-byte blocks (the rows of one dataset all have
the same length, for which CBC-MAC is a pseudo-random function; Bellare, Kilian & Rogaway, "The
security of the cipher block chaining message authentication code", JCSS 61(3), 2000): one
AES-ECB call per block over all of a level's rows, so ranking 10^6 rows takes milliseconds, not
the seconds of a MAC per row. It is computed only for a level that needs rows left out.
"""

from __future__ import annotations

import hmac

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from numpy.typing import NDArray

__all__ = ["dataset_key", "fill_up", "least_ranked", "macs", "rank_blocks"]

_BLOCK = 16


def dataset_key(secret: bytes, dataset: str) -> bytes:
    """The AES-256 key of one dataset's ranks, derived from the center's secret (HMAC-SHA256):
    two datasets never share a key."""
    return hmac.digest(secret, b"leave-out\0" + dataset.encode(), "sha256")


def rank_blocks(content: NDArray[np.float64]) -> NDArray[np.uint8]:
    """Each row's content (rows × columns of doubles) as big-endian bytes, NaN in one bit
    pattern (a missing value is missing whatever NaN the source wrote; -0.0 stays itself, as in
    the fingerprint), zero-padded to whole 16-byte blocks: rows × blocks × 16."""
    rows = np.ascontiguousarray(content, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError("content must be rows × columns")
    canonical = np.where(np.isnan(rows), np.nan, rows).astype(">f8")
    raw = canonical.view(np.uint8).reshape(rows.shape[0], -1)
    width = max(_BLOCK, -(-raw.shape[1] // _BLOCK) * _BLOCK)
    out = np.zeros((rows.shape[0], width), dtype=np.uint8)
    out[:, :raw.shape[1]] = raw
    return out.reshape(rows.shape[0], width // _BLOCK, _BLOCK)


def macs(key: bytes, content: NDArray[np.float64]) -> NDArray[np.uint8]:
    """Each row's 16-byte CBC-MAC under ``key`` (rows × 16)."""
    blocks = rank_blocks(content)
    state = np.zeros((blocks.shape[0], _BLOCK), dtype=np.uint8)
    for j in range(blocks.shape[1]):
        encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
        mixed = np.bitwise_xor(state, blocks[:, j, :])
        out = encryptor.update(mixed.tobytes()) + encryptor.finalize()
        state = np.frombuffer(out, dtype=np.uint8).reshape(-1, _BLOCK)
    return state


def least_ranked(key: bytes, content: NDArray[np.float64], count: int) -> NDArray[np.intp]:
    """The positions (in ``content``'s row order) of the ``count`` rows of least keyed rank, rows
    of equal rank in their order of occurrence (module docstring)."""
    n = content.shape[0]
    if not 0 <= count <= n:
        raise ValueError(f"cannot leave out {count} of {n} rows")
    if count == 0:
        return np.empty(0, dtype=np.intp)
    mac = macs(key, content)
    words = mac.view(">u8").astype(np.uint64)  # rows × 2, the MAC's two halves
    # lexsort is stable: equal MACs (equal rows) keep their order of occurrence.
    order = np.lexsort((words[:, 1], words[:, 0]))
    return np.sort(order[:count]).astype(np.intp)


def fill_up(left_out: int, k: int) -> int:
    """How many more rows a level leaving ``left_out`` rows out must leave out: ``k -
    left_out`` when that is in 1..k-1, else 0."""
    return k - left_out if 0 < left_out < k else 0

