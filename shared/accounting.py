"""The lifetime privacy guarantee of a dataset: optimal composition of its pure ε-DP releases.

Every release a center computes from a dataset with noise is ε-differentially private on its
own (each mechanism's proof is in docs/privacy.md), and the ledger debits each one's ε before it
is computed. Basic composition (Dwork & Roth 2014, Thm 3.14) gives ε-DP for the sum of the
ε's; that bound is what the budget spends, and it never gets weaker. For δ > 0 the same
releases also satisfy a smaller ε: the k-fold composition of ε-DP mechanisms is dominated by the
k-fold composition of randomized response with parameter ε (Kairouz, Oh & Viswanath 2015,
"The composition theorem for differential privacy", Thm 3.3; for different ε's, Murtagh &
Vadhan 2016), whose privacy loss distribution (PLD) takes the values ±ε_i. :func:`compose_pure`
composes those dominating PLDs with Google's ``dp_accounting`` library (Meiser & Mohammadi
2018, "Tight on budget?"; Doroshenko et al. 2022, "Connect the dots"), whose discretization
rounds every privacy loss *up* (a pessimistic estimate: the stated ε is never below the true
one), and reports the smallest ε for the asked δ, capped by the basic bound.

Nothing here reads data: the input is the list of ε's the ledger paid, which depends on the
requests only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["METHOD", "PrivacyGuarantee", "compose_pure"]

METHOD = ("optimal composition of pure ε-DP releases (Kairouz, Oh & Viswanath 2015), "
          "computed as a pessimistic privacy loss distribution with dp_accounting")

# The PLD's grid of privacy loss values: every loss is rounded up to a multiple of it, so the
# stated ε may exceed the exact one by at most about k·interval for k releases (never fall
# below it); 1e-4 keeps that far below the ε's a study spends.
_INTERVAL = 1e-4
# Distinct ε's composed one by one (each a convolution); beyond this many, ε's are rounded up
# to two significant digits first (more privacy loss, never less) to bound the work.
_MAX_DISTINCT = 64


@dataclass(frozen=True)
class PrivacyGuarantee:
    """``(epsilon, delta)``-DP over ``releases`` releases whose ε's sum to ``epsilon_pure``
    (which alone gives ``(epsilon_pure, 0)``-DP); ``method`` names the accounting."""

    epsilon: float
    delta: float
    epsilon_pure: float
    releases: int
    method: str = METHOD

    def line(self, who: str) -> str:
        """The guarantee in one sentence, e.g. ``line("each patient at center A, dataset
        d")``."""
        if self.releases == 0:
            return f"{who}: nothing released with noise to date (ε = 0)"
        pure = f"ε = {self.epsilon_pure:.4g}"
        # The (ε, δ) form only where it says less than the pure one at the digits shown (one
        # release's PLD gives ε a hair below its own).
        if self.delta > 0 and f"{self.epsilon:.4g}" != f"{self.epsilon_pure:.4g}":
            return (f"{who}: ({self.epsilon:.4g}, {self.delta:.0e})-DP over all "
                    f"{self.releases} noisy releases to date ({pure} with δ = 0)")
        return f"{who}: {pure}-DP over all {self.releases} noisy releases to date"


def _round_up(epsilon: float) -> float:
    exponent = math.floor(math.log10(epsilon)) - 1
    step = 10.0 ** exponent
    return math.ceil(epsilon / step - 1e-12) * step


def compose_pure(epsilons: Iterable[float] | Mapping[float, int], *,
                 delta: float) -> PrivacyGuarantee:
    """The ``(ε, δ)`` guarantee of the composition of pure ε_i-DP releases.

    Parameters
    ----------
    epsilons : iterable of float, or mapping ε → number of releases
        The ε of every release (zeros, exact releases guarded otherwise, are left out).
    delta : float
        The δ at which ε is stated, in [0, 1). With 0 the result is the basic bound.

    Returns
    -------
    PrivacyGuarantee
        ``epsilon_pure`` = Σ ε_i; ``epsilon`` ≤ ``epsilon_pure``, the smallest ε the
        pessimistic PLD of the dominating randomized-response pairs allows at ``delta``.

    Guarantee and assumptions: valid for any adaptive sequence of releases each ε_i-DP with
    respect to the same neighbouring relation (the composition theorem holds adaptively); the
    ε's may be chosen by the caller but not from the data.
    """
    counts: Counter[float] = Counter()
    items = epsilons.items() if isinstance(epsilons, Mapping) else ((e, 1) for e in epsilons)
    for eps, count in items:
        eps, count = float(eps), int(count)
        if not math.isfinite(eps) or eps < 0 or count < 0:
            raise ValueError(f"every ε must be finite and >= 0 (and counts >= 0), got {eps!r}")
        if eps > 0 and count:
            counts[eps] += count
    if not (0 <= delta < 1) or not math.isfinite(delta):
        raise ValueError(f"`delta` must be in [0, 1), got {delta!r}")
    releases = sum(counts.values())
    pure = math.fsum(eps * n for eps, n in counts.items())
    if releases == 0 or delta == 0:
        return PrivacyGuarantee(epsilon=pure, delta=delta, epsilon_pure=pure, releases=releases)
    if len(counts) > _MAX_DISTINCT:
        rounded: Counter[float] = Counter()
        for eps, n in counts.items():
            rounded[_round_up(eps)] += n
        counts = rounded

    # Imported here: a center imports this module at start-up, the library only when asked.
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    composed = None
    for eps, n in sorted(counts.items()):
        pld = pld_lib.from_privacy_parameters(
            common.DifferentialPrivacyParameters(eps, 0.0),
            value_discretization_interval=_INTERVAL)
        if n > 1:
            pld = pld.self_compose(n)
        composed = pld if composed is None else composed.compose(pld)
    assert composed is not None
    epsilon = float(composed.get_epsilon_for_delta(delta))
    return PrivacyGuarantee(epsilon=min(max(epsilon, 0.0), pure), delta=delta,
                            epsilon_pure=pure, releases=releases)
