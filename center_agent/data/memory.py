"""A center's resident memory follows the data it keeps (``docs/benchmarks.md``, "Hospital scale").

Two allocators keep memory a process freed unless told otherwise, and both did so measurably in a
center (``benchmarks/bench_scale.py rss``):

* Arrow's memory pool (mimalloc in the pyarrow wheels) keeps the pages of a table read and
  dropped: a center that read 10^7 rows (80 MB of values) stayed 216 MB above its population until
  :func:`give_back` asked the pool to return them.
* glibc's ``malloc`` raises its mmap threshold (up to 32 MB) whenever a large block is freed, so
  the next arrays of a few MB land in its heap and stay there, fragmented, after the request that
  made them (some 40 MB per study at 10^6 rows). :func:`tune_allocator` fixes the threshold at
  1 MiB: every array of 128 Ki values or more is mapped on its own and returned when freed, at the
  cost of the page faults of mapping it afresh (about a millisecond per 8 MB array, against the
  milliseconds to seconds a release computes on it).

Both are no-ops where the platform lacks them (not Linux/glibc, or another Arrow pool).
"""

from __future__ import annotations

import ctypes
import logging
import threading

import pyarrow as pa

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter number for the mmap threshold (``<malloc.h>``)."""
MMAP_THRESHOLD_BYTES = 1 << 20

_libc: ctypes.CDLL | None = None
_looked_up = False
_tuned = False
_lock = threading.Lock()


def _glibc() -> ctypes.CDLL | None:
    global _libc, _looked_up
    if not _looked_up:
        _looked_up = True
        try:  # glibc by its soname (find_library would run ldconfig)
            libc = ctypes.CDLL("libc.so.6")
            if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim"):
                _libc = libc
        except OSError:
            _libc = None
    return _libc


def tune_allocator() -> None:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES` (once per process)."""
    global _tuned
    with _lock:
        if _tuned:
            return
        _tuned = True
        libc = _glibc()
        if libc is not None and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
            log.debug("mallopt(M_MMAP_THRESHOLD) was refused; the default threshold applies")


def give_back() -> None:
    """Return the memory freed since the last call to the operating system: Arrow's pool's
    unused pages, and glibc's free heap pages (``malloc_trim``)."""
    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
