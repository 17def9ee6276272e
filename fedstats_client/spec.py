"""Study specs built in Python: the same spec a study file holds (``coordinator.models.StudySpec``,
docs/coordinator.md, "A study"), chained one analysis at a time::

    spec = (Study("cohort", "los_days", groups=["control", "treated"])
            .table(lower=0.0)
            .mwu()
            .dp_boxplot(group="treated", epsilon=0.5, bounds=(0, 60)))
    arms = Study("cohort", "los_days", groups=["low", "mid", "high"]).kruskal(ordered=True)
    same = Study("cohort", "los_days", groups=["low", "mid", "high"]).add("kruskal", ordered=True)

Each call returns a new :class:`Study` (a notebook cell run twice does not ask twice). The spec
is validated by the coordinator's own model when it is built (:meth:`Study.spec`) or sent, so a
typo fails here, naming the key, before anything reaches the coordinator; :meth:`Study.add`
checks its analysis against its kind's model at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from coordinator.models import Analysis, StudySpec


class SpecError(ValueError):
    """A spec that does not validate; the message names each key to fix."""


def _described(exc: ValidationError, *root: str) -> str:
    # Never the offending input: a spec holds no secret, but keep the messages short and alike.
    return "; ".join(
        f"{'.'.join([*root, *(str(p) for p in err.get('loc', ()))]) or '(top level)'}: "
        f"{err.get('msg')}"
        for err in exc.errors(include_url=False, include_input=False))


def _spec_models() -> dict[str, type[BaseModel]]:
    """Each analysis kind the coordinator's models know (``Analysis``) with its spec model."""
    models: tuple[type[BaseModel], ...] = get_args(get_args(Analysis)[0])
    return {get_args(model.model_fields["kind"].annotation)[0]: model for model in models}


_SPEC_MODELS = _spec_models()


def _given(**options: Any) -> dict[str, Any]:
    """The options the caller gave (None means "the coordinator's default")."""
    return {name: value for name, value in options.items() if value is not None}


class Study:
    """A study spec under construction (see the module's docstring)."""

    def __init__(
        self,
        dataset: str,
        variable: str,
        *,
        groups: Sequence[str] | None = None,
        k: int | None = None,
        centers: Sequence[str] | None = None,
        allow_partial: bool | None = None,
        title: str | None = None,
        description: str | None = None,
        primary: Mapping[str, Any] | None = None,
        analyses: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """``title``, ``description``: shown in lists and reports; ``primary``: the
        pre-registered primary test, ``{"analysis": i, "test": "sum", "alpha": 0.05}``."""
        self._base = _given(title=title, description=description,
                            primary=dict(primary) if primary is not None else None,
                            dataset=dataset, variable=variable,
                            groups=list(groups) if groups is not None else None, k=k,
                            centers=list(centers) if centers is not None else None,
                            allow_partial=allow_partial)
        self._analyses = [dict(a) for a in analyses]

    def _with(self, kind: str, **options: Any) -> Study:
        return Study(**self._base, analyses=[*self._analyses, {"kind": kind, **_given(**options)}])

    def table(self, *, lower: float | str | None = None, upper: float | str | None = None
              ) -> Study:
        """The federated K-anonymous table (``lower``/``upper``: a natural limit, ``"buffer"``
        or ``"infinite"``)."""
        return self._with("table", lower=lower, upper=upper)

    def mwu(self, *, tests: Sequence[str] | None = None, alternative: str | None = None,
            epsilon: float | None = None) -> Study:
        """Federated Mann-Whitney tests of the first group (X) against the second (Y)."""
        return self._with("mwu", tests=list(tests) if tests is not None else None,
                          alternative=alternative, epsilon=epsilon)

    def dp_mwu(self, *, epsilon: float, tests: Sequence[str] | None = None,
               alternative: str | None = None, size_share: float | None = None) -> Study:
        """The DP twin of the Mann-Whitney tests (sum, weighted, Fisher), answered by centers in
        DP mode: each center spends ``epsilon`` under add/remove, ``size_share`` of it (default
        0.2) on its two noisy sizes (docs/methods.md §3.10)."""
        return self._with("dp_mwu", epsilon=epsilon,
                          tests=list(tests) if tests is not None else None,
                          alternative=alternative, size_share=size_share)

    def shift(self, *, level: float | None = None) -> Study:
        """The Hodges-Lehmann shift of Y against X with its Moses interval at ``level``
        (default 0.95), as far as the federated table's bins allow; spends no ε."""
        return self._with("shift", level=level)

    def dp_boxplot(self, *, epsilon: float, bounds: Sequence[float], group: str | None = None,
                   per_center: bool | None = None, pooled: bool | None = None,
                   depth: int | None = None, branching: int | None = None,
                   levels: Sequence[float] | None = None) -> Study:
        """ε-DP boxplots of one group level (or every record), per center and/or pooled; each
        center spends ``epsilon`` per box. ``levels``: further levels the pooled box reads off
        its tree (default 0.05 and 0.95; no further ε)."""
        return self._with("dp_boxplot", epsilon=epsilon, bounds=list(bounds), group=group,
                          per_center=per_center, pooled=pooled, depth=depth,
                          branching=branching,
                          levels=list(levels) if levels is not None else None)

    def quantiles(self, levels: Sequence[float], *, estimators: Sequence[str] | None = None,
                  epsilon: float | None = None, bounds: Sequence[float] | None = None) -> Study:
        """Quantiles estimated from the federated table (``yj_data`` needs ε and bounds)."""
        return self._with("quantiles", levels=list(levels),
                          estimators=list(estimators) if estimators is not None else None,
                          epsilon=epsilon, bounds=list(bounds) if bounds is not None else None)

    def dp_quantiles(self, levels: Sequence[float], *, epsilon: float, bounds: Sequence[float],
                     algorithm: str | None = None, group: str | None = None) -> Study:
        """Each center's ε-DP quantiles of one group level (or every record)."""
        return self._with("dp_quantiles", levels=list(levels), epsilon=epsilon,
                          bounds=list(bounds), algorithm=algorithm, group=group)

    def describe(self, variables: Sequence[str] | None = None, *, mode: str | None = None,
                 epsilon: float | None = None,
                 bounds: Mapping[str, Sequence[float]] | None = None, bins: int | None = None,
                 per_center: bool | None = None, pooled: bool | None = None,
                 categorical: Sequence[str] | None = None) -> Study:
        """Descriptive statistics ("Table 1") of ``variables`` (default: the study's), per
        center, arm and pooled: from the K-anonymous tables (no ε), or ε-DP with ``epsilon``
        (spent per variable and arm at each center; ``bounds`` per variable, default the
        centers' declared bounds). ``categorical``: categorical variables shown as n (%) per
        category with their missing n (%)."""
        return self._with("describe", variables=list(variables) if variables is not None
                          else None, mode=mode, epsilon=epsilon,
                          bounds={v: list(b) for v, b in bounds.items()}
                          if bounds is not None else None,
                          bins=bins, per_center=per_center, pooled=pooled,
                          categorical=list(categorical) if categorical is not None else None)

    def categorical(self, variable: str, *, mode: str | None = None,
                    epsilon: float | None = None, per_center: bool | None = None) -> Study:
        """A categorical ``variable`` by arm: n (%) with Wilson intervals, Pearson's χ²
        (Fisher's exact test for a small 2×2 table) and the CMH test stratified by center,
        from the centers' K-anonymous counts (no ε) or, with ``epsilon`` (spent per arm at
        each center), their ε-DP counts."""
        return self._with("categorical", variable=variable, mode=mode, epsilon=epsilon,
                          per_center=per_center)

    def kruskal(self, *, ordered: bool | None = None, alternative: str | None = None
                ) -> Study:
        """Kruskal-Wallis across the study's groups (2 to 32 arms) from the K-anonymous tables,
        no ε; with ``ordered`` (the groups named in their hypothesised order) also
        Jonckheere-Terpstra (``alternative``: increasing, decreasing or two-sided)."""
        return self._with("kruskal", ordered=ordered, alternative=alternative)

    def survival(self, variable: str, *, epsilon: float, horizon: float,
                 intervals: int | None = None, weights: str | None = None,
                 censoring: str | None = None, per_center: bool | None = None) -> Study:
        """Time to the event of the time-to-event ``variable`` by arm: Kaplan-Meier curves with
        their bands and numbers at risk, median survival, RMST to ``horizon`` and its
        difference, the log-rank test stratified by center (``weights``: logrank, gehan,
        tarone-ware, peto) with Peto's hazard ratio, from each center's ε-DP life table per arm
        (``epsilon`` spent per arm at each center) on ``intervals`` equal intervals from 0 to
        ``horizon``."""
        return self._with("survival", variable=variable, epsilon=epsilon, horizon=horizon,
                          intervals=intervals, weights=weights, censoring=censoring,
                          per_center=per_center)

    def add(self, kind: str, /, **fields: Any) -> Study:
        """One analysis of any ``kind`` the coordinator's models know, with its keys as a study
        file names them (None ones left out; R's ``fs_add_analysis``), one this client has no
        method for included::

            Study("trial", "crp", groups=["placebo", "low", "high"]).add("kruskal", ordered=True)

        Checked at once against that kind's spec model: an unknown kind, a misspelt key or a bad
        value raises :class:`SpecError` naming it (what needs the whole study, such as
        ``groups``, when the spec is built)."""
        if not isinstance(kind, str) or not kind:
            raise SpecError("kind: give one analysis kind, e.g. \"mwu\"")
        if "kind" in fields:
            raise SpecError("kind: give it once, as the first argument")
        model = _SPEC_MODELS.get(kind)
        if model is None:
            raise SpecError(f"kind: no analysis kind {kind!r}; the known kinds: "
                            f"{', '.join(_SPEC_MODELS)}")
        given = _given(**fields)
        try:
            model.model_validate({"kind": kind, **given})
        except ValidationError as exc:
            keys = ", ".join(name for name in model.model_fields if name != "kind") or "none"
            hint = (f" ({kind}'s keys: {keys})"
                    if any(err["type"] == "extra_forbidden" for err in exc.errors()) else "")
            raise SpecError(f"invalid analysis: {_described(exc, kind)}{hint}") from None
        return self._with(kind, **given)

    def to_dict(self) -> dict[str, Any]:
        """The spec as a study file would hold it (not yet validated)."""
        return {**self._base, "analyses": [dict(a) for a in self._analyses]}

    def spec(self) -> StudySpec:
        """The validated spec; raises :class:`SpecError` naming each key to fix."""
        return as_spec(self.to_dict())

    def __repr__(self) -> str:
        kinds = ", ".join(str(a["kind"]) for a in self._analyses) or "no analysis yet"
        return f"Study({self._base.get('dataset')}.{self._base.get('variable')}: {kinds})"


def as_spec(spec: Study | StudySpec | Mapping[str, Any]) -> StudySpec:
    """A :class:`Study`, a ``StudySpec`` or a dict (a study file's content) as a validated spec."""
    if isinstance(spec, StudySpec):
        return spec
    if isinstance(spec, Study):
        spec = spec.to_dict()
    try:
        return StudySpec.model_validate(dict(spec))
    except ValidationError as exc:
        raise SpecError(f"invalid study spec: {_described(exc)}") from None


def spec_body(spec: Study | StudySpec | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body sent for ``spec``: what was set, validated (defaults are the
    coordinator's)."""
    body: dict[str, Any] = as_spec(spec).model_dump(mode="json", exclude_unset=True)
    return body
