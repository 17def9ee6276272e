"""The report's uninformative-number notes (docs/methods.md §9.6), the two forms every DP
analysis writes its own with (``Analysis.uninformative``): a count's 95 % half-width against its
records, a value's 95 % interval against its public bounds."""

from __future__ import annotations

import math
from collections.abc import Sequence

from shared.dp_utility import UNINFORMATIVE_SHARE, pct

SHOWN = pct(UNINFORMATIVE_SHARE)


def records_note(what: str, halfwidth: float | None, n: float | None) -> str | None:
    """``what``'s note when its ± ``halfwidth`` records are above the share of ``n``."""
    if halfwidth is None or not n:
        return None
    share = float(halfwidth) / float(n)
    if share <= UNINFORMATIVE_SHARE:
        return None
    return (f"{what}: its 95 % error, ± {math.ceil(float(halfwidth))} records of n = {n} "
            f"({pct(share)}), is above {SHOWN}: uninformative")


def value_note(what: str, interval: Sequence[float] | None,
               bounds: Sequence[float] | None) -> str | None:
    """``what``'s note when its ``interval`` is wider than the share of its ``bounds``."""
    if not interval or not bounds or not bounds[1] > bounds[0]:
        return None
    share = (float(interval[1]) - float(interval[0])) / 2.0 / (float(bounds[1]) - float(bounds[0]))
    if share <= UNINFORMATIVE_SHARE:
        return None
    return (f"{what}: its 95 % interval [{interval[0]:.3g}, {interval[1]:.3g}] is ± {pct(share)} "
            f"of the bounds [{bounds[0]:g}, {bounds[1]:g}], above {SHOWN}: "
            "uninformative")
