"""examples/study.toml's budget comment is true to the budgets of ``fedstats demo``'s centers
and the Docker Compose demo's (deploy/demo/center.toml), and to what the file spends."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

from center_agent.core.config import DatasetConfig
from coordinator.models import StudySpec
from coordinator.quotas import analysis_spends
from fedstats_cli import demo

ROOT = Path(__file__).resolve().parents[2]


def spent(spec: StudySpec) -> float:
    return sum(s.epsilon for s in analysis_spends(spec))


def test_the_examples_budget_comment_is_true() -> None:
    text = (ROOT / "examples" / "study.toml").read_text()
    comment = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    run = spent(StudySpec.model_validate(tomllib.loads(text)))
    assert f"spend ε = {run:g} of its dataset's budget" in comment
    # fedstats demo: its centers' total, the default per-request cap, no period cap
    demo_spec, _notes = demo.demo_spec()
    own = spent(StudySpec.model_validate(demo_spec))
    runs = math.floor((demo.EPSILON_TOTAL - own) / run + 1e-9)
    assert (f"`fedstats demo`'s centers hold ε = {demo.EPSILON_TOTAL:g} in all, at most "
            f"{demo.EPSILON_TOTAL / 4:g} per request and no cap per period") in comment
    assert f"its own study spends {own:g} of it at each center, so this file runs {runs} " \
        "times" in comment
    # the Compose demo's center file
    compose = tomllib.loads((ROOT / "deploy" / "demo" / "center.toml").read_text())
    declared = compose["datasets"]["cohort"]
    # the period's length as the center reads it (its default where the file gives none)
    period_days = declared.get("period_days",
                               DatasetConfig.model_fields["period_days"].default)
    found = re.search(r"hold (\S+) in all and at most (\S+) per (\S+) days: (\d+) runs a month",
                      comment)
    assert found, comment
    assert float(found.group(1)) == declared["epsilon_total"]
    assert float(found.group(2)) == declared["epsilon_per_period"]
    assert float(found.group(3)) == period_days
    assert int(found.group(4)) == math.floor(declared["epsilon_per_period"] / run + 1e-9)


def test_the_dp_example_is_the_dp_demos_study_and_its_budget_comment_is_true() -> None:
    """examples/dp_study.toml is what ``fedstats demo --dp`` runs, every analysis in it is
    answered by DP-mode centers (none exact), and its comment states what a run spends."""
    from coordinator.analyses import analysis_of

    text = (ROOT / "examples" / "dp_study.toml").read_text()
    comment = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    spec = StudySpec.model_validate(tomllib.loads(text))
    assert spec == StudySpec.model_validate(demo.dp_demo_spec())
    assert not any(analysis_of(a).exact(spec, a) for a in spec.analyses)
    # The same question is paid once: describe's smoking counts and the categorical analysis'.
    run = spent(spec)
    assert f"every center spend ε = {run:g} (" in comment
    assert run <= demo.EPSILON_TOTAL
