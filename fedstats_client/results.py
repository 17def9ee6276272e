"""A study's result as typed objects and pandas frames (docs/client.md, "Results").

The coordinator's answer (``GET /v1/studies/{id}``) is validated with its own models
(``coordinator.models.StudyView``); :class:`StudyRecord` wraps it, and :class:`Results` reads
the analyses by kind::

    record.result.mwu.to_frame()          # one row per test: statistic, law, df, pvalue
    record.result.mwu.effects()           # θ per center and stratified, with 95 % intervals
    record.result.mwu.heterogeneity       # Cochran's Q, I² (interval), τ² between centers
    record.result.shift.to_frame()        # the Hodges-Lehmann shift: what the bins allow
    record.result.table.to_frame()        # the federated K-anonymous table, one row per bin
    record.result.quantiles.to_frame()    # (estimator, group) x levels
    record.result.dp_quantiles.to_frame() # (group, center) x levels, with n and rank error
    record.result.boxplots.to_frame()     # (group, center) x the seven numbers (and the pooled
                                          # box's further levels), pooled included
    record.result.boxplots.plot()         # matplotlib Axes
    record.result.describe.to_frame()     # one tidy row per (variable, center, arm): n,
                                          # mean, sd, median, q1, q3, ε, method, intervals
    record.result.kruskal.to_frame()      # one row per test: H, df, pvalue (and the trend's)
    record.result.kruskal.arms()          # per arm: n and mean rank, federated and per center
    record.result.survival.to_frame()     # one tidy row per (center, arm, time): S, band, at risk
    record.result.survival.tests()        # log-rank (stratified, pooled), HR, RMST difference
    record.result.centers                 # each center included or excluded, and why

``mwu``, ``table``, ``quantiles``, ``kruskal`` and ``survival`` are the study's (first) analysis
of that kind; ``boxplots`` and ``dp_quantiles`` gather every analysis of their kind (a study
asks one per group level). An analysis that failed in a ``partially_failed`` study raises
:class:`~fedstats_client.errors.AnalysisFailed` (naming the center) when read; one the study did
not ask raises :class:`~fedstats_client.errors.NoSuchAnalysis`.

pandas and matplotlib are imported when a frame or a plot is first asked for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coordinator.models import (
    Catalog,
    DescribeResult,
    DPBoxplotResult,
    DPQuantilesResult,
    FailedAnalysis,
    Heterogeneity,
    KruskalResult,
    MWUResult,
    QuantilesResult,
    ShiftResult,
    StudyPlan,
    StudyResult,
    StudyView,
    SurvivalResult,
    TableResult,
)
from fedstats_client.errors import AnalysisFailed, NoSuchAnalysis

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

BOX_COLUMNS = ("n", "lower_outliers", "lower_whisker", "q1", "median", "q3", "upper_whisker",
               "upper_outliers", "outlier_halfwidth", "epsilon", "lower_branch", "upper_branch",
               "quartile_rank_halfwidth", "extreme_rank_halfwidth", "n_halfwidth")
"""A box's columns: its numbers, then each part's 95 % uncertainty (docs/methods.md §9.4-§9.5;
None where the result predates it)."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:  # pragma: no cover - the `client` extras install it
        raise ImportError("frames need pandas: pip install 'fedstats[client]'") from None
    return pandas


def _level_name(level: float) -> str:
    return f"q{level:g}"


class Kruskal:
    """A Kruskal-Wallis analysis's result (``raw``: the coordinator's model)."""

    def __init__(self, raw: KruskalResult) -> None:
        self.raw = raw

    def to_frame(self) -> pd.DataFrame:
        """One row per test (index ``test``): the Kruskal-Wallis tests (``table``, ``sum``,
        ``weighted``: H against χ² with ``df``) and each center's (``center:<id>``), then, with
        ``ordered``, Jonckheere-Terpstra's (``trend:table``, ``trend:sum``: z against N(0, 1))."""
        rows = [{"test": name, "statistic": t.statistic, "law": f"chi2({t.df})", "df": t.df,
                 "pvalue": t.pvalue} for name, t in self.raw.tests.items()]
        rows += [{"test": f"center:{c.center}", "statistic": c.statistic,
                  "law": f"chi2({c.df})", "df": c.df, "pvalue": c.pvalue}
                 for c in self.raw.centers]
        rows += [{"test": f"trend:{name}", "statistic": t.zstatistic, "law": "z", "df": None,
                  "pvalue": t.pvalue} for name, t in self.raw.trend.items()]
        return _pandas().DataFrame(rows, columns=["test", "statistic", "law", "df",
                                                  "pvalue"]).set_index("test")

    def arms(self) -> pd.DataFrame:
        """Per (center, arm), ``center`` "federated" for the federated table: ``n`` and the
        ``mean_rank`` (records in one bin share its mid-rank)."""
        parts = [("federated", self.raw.arms), *((c.center, c) for c in self.raw.centers)]
        rows = [{"center": center, "arm": arm, "n": n, "mean_rank": r}
                for center, part in parts
                for arm, n, r in zip(self.raw.groups, part.sizes, part.mean_ranks, strict=True)]
        return _pandas().DataFrame(rows, columns=["center", "arm", "n", "mean_rank"]
                                   ).set_index(["center", "arm"])

    def __repr__(self) -> str:
        tests = ", ".join(f"{n} p={t.pvalue:.3g}" for n, t in self.raw.tests.items())
        return f"Kruskal({len(self.raw.groups)} arms: {tests})"


class MWU:
    """A federated Mann-Whitney analysis's result (``raw``: the coordinator's model)."""

    def __init__(self, raw: MWUResult) -> None:
        self.raw = raw

    @property
    def alternative(self) -> str:
        return self.raw.alternative

    def to_frame(self) -> pd.DataFrame:
        """One row per test (index ``test``): ``statistic`` (a z-value; Fisher's a χ² with
        ``df`` degrees of freedom), ``law`` (the statistic's), ``pvalue`` and ``pvalue_from``,
        the law the p-value was computed from (``exact``: U's permutation law;
        ``exact+noise``: that law + the DP noise; ``normal``;
        ``normal+noise``: the exact law of N(0, V) + the DP noise; ``chi2``: Fisher's, over the
        centers' p-values; docs/methods.md §3.7)."""
        rows = [{"test": name, "statistic": t.statistic,
                 "law": f"chi2({t.df})" if name == "fisher" and t.df else "z",
                 "df": t.df, "pvalue": t.pvalue, "pvalue_from": t.null}
                for name, t in self.raw.tests.items()]
        return _pandas().DataFrame(rows, columns=["test", "statistic", "law", "df", "pvalue",
                                                  "pvalue_from"]).set_index("test")

    def parts(self) -> pd.DataFrame:
        """Each center's part of each test (index ``test``, ``center``)."""
        rows = [{"test": name, **p.model_dump()} for name, t in self.raw.tests.items()
                for p in t.parts]
        return _pandas().DataFrame(rows).set_index(["test", "center"])

    def effects(self) -> pd.DataFrame:
        """θ = P(Y > X) + ½P(Y = X) per center, then stratified, with its 95 % interval."""
        rows = [e.model_dump() for e in self.raw.effects]
        return _pandas().DataFrame(rows, columns=["center", "estimate", "low", "high", "level",
                                                  "n_x", "n_y", "method"]).set_index("center")

    @property
    def heterogeneity(self) -> Heterogeneity | None:
        """Cochran's Q, I² with its interval and τ² of the centers' θ (None: fewer than two
        centers released U, or a θ at 0 or 1 — ``raw.heterogeneity_note`` says why)."""
        return self.raw.heterogeneity

    def __repr__(self) -> str:
        tests = ", ".join(f"{n} p={t.pvalue:.3g}" for n, t in self.raw.tests.items())
        return f"MWU({self.alternative}: {tests})"


class Shift:
    """The Hodges-Lehmann shift of Y against X and its Moses interval, as far as the federated
    table's bins allow (docs/methods.md §12.3)."""

    def __init__(self, raw: ShiftResult) -> None:
        self.raw = raw

    @property
    def interval(self) -> tuple[float, float]:
        """The interval from the outer ends (contains the records' own interval)."""
        return self.raw.interval

    @property
    def estimate(self) -> float | None:
        """The bin midpoints' Hodges-Lehmann estimate (None: not estimable, or an old result)."""
        return self.raw.estimate

    @property
    def binned_interval(self) -> tuple[float, float] | None:
        """The printed interval: the midpoints' Moses interval widened by the binning allowance
        (docs/methods.md §12.3); None for a result made before it existed."""
        return self.raw.binned_interval

    def to_frame(self) -> pd.DataFrame:
        """One row per quantity (index ``of``: estimate, low end, high end, interval) with the
        ``low`` and ``high`` bounds the table allows, then (when the result has them) the
        printed ``binned interval`` and the midpoints' ``binned estimate`` (low = high)."""
        r = self.raw
        rows = [("estimate", r.estimate_low, r.estimate_high),
                ("low end", r.low_low, r.low_high), ("high end", r.high_low, r.high_high),
                ("interval", *r.interval)]
        if r.binned_interval is not None:
            point = math.nan if r.estimate is None else r.estimate
            rows += [("binned estimate", point, point), ("binned interval", *r.binned_interval)]
        return _pandas().DataFrame(rows, columns=["of", "low", "high"]).set_index("of")

    def __repr__(self) -> str:
        r = self.raw
        if r.binned_interval is None:
            return (f"Shift(estimate in [{r.estimate_low:.4g}, {r.estimate_high:.4g}], "
                    f"{100 * r.level:g} % interval [{r.interval[0]:.4g}, {r.interval[1]:.4g}])")
        point = "not estimable" if r.estimate is None else f"{r.estimate:.4g}"
        low, high = r.binned_interval
        return (f"Shift(estimate {point}, {100 * r.level:g} % interval [{low:.4g}, {high:.4g}]; "
                f"bins allow [{r.interval[0]:.4g}, {r.interval[1]:.4g}])")


class Table:
    """The federated K-anonymous bin table."""

    def __init__(self, raw: TableResult, groups: tuple[str, ...] | None) -> None:
        self.raw = raw
        self.groups = list(groups) if groups else ["all"]

    def to_frame(self) -> pd.DataFrame:
        """One row per bin ``(lower, upper]`` (the first also holds its lower limit), one count
        column per group. Counts may be fractional where a refining center split a bin."""
        limits = self.raw.limits
        rows = []
        for i in range(len(limits) - 1):
            row: dict[str, Any] = {"lower": limits[i], "upper": limits[i + 1]}
            for g, counts in zip(self.groups, self.raw.counts, strict=False):
                row[g] = counts[i]
            rows.append(row)
        return _pandas().DataFrame(rows, columns=["lower", "upper", *self.groups])

    def __repr__(self) -> str:
        return f"Table({len(self.raw.limits) - 1} bins, totals {self.raw.totals})"


class Quantiles:
    """Quantiles estimated from the federated table."""

    def __init__(self, raw: QuantilesResult) -> None:
        self.raw = raw

    def to_frame(self) -> pd.DataFrame:
        """Index (``estimator``, ``group``); one column per level (``q0.5``), and ``error``:
        why an estimator gave no quantiles (NaN values then)."""
        levels = [_level_name(lv) for lv in self.raw.levels]
        rows = []
        for estimator, by_group in self.raw.estimates.items():
            for group, est in by_group.items():
                values = est.quantiles or [math.nan] * len(levels)
                rows.append({"estimator": estimator, "group": group,
                             **dict(zip(levels, values, strict=True)), "error": est.error})
        return _pandas().DataFrame(rows, columns=["estimator", "group", *levels, "error"]
                                   ).set_index(["estimator", "group"])


class DPQuantiles:
    """Each center's ε-DP quantiles, every ``dp_quantiles`` analysis of the study together."""

    def __init__(self, raws: list[DPQuantilesResult]) -> None:
        self.raws = raws

    def to_frame(self) -> pd.DataFrame:
        """Index (``group``, ``center``); one column per level, ``n`` (the center's size rounded
        down to its K), ``rank_halfwidth`` (95 % rank error in records), ``epsilon`` spent."""
        rows, levels = [], []
        for raw in self.raws:
            names = [_level_name(lv) for lv in raw.levels]
            levels += [n for n in names if n not in levels]
            for center, values in raw.per_center.items():
                rows.append({"group": raw.group or "all", "center": center,
                             **dict(zip(names, values, strict=True)),
                             "n": raw.n.get(center), "rank_halfwidth":
                             raw.rank_halfwidth.get(center), "epsilon": raw.spent.get(center)})
        return _pandas().DataFrame(rows, columns=["group", "center", *levels, "n",
                                                  "rank_halfwidth", "epsilon"]
                                   ).set_index(["group", "center"])


class Boxplots:
    """ε-DP boxplots, every ``dp_boxplot`` analysis of the study together: each center's box
    and the pooled one (center ``"pooled"``) per group. Outliers are DP counts, not points."""

    def __init__(self, raws: list[DPBoxplotResult]) -> None:
        self.raws = raws

    def boxes(self) -> Iterator[tuple[str, str, Any]]:
        """(group, center, box) for every box, the pooled one after the centers'."""
        for raw in self.raws:
            group = raw.group or "all"
            for center, box in raw.per_center.items():
                yield group, center, box
            if raw.pooled is not None:
                yield group, "pooled", raw.pooled

    def to_frame(self) -> pd.DataFrame:
        """Index (``group``, ``center``); the seven numbers, ``n``, the outlier counts' 95 %
        half-width, ε, and where each whisker is (``lower_branch``, ``upper_branch``): the walk's
        extreme ψ (``"extreme"``, a DP high or low quantile), Tukey's fence (``"fence"``) or,
        the pooled box only, the tree's most extreme record inside the fence (``"record"``; the
        pooled box draws Tukey's whiskers and counts the records beyond the fences); then one
        column per further level of the pooled box (``q0.05``, ``q0.95``: read off its tree at
        no further ε; NaN for the centers' own boxes)."""
        rows, levels = [], []
        for g, c, b in self.boxes():
            extra = {_level_name(lv.level): lv.value for lv in getattr(b, "levels", [])}
            levels += [n for n in extra if n not in levels]
            rows.append({"group": g, "center": c, **{k: getattr(b, k) for k in BOX_COLUMNS},
                         **extra})
        return _pandas().DataFrame(rows, columns=["group", "center", *BOX_COLUMNS, *levels]
                                   ).set_index(["group", "center"])

    def plot(self, ax: Axes | None = None, *, title: str | None = None) -> Axes:
        """The boxes side by side (matplotlib's ``bxp``); each DP outlier count is written
        beyond its whisker. Returns the Axes (``ax.figure`` is its Figure)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(max(4.0, 1.2 * sum(1 for _ in self.boxes())), 4.0))
        stats = [{"label": f"{c}\n{g}", "med": b.median, "q1": b.q1, "q3": b.q3,
                  "whislo": b.lower_whisker, "whishi": b.upper_whisker, "fliers": []}
                 for g, c, b in self.boxes()]
        ax.bxp(stats, showfliers=False)
        for i, (_, _, b) in enumerate(self.boxes(), start=1):
            for y, count, va in ((b.lower_whisker, b.lower_outliers, "top"),
                                 (b.upper_whisker, b.upper_outliers, "bottom")):
                ax.annotate(f"{count}", (i, y), ha="center", va=va, fontsize=8,
                            xytext=(0, -3 if va == "top" else 3), textcoords="offset points")
        ax.set_title(title or "ε-DP boxplots (numbers: DP outlier counts)")
        return ax


DESCRIBE_COLUMNS = ("n", "missing", "mean", "sd", "median", "q1", "q3", "minimum", "maximum",
                    "epsilon", "method", "edges", "counts", "n_interval", "mean_interval",
                    "sd_interval", "q1_interval", "median_interval", "q3_interval",
                    "rank_halfwidth", "clip", "uncertainty", "notes")


class Describe:
    """Descriptive statistics ("Table 1"), every ``describe`` analysis of the study together."""

    def __init__(self, raws: list[DescribeResult]) -> None:
        self.raws = raws

    def to_frame(self) -> pd.DataFrame:
        """One tidy row per (``variable``, ``center``, ``arm``): ``center`` "pooled" for the
        centers together, ``arm`` "all" for every record; ``n``, ``missing`` (the released
        missing count; None where a center does not release it), ``mean``, ``sd`` (None
        where not estimable, ``notes`` say why), ``median``,
        ``q1``, ``q3``, ``minimum``/``maximum`` (no longer released: None, but in results
        stored before), the ε each center spent on the row, how it was computed (``mode``,
        ``method``), the histogram (``edges``, ``counts``), the variable's ``unit``, and each
        number's 95 % interval (``*_interval``; ``rank_halfwidth`` the DP quartiles' rank
        error in records, ``clip`` the range a center's DP sums were clipped to) with how it
        was made (``uncertainty``)."""
        rows = [{"variable": r.variable, "center": r.center, "arm": r.arm, "mode": raw.mode,
                 "unit": raw.units.get(r.variable),
                 **{k: getattr(r, k) for k in DESCRIBE_COLUMNS}}
                for raw in self.raws for r in raw.rows]
        return _pandas().DataFrame(rows, columns=["variable", "center", "arm", "mode", "unit",
                                                  *DESCRIBE_COLUMNS])


CATEGORY_COLUMNS = ("variable", "center", "arm", "category", "count", "percent", "low",
                    "high", "count_interval", "n", "missing", "source", "analysis")


class Categorical:
    """Categorical variables by arm: every ``categorical`` analysis's counts and the
    ``describe`` analyses' categorical rows together."""

    def __init__(self, raws: list[Any]) -> None:
        self.raws = raws

    def to_frame(self) -> pd.DataFrame:
        """One tidy row per (``variable``, ``center``, ``arm``, ``category``): the released
        cell's ``count``, its ``percent`` of the arm's records with a category and that
        share's 95 % interval (``low``, ``high``; DP: the score interval with the noise
        variance added), ``count_interval`` (DP), the arm's ``n`` and ``missing``; ``source``
        the analysis kind and ``analysis`` its mode."""
        rows = []
        for raw in self.raws:
            arms = raw.arms if raw.kind == "categorical" else raw.categorical
            for arm in arms:
                for cell in arm.cells:
                    rows.append({"variable": arm.variable, "center": arm.center, "arm": arm.arm,
                                 "category": cell.label, "count": cell.count,
                                 "percent": cell.percent, "low": cell.low, "high": cell.high,
                                 "count_interval": cell.count_interval, "n": arm.n,
                                 "missing": arm.missing, "source": raw.kind,
                                 "analysis": raw.mode})
        return _pandas().DataFrame(rows, columns=list(CATEGORY_COLUMNS))

    def tests(self) -> pd.DataFrame:
        """Every test of every categorical analysis: ``variable``, ``test``, ``statistic``,
        ``df``, ``pvalue``, ``odds_ratio`` with ``low``/``high``, ``method``."""
        rows = [{"variable": raw.variable, "test": t.name, "statistic": t.statistic,
                 "df": t.df, "pvalue": t.pvalue, "odds_ratio": t.odds_ratio, "low": t.low,
                 "high": t.high, "method": t.method}
                for raw in self.raws if raw.kind == "categorical" for t in raw.tests]
        return _pandas().DataFrame(rows, columns=["variable", "test", "statistic", "df",
                                                  "pvalue", "odds_ratio", "low", "high",
                                                  "method"])


class Survival:
    """A time-to-event analysis: each arm's curve per center and pooled, the medians and RMST,
    the RMST difference and the log-rank tests (docs/methods.md §13)."""

    def __init__(self, raw: SurvivalResult) -> None:
        self.raw = raw

    def to_frame(self) -> pd.DataFrame:
        """The curves, one tidy row per (``center``, ``arm``, ``time``): ``survival`` with its
        95 % band (``low``, ``high``; NaN once S is 0), the number ``at_risk`` at that time and
        the ``events`` and ``censored`` in the interval that starts there (NaN at the last
        time)."""
        rows = []
        for c in self.raw.curves:
            for j, t in enumerate(c.times):
                rows.append({"center": c.center, "arm": c.arm, "time": t,
                             "survival": c.survival[j], "low": c.low[j], "high": c.high[j],
                             "at_risk": c.at_risk[j],
                             "events": c.events[j] if j < len(c.events) else math.nan,
                             "censored": c.censored[j] if j < len(c.censored) else math.nan})
        return _pandas().DataFrame(rows, columns=["center", "arm", "time", "survival", "low",
                                                  "high", "at_risk", "events", "censored"])

    def summary(self) -> pd.DataFrame:
        """Per (``center``, ``arm``): the noisy size ``n``, the ``median`` with its interval
        (NaN: not reached within the grid) and the ``rmst`` with its interval."""
        rows = [{"center": c.center, "arm": c.arm, "n": c.noisy_total,
                 "median": math.nan if c.median is None else c.median,
                 "median_low": math.nan if c.median_low is None else c.median_low,
                 "median_high": math.nan if c.median_high is None else c.median_high,
                 "rmst": c.rmst, "rmst_low": c.rmst_low, "rmst_high": c.rmst_high}
                for c in self.raw.curves]
        return _pandas().DataFrame(rows).set_index(["center", "arm"])

    def tests(self) -> pd.DataFrame:
        """The log-rank tests (index ``test``: stratified, pooled) with Peto's hazard ratio in
        ``estimate``, ``low``, ``high``, and the RMST difference (``rmst_difference``: its
        estimate and interval there; ``of`` says which)."""
        rows = [{"test": t.name, "weights": t.weights, "statistic": t.statistic, "df": t.df,
                 "pvalue": t.pvalue, "estimate": t.hazard_ratio, "low": t.hazard_ratio_low,
                 "high": t.hazard_ratio_high, "of": "hazard ratio"} for t in self.raw.tests]
        d = self.raw.rmst_difference
        rows.append({"test": "rmst_difference", "weights": None, "statistic": None, "df": None,
                     "pvalue": d.pvalue, "estimate": d.estimate, "low": d.low, "high": d.high,
                     "of": f"RMST to {d.horizon:g}, second arm − first"})
        return _pandas().DataFrame(rows).set_index("test")

    def plot(self, ax: Axes | None = None, *, center: str = "pooled") -> Axes:
        """The Kaplan-Meier curves of ``center``'s arms (default the pooled ones), each with its
        95 % band."""
        import matplotlib.pyplot as plt

        axes = ax if ax is not None else plt.subplots()[1]
        for c in self.raw.curves:
            if c.center == center:
                low = [math.nan if v is None else v for v in c.low]
                high = [math.nan if v is None else v for v in c.high]
                line, = axes.plot(c.times, c.survival, label=c.arm)
                axes.fill_between(c.times, low, high, alpha=0.15, color=line.get_color())
        axes.set_ylim(0, 1.02)
        axes.set_xlabel("time")
        axes.set_ylabel("survival")
        axes.legend(frameon=False)
        return axes

    def __repr__(self) -> str:
        d = self.raw.rmst_difference
        return (f"Survival({self.raw.variable}: RMST difference {d.estimate:.4g} "
                f"[{d.low:.4g}, {d.high:.4g}])")


@dataclass(frozen=True)
class Results:
    """A study's result, read by analysis kind (see the module's docstring); ``raw`` is the
    coordinator's ``StudyResult``."""

    raw: StudyResult
    groups: tuple[str, ...] | None = None

    def _outcomes(self, kind: str) -> list[tuple[int, Any]]:
        found = [(i, a) for i, a in enumerate(self.raw.analyses) if a.kind == kind]
        if not found:
            raise NoSuchAnalysis(f"the study asked for no {kind} analysis")
        return found

    def _succeeded(self, kind: str) -> list[Any]:
        """Every result of ``kind``; the first failed one raises :class:`AnalysisFailed`."""
        out = []
        for index, outcome in self._outcomes(kind):
            if isinstance(outcome, FailedAnalysis):
                raise AnalysisFailed(index, kind, outcome.error.model_dump())
            out.append(outcome)
        return out

    @property
    def mwu(self) -> MWU:
        return MWU(self._succeeded("mwu")[0])

    @property
    def dp_mwu(self) -> MWU:
        """The DP twin's tests and effects, read as an ``mwu`` result's (its ``raw`` also holds
        what each center released: ``releases``)."""
        return MWU(self._succeeded("dp_mwu")[0])

    @property
    def table(self) -> Table:
        return Table(self._succeeded("table")[0], self.groups)

    @property
    def shift(self) -> Shift:
        return Shift(self._succeeded("shift")[0])

    @property
    def quantiles(self) -> Quantiles:
        return Quantiles(self._succeeded("quantiles")[0])

    @property
    def dp_quantiles(self) -> DPQuantiles:
        return DPQuantiles(self._succeeded("dp_quantiles"))

    @property
    def boxplots(self) -> Boxplots:
        return Boxplots(self._succeeded("dp_boxplot"))

    @property
    def describe(self) -> Describe:
        return Describe(self._succeeded("describe"))

    @property
    def categorical(self) -> Categorical:
        """The categorical analyses, and the describes' categorical rows (either may be
        absent, not both)."""
        found = [a for a in self.raw.analyses if a.kind in ("categorical", "describe")]
        if not any(a.kind == "categorical" or getattr(a, "categorical", None) for a in found):
            raise NoSuchAnalysis("the study asked for no categorical variable")
        for index, outcome in enumerate(self.raw.analyses):
            if outcome.kind == "categorical" and isinstance(outcome, FailedAnalysis):
                raise AnalysisFailed(index, "categorical", outcome.error.model_dump())
        return Categorical([a for a in found if not isinstance(a, FailedAnalysis)
                            and (a.kind == "categorical" or a.categorical)])

    @property
    def kruskal(self) -> Kruskal:
        return Kruskal(self._succeeded("kruskal")[0])

    @property
    def survival(self) -> Survival:
        return Survival(self._succeeded("survival")[0])

    @property
    def failed(self) -> list[AnalysisFailed]:
        """Every analysis that gave no result, as the error reading it would raise."""
        return [AnalysisFailed(i, a.kind, a.error.model_dump())
                for i, a in enumerate(self.raw.analyses) if isinstance(a, FailedAnalysis)]

    @property
    def centers(self) -> pd.DataFrame:
        """Each center asked (index ``center``): ``status`` included or excluded, the analyses
        (their index in the spec) it is ``used_in`` and ``left_out_of``, and ``reason``/``kind``
        when it was left out."""
        rows = []
        by_center = {c.center: c for c in self.raw.center_status}
        surveyed_out = {e.center: e for e in self.raw.excluded}
        for center in self.raw.centers:
            status = by_center.get(center)
            reason = status.reason if status is not None else surveyed_out.get(center)
            rows.append({
                "center": center,
                "status": status.status if status is not None else (
                    "excluded" if center in surveyed_out else "included"),
                "used_in": list(status.used_in) if status is not None else [],
                "left_out_of": list(status.left_out_of) if status is not None else [],
                "kind": reason.kind if reason is not None else None,
                "reason": reason.detail if reason is not None else None,
            })
        return _pandas().DataFrame(rows, columns=["center", "status", "used_in", "left_out_of",
                                                  "kind", "reason"]).set_index("center")

    @property
    def guarantees(self) -> pd.DataFrame:
        """Each included center's lifetime privacy guarantee after the study (index
        ``center``): its ``release_mode``, the composed ``epsilon`` and ``delta``, the pure-ε
        sum ``epsilon_pure``, the noisy ``releases`` to date, the accountant's ``method`` and
        the one-sentence ``line`` the report shows (coordinator.guarantees)."""
        cols = ["center", "release_mode", "epsilon", "delta", "epsilon_pure", "releases",
                "method", "line"]
        rows = [{c: getattr(g, c) for c in cols} for g in self.raw.guarantees or []]
        return _pandas().DataFrame(rows, columns=cols).set_index("center")


@dataclass(frozen=True)
class StudyRecord:
    """A study as the coordinator holds it: ``view`` is its answer
    (``coordinator.models.StudyView``); ``result`` reads its analyses (None until it has one)."""

    view: StudyView

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def status(self) -> str:
        return self.view.status

    @property
    def spec(self) -> Any:
        return self.view.spec

    @property
    def error(self) -> dict[str, Any] | None:
        return self.view.error.model_dump() if self.view.error is not None else None

    @property
    def result(self) -> Results | None:
        if self.view.result is None:
            return None
        return Results(self.view.result, self.view.spec.groups)

    def to_json(self) -> str:
        """The study as the coordinator answered it (what ``fedstats study run`` writes as
        ``study.json``)."""
        return self.view.model_dump_json(indent=2)

    def __repr__(self) -> str:
        return (f"StudyRecord({self.id}: {self.status}, {self.view.spec.dataset}."
                f"{self.view.spec.variable}, {self.view.releases_received} releases)")


class _Wrapped:
    """A coordinator answer (``raw``) whose fields read as its own, with a frame."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.raw!r})"


class CatalogView(_Wrapped):
    """``GET /v1/catalog`` (``coordinator.models.Catalog``): ``datasets``, ``centers``."""

    raw: Catalog

    def to_frame(self) -> pd.DataFrame:
        """One row per (dataset, center): K, variables, levels, sizes rounded down to K,
        remaining ε, whether the center paused the dataset."""
        rows = [{"dataset": d.name, **e.model_dump()} for d in self.raw.datasets
                for e in d.centers]
        return _pandas().DataFrame(rows).set_index(["dataset", "center"])

    def problems(self) -> pd.DataFrame:
        """Each registered center and why it could not be asked (None when it could)."""
        rows = [{"center": c.id, "k": c.k,
                 "problem": f"{c.problem.kind}: {c.problem.detail}" if c.problem else None}
                for c in self.raw.centers]
        return _pandas().DataFrame(rows).set_index("center")


class PlanView(_Wrapped):
    """A dry run (``coordinator.models.StudyPlan``): ``centers``, ``refusals``, ``would_run``."""

    raw: StudyPlan

    def to_frame(self) -> pd.DataFrame:
        """One row per (center, analysis): the ε it would spend (``exact`` false: at most),
        then the center's totals, remaining budget and quota after the study."""
        rows = [{"center": c.center, "analysis": s.analysis, "kind": s.kind,
                 "epsilon": s.epsilon, "exact": s.exact, "center_epsilon": c.epsilon,
                 "remaining_after": c.remaining_after, "quota_left_after": c.quota_left_after}
                for c in self.raw.centers for s in c.spends]
        return _pandas().DataFrame(rows, columns=[
            "center", "analysis", "kind", "epsilon", "exact", "center_epsilon",
            "remaining_after", "quota_left_after"]).set_index(["center", "analysis"])

    def power_frame(self) -> pd.DataFrame:
        """One row per (Mann-Whitney analysis, θ): the sum test's power at the analysis's ε and
        the centers' sizes (docs/methods.md §3.9), and the θ with 80 % power."""
        rows = [{"analysis": p.analysis, "theta": t, "power": w, "epsilon": p.epsilon,
                 "alpha": p.alpha, "theta_at_target": p.theta_at_target}
                for p in self.raw.power for t, w in zip(p.thetas, p.power, strict=True)]
        return _pandas().DataFrame(rows, columns=[
            "analysis", "theta", "power", "epsilon", "alpha", "theta_at_target"]
                                   ).set_index(["analysis", "theta"])

    def utility_frame(self) -> pd.DataFrame:
        """One row per DP analysis' part at a center (or ``pooled``): its 95 % error at the
        centers' sizes and the asked ε (in ``unit``: records or values), its ``share`` of n or
        of the bounds, and whether that leaves it ``uninformative`` (docs/methods.md §9.6)."""
        columns = ["analysis", "kind", "epsilon", "center", "variable", "arm", "part", "n",
                   "error", "unit", "share", "uninformative"]
        rows = [{"analysis": u.analysis, "kind": u.kind, "epsilon": u.epsilon,
                 **{k: getattr(e, k) for k in columns[3:]}}
                for u in self.raw.utility for e in u.errors]
        return _pandas().DataFrame(rows, columns=columns)

    def refusals_frame(self) -> pd.DataFrame:
        return _pandas().DataFrame([r.model_dump() for r in self.raw.refusals],
                                   columns=["reason", "center", "detail", "blocking"])
