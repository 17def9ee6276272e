"""``fedstats demo``: three synthetic hospitals, a coordinator and one study, in one command.

Everything runs as real processes on free loopback ports, exactly as deployed (each center reads
its own TOML file; the coordinator calls them over HTTP with the token each issued): synthetic
data for three hospitals of different sizes, fresh random tokens (``secrets``), three
``fedstats center serve`` and one ``fedstats coordinator serve``; then one study (the federated
table, the four MWU tests, and the DP analyses the coordinator's study spec accepts), a summary on
stdout and ``report.html``. Every process started is stopped on the way out, also on Ctrl-C and
SIGTERM.

``fedstats demo --dp`` runs the same three hospitals served in DP mode (``release_mode = "dp"``,
docs/privacy.md section 16: every release differentially private, every exact kind refused,
sizes shown only as the operator declares them) and the DP twin of the study
(:func:`dp_demo_spec`, also ``examples/dp_study.toml``): the DP Mann-Whitney tests, each center's
and the pooled DP boxplots, each center's DP quantiles, a DP Table 1 with smoking as a
categorical variable, and smoking by arm from DP counts. The result states each center's
lifetime guarantee (its accountant's composition of every ε the dataset paid).

The work folder keeps what a reader may want to look at (nothing in it is ever committed):
``data/`` (the CSVs), ``config/`` (TOML files with the tokens, mode 0600), ``logs/``,
``processes.json`` (the PIDs started), ``study.json`` (the coordinator's view of the study as its
analyst sees it: each center release's call, parameters and ε), ``releases.json`` (every release
as received, read from the coordinator's store: the demo's user is also its operator),
``summary.txt`` and ``report.html``. With ``--keep`` the services stay up after the study, and
the command prints the web console's address (``/ui``) and the file holding the token to sign
in with (``config/analyst.token``, mode 0600; the account "demo analyst" in the coordinator's
store), until Ctrl-C. A service that stops meanwhile (a center's crash, or one killed to rehearse
an outage) is named with the line that starts it again; the others keep serving.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from center_agent.gate.keys import write_key_pair
from coordinator.reporting.report import render_html, summary
from fedstats_cli import synth
from fedstats_cli.procs import Child, ProcessGroup, child_env, free_port, terminate_on_sigterm
from fedstats_cli.settings_files import toml_value as toml_value  # still importable from here
from fedstats_cli.settings_files import write_toml
from fedstats_cli.study import StudyFileError, analyst_client, check_spec, run_study, write_view

MARKER = ".fedstats-demo"
K = 10
EPSILON_TOTAL = 10.0
DP_EPSILON = 1.0
LEVELS = [0.1, 0.25, 0.5, 0.75, 0.9]


def prepare_workdir(workdir: Path) -> None:
    """Create the folder, or empty one a previous demo made; refuse any other non-empty one."""
    if workdir.exists() and any(workdir.iterdir()):
        if not (workdir / MARKER).exists():
            raise SystemExit(f"fedstats demo: {workdir} is not empty and not a demo folder; "
                             "pass --workdir with a new or empty folder")
        for sub in ("data", "config", "ledgers", "logs", "store"):
            shutil.rmtree(workdir / sub, ignore_errors=True)
        for name in ("processes.json", "study.json", "releases.json", "summary.txt",
                     "report.html"):
            (workdir / name).unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by fedstats demo; emptied by the next run\n")
    for sub in ("data", "config", "ledgers", "logs", "store"):
        (workdir / sub).mkdir()
    (workdir / "config").chmod(0o700)


SURVIVAL: dict[str, Any] = {
    "kind": "survival", "variable": synth.READMISSION, "epsilon": DP_EPSILON / 2,
    "horizon": min(h.follow_up_days for h in synth.HOSPITALS), "intervals": 12}
"""Time to readmission by arm, to the shortest follow-up of the hospitals (every center's grid
lies inside its own follow-up), from each center's ε-DP life table per arm (ε 0.5 each: the
study then spends 7 of a center's 10)."""


def dp_candidates() -> list[tuple[str, dict[str, Any]]]:
    """The DP analyses the demo asks for when the coordinator's study spec accepts them."""
    bounds = list(synth.BOUNDS)
    return [
        # YJ data is left out: its moment sums are ε-DP, and at the demo's budget their noise
        # swamps them (docs/benchmarks.md, "YJ data under differential privacy").
        ("federated quantiles", {"kind": "quantiles", "levels": LEVELS, "estimators": [
            "yj_table", "interpolation", "extrapolation", "yj_shaped"]}),
        *((f"each center's DP quantiles of {level}",
           {"kind": "dp_quantiles", "group": level, "levels": LEVELS, "epsilon": DP_EPSILON,
            "bounds": bounds})
          for level in synth.LEVELS),
        *((f"DP boxplots of {level} (per center and pooled)",
           {"kind": "dp_boxplot", "group": level, "epsilon": DP_EPSILON, "bounds": bounds,
            "per_center": True, "pooled": True})
          for level in synth.LEVELS),
        ("time to readmission (Kaplan-Meier, log-rank, RMST)", SURVIVAL),
    ]


def demo_spec() -> tuple[dict[str, Any], list[str]]:
    """The study the demo runs, and a note for each analysis left out (and why)."""
    base: dict[str, Any] = {
        "dataset": synth.DATASET, "variable": synth.VARIABLE, "groups": list(synth.LEVELS),
        "k": K,
        "analyses": [
            {"kind": "table", "lower": 0.0, "upper": "buffer"},
            {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"],
             "alternative": "two-sided"},
        ],
    }
    notes = []
    for label, analysis in dp_candidates():
        try:
            check_spec({**base, "analyses": [analysis]}, source=label)
        except StudyFileError as exc:
            kind = analysis["kind"]
            why = (f"its study spec has no `{kind}` analysis yet" if "does not match any of "
                   "the expected tags" in str(exc) else f"its study spec refuses it: {exc}")
            notes.append(f"{label} not run: this coordinator cannot do it ({why}).")
            continue
        base["analyses"].append(analysis)
    return base, notes


DP_STUDY_EPSILON = 0.5
"""ε per release of the DP demo's boxplots, quantiles, Table 1 rows and smoking counts."""
DP_MWU_EPSILON = 1.0
AGE_BOUNDS = (18.0, 99.0)
"""Public bounds of the age column (synth clips it there)."""


def dp_demo_spec() -> dict[str, Any]:
    """The DP twin of the demo's study (``fedstats demo --dp``; the same as
    ``examples/dp_study.toml``): nothing in it is exact, so centers in DP mode answer all of it.
    Per center it spends 8: 1 (dp_mwu) + 2 (two DP boxes per arm) + 1 (DP quantiles per arm)
    + 3 (Table 1: three variables per arm) + 1 (a DP life table per arm); the smoking analysis
    asks the Table 1's own DP counts (the same question: the same answer, paid once)."""
    bounds = list(synth.BOUNDS)
    e = DP_STUDY_EPSILON
    return {
        "dataset": synth.DATASET, "variable": synth.VARIABLE, "groups": list(synth.LEVELS),
        "k": K,
        "analyses": [
            {"kind": "dp_mwu", "tests": ["sum", "weighted", "fisher"],
             "alternative": "two-sided", "epsilon": DP_MWU_EPSILON},
            *({"kind": "dp_boxplot", "group": level, "epsilon": e, "bounds": bounds,
               "per_center": True, "pooled": True} for level in synth.LEVELS),
            *({"kind": "dp_quantiles", "group": level, "levels": LEVELS, "epsilon": e,
               "bounds": bounds} for level in synth.LEVELS),
            {"kind": "describe", "mode": "dp", "variables": [synth.VARIABLE, "age"],
             "categorical": [synth.SMOKING], "epsilon": e,
             "bounds": {synth.VARIABLE: bounds, "age": list(AGE_BOUNDS)}},
            {"kind": "categorical", "variable": synth.SMOKING, "mode": "dp", "epsilon": e},
            {**SURVIVAL, "epsilon": e},
        ],
    }


DECLARED_SIZE_NOTE = (
    "DP mode shows no size read from the data. declared_n and declared_n_by_group are public\n"
    "figures the operator states (a registry's published count, a trial's enrolment), never\n"
    "counted from the data: here the synthetic hospital's design sizes stand in for them.")


def center_dataset(h: synth.Hospital, csv: Path, dp: bool) -> dict[str, Any]:
    """The ``[datasets.cohort]`` table of one hospital: K-anonymous, or DP mode with its
    declared public sizes, public bounds and the categorical smoking column; both declare the
    time to readmission with the hospital's follow-up (released only as DP life tables)."""
    table: dict[str, Any] = {
        "source": {"kind": "csv", "path": str(csv)},
        "variables": [synth.VARIABLE, "age"],
        "group": {"column": synth.GROUP_COLUMN, "levels": list(synth.LEVELS)},
        "epsilon_total": EPSILON_TOTAL,
        "time_to_event": {synth.READMISSION: {
            "time": synth.READMISSION_TIME, "event": synth.READMISSION_EVENT,
            "event_values": [1], "censored_values": [0],
            "follow_up": [0, h.follow_up_days], "unit": "days"}}}
    if dp:
        table.update({
            "release_mode": "dp",
            "declared_n": h.n_control + h.n_treated,
            "declared_n_by_group": dict(zip(synth.LEVELS, (h.n_control, h.n_treated),
                                            strict=True)),
            "categorical": {synth.SMOKING: list(synth.SMOKING_LEVELS)},
            "metadata": {synth.VARIABLE: {"bounds": list(synth.BOUNDS), "unit": "day"},
                         "age": {"bounds": list(AGE_BOUNDS), "unit": "year"}}})
    return table


def _serve(role: str, config: Path) -> list[str]:
    return [sys.executable, "-m", "fedstats_cli", role, "serve", "--config", str(config)]


DEMO_ANALYST = "demo analyst"
"""The name the demo's analyst account shows (the console's header, the audit log)."""


def demo_account(store_url: str) -> str:
    """A named account in the coordinator's store for the demo's analyst; its token. An
    account, not a configured token: the console and the audit log then show its name
    (a token of ``analyst_tokens`` shows as its position in the list)."""
    from coordinator.accounts import Accounts
    from coordinator.db import Store

    store = Store(store_url)
    try:
        return Accounts(store).add(DEMO_ANALYST).token
    finally:
        store.close()


def restart_command(child: Child, workdir: Path) -> str:
    """The shell line that starts ``child`` again as the demo started it (its config file and
    log), for the user to run in another terminal."""
    role = "coordinator" if child.name == "coordinator" else "center"
    config = workdir / "config" / f"{child.name}.toml"
    return (f"{shlex.quote(sys.executable)} -m fedstats_cli {role} serve --config "
            f"{shlex.quote(str(config))} >> {shlex.quote(str(child.log))} 2>&1")


def keep_serving(group: ProcessGroup, workdir: Path, say: Callable[[str], None],
                 poll_s: float = 1.0) -> None:
    """``--keep``: wait for Ctrl-C (or SIGTERM). A service that stops is named, with the
    line that restarts it, and the others keep serving — an outage can be rehearsed (the
    coordinator leaves a stopped center out, or fails the study and lets it be resumed).
    Returns when every service has stopped."""
    told: set[str] = set()
    while True:
        gone = [c for c in group.children if c.proc.poll() is not None and c.name not in told]
        for child in gone:
            told.add(child.name)
            others = [c.name for c in group.children if c.proc.poll() is None]
            say(f"{child.name} stopped (exit code {child.proc.returncode}; its log: "
                f"{child.log}). " + (f"{', '.join(others)} keep running. " if others else "")
                + "To start it again, in another terminal (Ctrl-C here does not stop it):")
            say(f"  {restart_command(child, workdir)}")
        if len(told) == len(group.children):
            say("Every service has stopped.")
            return
        time.sleep(poll_s)


def recorded_releases(store_url: str, study_id: str) -> list[Any]:
    """Every answer the centers gave the study, as received: from the coordinator's store, as
    its admins see them (an analyst's view leaves the raw numbers out, coordinator.provenance)."""
    from coordinator.db import Store
    from coordinator.provenance import provenance

    store = Store(store_url)
    try:
        return [json.loads(provenance(r, full=True).model_dump_json())
                for r in store.releases_of(study_id)]
    finally:
        store.close()


def write_results(workdir: Path, view: dict[str, Any], notes: list[str], store_url: str,
                  title: str = "fedstats demo: length of stay, control vs treated") -> str:
    """The study's files in the work folder; returns the summary text."""
    write_view(view, workdir)
    (workdir / "releases.json").write_text(
        json.dumps(recorded_releases(store_url, view["id"]), indent=2) + "\n")
    text = summary(view, notes)
    (workdir / "summary.txt").write_text(text + "\n")
    (workdir / "report.html").write_text(
        render_html(view, notes, title=title))
    return text


def run_demo(
    workdir: Path, *, seed: int = synth.DEFAULT_SEED,
    say: Callable[[str], None] = print, keep: bool = False, dp: bool = False,
) -> int:
    """The whole demo; returns the exit code (0: the study succeeded). With ``keep``, the
    services stay up after the study (with the web console at ``/ui``) until Ctrl-C or
    SIGTERM. With ``dp``, the centers serve the data in DP mode and the study is
    :func:`dp_demo_spec`."""
    started = time.monotonic()
    workdir = workdir.resolve()
    prepare_workdir(workdir)
    say(f"fedstats demo{' --dp' if dp else ''} in {workdir}")

    centers: dict[str, dict[str, Any]] = {}
    # Each center signs its tables with its own key; the others trust it by its public key.
    public_keys = {h.center_id: write_key_pair(workdir / "config" / f"{h.center_id}.key")
                   for h in synth.HOSPITALS}
    for h in synth.HOSPITALS:
        csv = synth.write_hospital(h.center_id, workdir / "data" / f"{h.center_id}.csv", seed)
        port = free_port()
        token = secrets.token_urlsafe(32)
        config = write_toml(
            workdir / "config" / f"{h.center_id}.toml",
            {"center_id": h.center_id, "k": K, "tokens": [token], "host": "127.0.0.1",
             "port": port,
             "ledger_url": f"sqlite:///{workdir / 'ledgers' / f'{h.center_id}.sqlite'}",
             "signing_key_file": str(workdir / "config" / f"{h.center_id}.key"),
             "peers": {cid: key for cid, key in public_keys.items() if cid != h.center_id}},
            {f"datasets.{synth.DATASET}": center_dataset(h, csv, dp)},
            comments={f"datasets.{synth.DATASET}.declared_n": DECLARED_SIZE_NOTE},
        )
        centers[h.center_id] = {"port": port, "token": token, "config": config,
                                "records": h.n_control + h.n_treated}
        say(f"  {h.center_id}: {h.n_control} control + {h.n_treated} treated records "
            f"-> data/{csv.name}" + (" (served in DP mode)" if dp else ""))
    port = free_port()
    store_url = f"sqlite:///{workdir / 'store' / 'coordinator.sqlite'}"
    coordinator_config = write_toml(
        workdir / "config" / "coordinator.toml",
        {"min_centers": 2, "host": "127.0.0.1",
         "port": port, "read_timeout_s": 60.0,
         "store_url": store_url},
        {f"centers.{cid}": {"url": f"http://127.0.0.1:{c['port']}", "token": c["token"]}
         for cid, c in centers.items()},
    )
    base_url = f"http://127.0.0.1:{port}"
    analyst_token = demo_account(store_url)
    token_file = workdir / "config" / "analyst.token"
    token_file.write_text(analyst_token + "\n")
    token_file.chmod(0o600)
    spec, notes = (dp_demo_spec(), []) if dp else demo_spec()

    env = child_env()
    with terminate_on_sigterm(), ProcessGroup() as group:
        for cid, c in centers.items():
            group.start(cid, _serve("center", c["config"]), url=f"http://127.0.0.1:{c['port']}",
                        log=workdir / "logs" / f"{cid}.log", env=env)
        group.start("coordinator", _serve("coordinator", coordinator_config), url=base_url,
                    log=workdir / "logs" / "coordinator.log", env=env)
        (workdir / "processes.json").write_text(json.dumps(
            {c.name: {"pid": c.proc.pid, "url": c.url} for c in group.children}, indent=2))
        say(f"  starting 3 centers and the coordinator ({base_url}) ...")
        # No deadline: a service that cannot start exits (and is named); on a busy machine
        # the imports only take longer, and Ctrl-C stops everything.
        group.wait_healthy(timeout_s=None)
        say(f"  all healthy after {time.monotonic() - started:.1f} s; running the study")
        with analyst_client(base_url, analyst_token, timeout_s=30.0) as client:
            view = run_study(client, spec, timeout_s=300.0,
                             progress=lambda line: say(f"  {line}"))
        text = write_results(
            workdir, view, notes, store_url,
            title="fedstats demo --dp: length of stay, control vs treated (DP mode)" if dp
            else "fedstats demo: length of stay, control vs treated")
        say("")
        say(text)
        say("")
        say(f"Report: {workdir / 'report.html'}")
        if keep:
            say(f"Console: {base_url}/ui (sign in with the analyst token in {token_file})")
            say("The services keep running; Ctrl-C stops them.")
            try:
                keep_serving(group, workdir, say)
            except KeyboardInterrupt:
                say("")
    say(f"Done in {time.monotonic() - started:.1f} s; every process stopped."
        + ("" if keep else " (--keep leaves them running, with the web console)"))
    return 0 if view["status"] == "succeeded" else 1
