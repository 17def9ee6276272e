"""Which records and values a level keeps when variables may be missing (``missing =
"per_variable"``; ``docs/privacy.md``, guarantee 15).

Complete cases over every declared variable drop every record missing any one of them from every
release (``benchmarks/sim_missing.py`` measures it: ten variables each 5 % missing at random drop
about 40 % of the records). Per variable, a release of ``v`` counts the level's records whose
``v`` is present; the records missing ``v`` are one more released set of the level (its size is
the level's size minus the present count). So, per level, both must hold 0 or >= K records for
every variable: the **missing count** m and the **present count** p = n - m.

:func:`available_cases` applies the K rule to one level's records, the same way whatever is
asked (a property of the data version, like a level of fewer than K records being left out):

* a variable with 1..K-1 records missing in the level: those few records leave the level (every
  variable of theirs), so the variable has none missing;
* a variable with 1..K-1 records present: its values are withheld in the level (it is missing
  for all the level's records, which are >= K);
* repeated in declared order until nothing changes (each step shrinks the level's records or
  withholds one more variable, so it ends); a level left with fewer than K records is left out.

Afterwards every variable's missing and present counts in every level are 0 or >= K, and the
level's size is >= K (or it is out). The records that left, and the withheld values, enter no
release.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["available_cases"]


def available_cases(present: NDArray[np.bool_], k: int
                    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """For one level's records (``present``: variables × records, True where a value is
    present): the records the level keeps and the variables whose values it withholds (module
    docstring). No record kept when fewer than ``k`` remain (the level is left out)."""
    present = np.asarray(present, dtype=bool)
    n_variables, n_records = present.shape
    keep = np.ones(n_records, dtype=bool)
    withheld = np.zeros(n_variables, dtype=bool)
    changed = True
    while changed:
        changed = False
        size = int(np.count_nonzero(keep))
        if size < k:
            return np.zeros(n_records, dtype=bool), withheld
        for j in range(n_variables):
            if withheld[j]:
                continue
            p = int(np.count_nonzero(present[j] & keep))
            m = size - p
            if 0 < m < k:
                keep &= present[j]
                changed = True
                break  # the level's size changed: every count again, from the first variable
            if 0 < p < k:
                withheld[j] = True
                changed = True
    return keep, withheld
