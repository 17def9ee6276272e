"""The ``fedstats`` command line in process: arguments, exit codes and messages, the study file
check, synthetic data, and the report's rendering of DP results it does not know by name."""

from __future__ import annotations

import csv
import html
import stat
from pathlib import Path
from typing import Any

import pytest

from coordinator.reporting.report import boxes, render_html, summary
from fedstats_cli import synth
from fedstats_cli.cli import build_parser, main
from fedstats_cli.procs import free_port
from fedstats_cli.study import StudyFileError, load_spec
from tests.helpers.processes import REPO


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("center", "coordinator", "study", "demo", "simulate", "synth-data", "health"):
        assert command in out


@pytest.mark.parametrize("argv", [[], ["center"], ["study", "run"], ["simulate"], ["nope"],
                                  ["study", "run", "x.toml"]])
def test_incomplete_commands_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2


def test_serve_passes_the_config_file_on() -> None:
    args = build_parser().parse_args(["center", "serve", "--config", "c.toml"])
    assert (args.command, args.action, args.config) == ("center", "serve", "c.toml")
    args = build_parser().parse_args(["coordinator", "serve"])
    assert args.config is None  # then FEDSTATS_COORDINATOR_CONFIG


@pytest.mark.parametrize("role", ["center", "coordinator"])
def test_serve_with_a_missing_config_exits_2_naming_it(
    role: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.toml"
    assert main([role, "serve", "--config", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err


def keygen(out: Path, *extra: str) -> int:
    return main(["center", "keygen", "--out", str(out), *extra])


def test_center_keygen_writes_a_key_pair_keeps_it_and_shares_the_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``fedstats center keygen`` as compose's keys services run it: a private key only its
    owner reads, its public key beside it and in the peers' directory, named after the center;
    run again (every ``docker compose up`` does) it keeps the key; ``--force`` replaces it."""
    out, peers = tmp_path / "ledger" / "signing.key", tmp_path / "peers"
    share = ("--public-dir", str(peers), "--id", "hospital_a")
    assert keygen(out, *share) == 0
    private, public = out.read_text(), out.with_name("signing.key.pub").read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert (peers / "hospital_a.pub").read_text() == public
    printed = capsys.readouterr().out
    assert public.strip() in printed and private.strip() not in printed
    assert keygen(out, *share) == 0
    assert out.read_text() == private and (peers / "hospital_a.pub").read_text() == public
    assert "kept the existing key" in capsys.readouterr().out
    assert keygen(out, *share, "--force") == 0
    assert out.read_text() != private
    assert (peers / "hospital_a.pub").read_text() == out.with_name("signing.key.pub").read_text()


def test_center_keygen_public_dir_needs_the_center_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A usage error: exit 2 naming the missing option, and no key written anywhere."""
    out, peers = tmp_path / "signing.key", tmp_path / "peers"
    assert keygen(out, "--public-dir", str(peers)) == 2
    assert "--id" in capsys.readouterr().err
    assert not out.exists() and not peers.exists()


def center_toml(tmp_path: Path, key: Path) -> Path:
    """A one-dataset center configuration with its signing key file."""
    data = tmp_path / "cohort.csv"
    synth.write_hospital("hospital_a", data)
    config = tmp_path / "center.toml"
    config.write_text(
        'center_id = "hospital_a"\ntokens = ["' + "t" * 32 + '"]\n'
        f'ledger_url = "sqlite:///{tmp_path / "ledger.sqlite"}"\n'
        f'signing_key_file = "{key}"\n\n'
        f'[datasets.cohort]\nsource = {{ kind = "csv", path = "{data}" }}\n'
        f'variables = ["{synth.VARIABLE}"]\n'
        f'group = {{ column = "{synth.GROUP_COLUMN}", levels = {list(synth.LEVELS)!r} }}\n'
        "epsilon_total = 1.0\n".replace("'", '"'))
    return config


def test_center_operator_commands_read_the_center_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``public-key`` prints the key of ``signing_key_file`` (what keygen shared), ``epoch``
    reports each dataset, ``audit`` prints the (empty) log; all exit 0."""
    key = tmp_path / "signing.key"
    assert keygen(key) == 0
    capsys.readouterr()
    config = center_toml(tmp_path, key)
    assert main(["center", "public-key", "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip() == key.with_name("signing.key.pub").read_text().strip()
    assert main(["center", "epoch", "--config", str(config)]) == 0
    assert capsys.readouterr().out.startswith("cohort: no epoch yet")
    assert main(["center", "audit", "--config", str(config)]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("action", ["public-key", "epoch", "audit"])
def test_center_operator_commands_with_a_missing_config_exit_2_naming_it(
    action: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.toml"
    assert main(["center", action, "--config", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_study_run_needs_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["study", "run", str(REPO / "examples" / "study.toml"),
                 "--coordinator", "http://127.0.0.1:9"])
    assert code == 2
    assert "FEDSTATS_ANALYST_TOKEN" in capsys.readouterr().err


def test_a_bad_study_file_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('dataset = "cohort"\nvariable = "los_days"\n\n'
                   '[[analyses]]\nkind = "mwu"\ntests = ["sum", "median"]\n')
    code = main(["study", "run", str(bad), "--coordinator", "http://127.0.0.1:9",
                 "--token", "x" * 32])
    assert code == 2
    assert "analyses.0.mwu.tests.1" in capsys.readouterr().err
    bad.write_text("dataset = ")
    with pytest.raises(StudyFileError, match=r"bad\.toml"):
        load_spec(bad)


def test_the_example_study_file_is_a_valid_spec() -> None:
    spec = load_spec(REPO / "examples" / "study.toml")
    assert [a["kind"] for a in spec["analyses"]] == [
        "table", "mwu", "quantiles", "dp_quantiles", "dp_boxplot", "shift"]


def test_study_run_against_nothing_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["study", "run", str(REPO / "examples" / "study.toml"),
                 "--coordinator", f"http://127.0.0.1:{free_port()}", "--token", "x" * 32])
    assert code == 1
    assert "Traceback" not in capsys.readouterr().err


def test_health_of_a_closed_port_is_1() -> None:
    assert main(["health", f"http://127.0.0.1:{free_port()}", "--timeout", "1"]) == 1


def test_synth_data_writes_one_hospital_and_keeps_an_existing_file(tmp_path: Path) -> None:
    out = tmp_path / "cohort.csv"
    assert main(["synth-data", "--hospital", "hospital_b", "--out", str(out)]) == 0
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    h = synth.hospital("hospital_b")
    assert len(rows) == h.n_control + h.n_treated
    assert {r["arm"] for r in rows} == set(synth.LEVELS)
    assert all(0 < float(r["los_days"]) for r in rows)
    x, y = synth.read_groups(out)
    assert (len(x), len(y)) == (h.n_control, h.n_treated)
    out.write_text("kept")
    assert main(["synth-data", "--hospital", "hospital_b", "--out", str(out)]) == 0
    assert out.read_text() == "kept"
    assert main(["synth-data", "--hospital", "hospital_z", "--out", str(out), "--force"]) == 2


def test_synthetic_hospitals_have_a_categorical_smoking_column_drawn_last() -> None:
    """smoking takes the declared categories at about their shares (seeded: deterministic;
    the 0.1 tolerance is over 4 binomial SDs at the smallest hospital), and drawing it last
    leaves the other columns as the same seed gave them before it (the same generator state)."""
    import numpy as np

    for h in synth.HOSPITALS:
        rng = np.random.default_rng(synth.hospital_seed(synth.DEFAULT_SEED, h.center_id))
        columns = synth.generate(h, rng)
        smoking = columns[synth.SMOKING]
        assert set(smoking.tolist()) <= set(synth.SMOKING_LEVELS)
        for level, share in zip(synth.SMOKING_LEVELS, synth.SMOKING_SHARES, strict=True):
            assert abs(float(np.mean(smoking == level)) - share) < 0.1, (h.center_id, level)
        # Replaying the draws before smoking gives the same arm, outcome and age.
        replay = np.random.default_rng(synth.hospital_seed(synth.DEFAULT_SEED, h.center_id))
        n = h.n_control + h.n_treated
        arm = np.repeat(np.array(synth.LEVELS), [h.n_control, h.n_treated])
        median = np.where(arm == synth.LEVELS[1], h.median_days * synth.TREATMENT_EFFECT,
                          h.median_days)
        los = np.clip(np.round(median * np.exp(replay.normal(0.0, h.sigma, n)), 1), 0.1, None)
        replay.normal(64.0, 14.0, n)  # age
        order = replay.permutation(n)
        np.testing.assert_array_equal(columns[synth.VARIABLE], los[order])
        np.testing.assert_array_equal(columns[synth.GROUP_COLUMN], arm[order])


def test_synthetic_hospitals_have_a_time_to_readmission_drawn_last() -> None:
    """Whole days in 1..the hospital's follow-up (administrative censoring there, earlier at
    some hospitals), fewer readmissions under treatment, and the columns drawn before it as
    the same seed gave them (the smoking test replays those)."""
    import numpy as np

    ends = {h.follow_up_days for h in synth.HOSPITALS}
    assert max(ends) == synth.FOLLOW_UP_DAYS and len(ends) == len(synth.HOSPITALS)
    for h in synth.HOSPITALS:
        rng = np.random.default_rng(synth.hospital_seed(synth.DEFAULT_SEED, h.center_id))
        columns = synth.generate(h, rng)
        time, event = columns[synth.READMISSION_TIME], columns[synth.READMISSION_EVENT]
        assert time.dtype.kind == "i" and time.min() >= 1 and time.max() == h.follow_up_days
        assert set(event.tolist()) == {0, 1}
        assert np.all(event[time == h.follow_up_days] >= 0)
        arm = columns[synth.GROUP_COLUMN]
        control, treated = (float(event[arm == level].mean()) for level in synth.LEVELS)
        assert treated < control, h.center_id
        # Censored at the end of follow-up: the most common time of the censored.
        censored = time[event == 0]
        assert np.mean(censored == h.follow_up_days) > 0.5


def test_synthetic_hospitals_are_skewed_different_and_reproducible(tmp_path: Path) -> None:
    a = synth.write_hospital("hospital_a", tmp_path / "a.csv")
    again = synth.write_hospital("hospital_a", tmp_path / "again.csv")
    assert a.read_text() == again.read_text()
    x, y = synth.read_groups(a)
    assert x.mean() > float(sorted(x)[len(x) // 2])  # right-skewed: mean above median
    assert float(sorted(y)[len(y) // 2]) < float(sorted(x)[len(x) // 2])  # treated stay shorter
    assert len({h.n_control + h.n_treated for h in synth.HOSPITALS}) == 3


def test_the_demo_refuses_a_folder_it_did_not_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    with pytest.raises(SystemExit, match="not a demo folder"):
        main(["demo", "--workdir", str(tmp_path)])
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_simulate_mwu_prints_rejection_rates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "mwu", "--replications", "3", "--delta", "0.3"]) == 0
    out = capsys.readouterr().out
    for method in ("pooled", "sum", "weighted", "fisher", "table"):
        assert method in out


def test_simulate_passes_options_to_the_benchmark_script(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "quantiles", "--help"]) == 0
    assert "--replications" in capfd.readouterr().out


def test_simulate_boxplot_takes_its_own_options_and_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "boxplot", "--help"]) == 0
    assert "--reps" in capsys.readouterr().out
    assert main(["simulate", "boxplot", "--reps", "many"]) == 2
    assert "--reps" in capsys.readouterr().err


def study_view(study_id: str, created_at: str, analyses: list[Any]) -> dict[str, Any]:
    """A succeeded study's view as the coordinator answers it, with ``analyses``' results."""
    return {
        "id": study_id, "status": "succeeded", "created_at": created_at,
        "spec": {"dataset": "cohort", "variable": "los_days", "groups": ["control", "treated"],
                 "k": 10, "analyses": []},
        "error": None, "provenance": [],
        "result": {"centers": ["a", "b"], "excluded": [], "analyses": analyses},
    }


VIEW = study_view("s1", "2026-11-29T00:00:00Z", [
    {"kind": "future_dp_quantiles", "centers": [
        {"center": "a", "levels": [0.25, 0.5], "values": [2.0, 4.0]}]},
    {"kind": "quantiles", "levels": [0.5], "table_totals": [30.0, 30.0], "estimates": {
        "interpolation": {"control": {"quantiles": [4.5], "error": None}},
        "yj_table": {"control": {"quantiles": None, "error": "did not converge"}}}},
    {"kind": "dp_quantiles", "group": "treated", "algorithm": "joint_exp",
     "levels": [0.5], "per_center": {"a": [3.25]}, "spent": {"a": 1.0}, "excluded": []},
    {"kind": "dp_boxplot", "per_center": {"a": {
        "lower_whisker": 0.5, "q1": 2.0, "median": 4.0, "q3": 6.0, "upper_whisker": 12.0}},
     "pooled": {"lower_whisker": 0.4, "q1": 2.1, "median": 4.2, "q3": 6.3,
                "upper_whisker": 13.0}},
])


def test_the_report_shows_results_it_knows_and_those_it_does_not_know_by_name() -> None:
    found = [label for analysis in VIEW["result"]["analyses"]
             for label, _ in boxes(analysis)]
    assert found == ["per_center a", "pooled"]
    html = render_html(VIEW, ["a note & more"])
    assert "Differentially private boxplots" in html and html.count("<svg") == 1
    assert "a note &amp; more" in html and "q0.25" in html
    assert "DP boxplots of all records" in html and "pooled · all" in html
    assert "not estimated: did not converge" in html
    text = summary(VIEW)
    assert "q0.5=4" in text and "pooled · all" in text
    assert "interpolation · control" in text and "4.5" in text
    assert "DP quantiles of treated, per center" in html and "a · treated" in text
    assert "3.25" in html and "3.25" in text


MWU_VIEW = study_view("s2", "2026-11-30T00:00:00Z", [
    {"kind": "table", "limits": ["-Infinity", 1.5, 3.25, "Infinity"],
     "counts": [[10.0, 12.5, 7.5], [0.0, 20.0, 10.0]], "totals": [30.0, 30.0],
     "center_totals": {"a": [20, 10], "b": [10, 20]}, "order": ["a", "b"]},
    {"kind": "mwu", "alternative": "two-sided", "table": None, "excluded": [],
     "tests": {
         "sum": {"method": "sum", "statistic": 1.5, "pvalue": 0.13, "df": None,
                 "parts": [{"center": "a", "statistic": 40.0, "variance": 900.0,
                            "zstatistic": 1.3, "pvalue": 0.19, "weight": 1.0}]},
         "fisher": {"method": "fisher", "statistic": 7.25, "pvalue": 0.12, "df": 4,
                    "parts": []}},
     "effects": [
         {"center": "a", "estimate": 0.61, "low": 0.45, "high": 0.75, "level": 0.95,
          "n_x": 20, "n_y": 10, "method": "newcombe_score"},
         {"center": "stratified", "estimate": 0.58, "low": 0.47, "high": 0.69,
          "level": 0.95, "n_x": 30, "n_y": 30, "method": "newcombe_score_stratified"}]},
    {"kind": "dp_quantiles", "group": "treated", "algorithm": "joint_exp",
     "levels": [0.5], "per_center": {"a": [3.25]}, "spent": {"a": 1.0},
     "rank_halfwidth": {"a": 7.2}, "n": {"a": 10}, "excluded": []},
    {"kind": "dp_boxplot", "group": None, "spent": {"a": 1.0}, "excluded": [],
     "per_center": {"a": {
         "lower_whisker": 0.5, "q1": 2.0, "median": 4.0, "q3": 6.0, "upper_whisker": 6.0,
         "lower_outliers": 0, "upper_outliers": 48, "n": 30, "lower_branch": "extreme",
         "upper_branch": "extreme", "epsilon": 1.0, "method": "dp_boxplot",
         "outlier_halfwidth": 47.93}},
     "pooled": None},
])


def test_the_report_gives_effects_laws_uncertainty_and_bins_as_defined() -> None:
    text = summary(MWU_VIEW)
    page = html.unescape(render_html(MWU_VIEW))
    for shown in (text, page):
        assert "χ²(4)" in shown  # Fisher's statistic with its degrees of freedom
        assert "stratified" in shown and "[0.47, 0.69]" in shown and "0.58" in shown
        # The DP outlier count 48 with its 95 % interval, clipped at 0, the half-width rounded up.
        assert "48 [0, 96]" in shown and "0 [0, 48]" in shown
        assert "± 8" in shown  # the DP quantile's rank error, rounded up
        assert "whisker on the box's edge" in shown and "fractional" in shown
    assert "(−∞, 1.5]" in page and "(1.5, 3.25]" in page and "(3.25, ∞)" in page
    assert "n per center: a control 20, treated 10; b control 10, treated 20" in text


def test_the_readme_study_file_is_a_valid_spec(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    blocks = [b.split("```", 1)[0] for b in readme.split("```toml\n")[1:]]
    (study,) = [b for b in blocks if "[[analyses]]" in b]
    path = tmp_path / "study.toml"
    path.write_text(study)
    assert [a["kind"] for a in load_spec(path)["analyses"]] == [
        "table", "mwu", "quantiles", "dp_boxplot"]


@pytest.mark.parametrize("dp", [False, True])
def test_the_demo_centers_declare_the_time_to_readmission(tmp_path: Path, dp: bool) -> None:
    """Each demo hospital's dataset declares readmission with its own follow-up, and its
    synthetic file reads with it (every record holds a time and an event)."""
    from center_agent.core.config import DatasetConfig
    from center_agent.data import Dataset
    from fedstats_cli.demo import center_dataset

    for h in synth.HOSPITALS:
        csv = synth.write_hospital(h.center_id, tmp_path / f"{h.center_id}.csv")
        config = DatasetConfig.model_validate(center_dataset(h, csv, dp))
        assert config.time_to_event[synth.READMISSION].follow_up == (0, h.follow_up_days)
        dataset = Dataset(synth.DATASET, config, 10)
        try:
            dataset.check_columns()
            population = dataset.population()
            rows = population.joint_selection(synth.READMISSION, None)
            assert rows.shape == (h.n_control + h.n_treated, 2)
            assert population.n == h.n_control + h.n_treated
        finally:
            dataset.source.close()
