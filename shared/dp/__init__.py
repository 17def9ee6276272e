"""Differentially private quantiles and boxplots (seed 000; ``docs/methods.md`` §5).

Every function takes the data, an explicit ``epsilon``, public ``bounds``, the ``neighbouring``
relation and a ``numpy.random.Generator``, and returns a frozen result that carries the
:class:`~shared.privacy.PrivacySpent` of the release.

* :func:`private_quantile` — one quantile, exponential mechanism (Smith 2011).
* :func:`joint_exp` — m quantiles in one mechanism (Gillenwater et al. 2021), exact sampler.
* :func:`approx_quantiles` — m quantiles by recursive splitting (Kaplan et al. 2022).
* :func:`unbounded_quantile` — AboveThreshold on a geometric grid (Durfee 2023), also reflected;
  Laplace or one-sided (exponential) noise.
* ``resolution=r`` (JointExp, PrivateQuantile, DPBoxplot): outputs on the public grid of a
  variable recorded at resolution r (the multiples of r clipped into the bounds; :func:`make_grid`
  builds it, refusing one too fine for the bounds) — PrivateQuantile over the grid with ties
  counted by mid-rank, JointExp on values jittered within their grid cell, rounded to the grid;
  :func:`snap_to_grid` moves other outputs there (post-processing). ``docs/methods.md`` §5.10.
* :func:`dp_life_table` — one arm's life table (events and censorings per interval of a public
  grid) with Laplace or Gaussian noise on every cell, projected onto counts >= 0; read by
  :func:`dp_kaplan_meier`, :func:`dp_rmst`, :func:`dp_rmst_difference` and :func:`dp_logrank`
  with uncertainties that include the noise (``docs/methods.md`` §13.1).
* :func:`dp_boxplot` — DPBoxplot (Ramsay & Diaz-Rodriguez, ICML 2025, arXiv 2405.20415) as the
  authors' code runs it (its extremes by the one-sided walk, ``method``
  ``"dpboxplot_one_sided_walk"``); :func:`dp_boxplot_algorithm_1` — the paper's Algorithm 1 as
  written (``extremes="algorithm_1"``, ``method`` ``"dpboxplot_algorithm_1"``);
  :func:`naive_boxplot` — the
  four single-method boxplots the seed compares it with. ``BoxplotResult.to_bxp_stats()`` feeds
  ``matplotlib.axes.Axes.bxp``.
"""

from shared.dp._common import QuantilesResult, make_grid, snap_to_grid
from shared.dp.approx_quantile import approx_quantiles
from shared.dp.boxplot import (
    NAIVE_METHODS,
    BoxplotResult,
    dp_boxplot,
    dp_boxplot_algorithm_1,
    naive_boxplot,
)
from shared.dp.joint_exp import joint_exp
from shared.dp.life_table import (
    DPLifeTable,
    dp_kaplan_meier,
    dp_life_table,
    dp_logrank,
    dp_rmst,
    dp_rmst_difference,
)
from shared.dp.private_quantile import private_quantile
from shared.dp.unbounded import unbounded_quantile
from shared.fields import EXTREMES_WALKS

__all__ = [
    "EXTREMES_WALKS",
    "NAIVE_METHODS",
    "BoxplotResult",
    "DPLifeTable",
    "QuantilesResult",
    "approx_quantiles",
    "dp_boxplot",
    "dp_boxplot_algorithm_1",
    "dp_kaplan_meier",
    "dp_life_table",
    "dp_logrank",
    "dp_rmst",
    "dp_rmst_difference",
    "joint_exp",
    "make_grid",
    "naive_boxplot",
    "private_quantile",
    "snap_to_grid",
    "unbounded_quantile",
]
