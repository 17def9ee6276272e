"""The ``fedstats`` command line (argparse; every subcommand's ``--help`` says what it does).

    fedstats center serve --config center.toml
    fedstats center keygen|public-key|epoch|audit ...   (a center's operator)
    fedstats coordinator serve --config coordinator.toml
    fedstats coordinator analyst add|list|revoke|rotate|quota ... | audit ...   (its operator)
    fedstats study run study.toml --coordinator https://coordinator:8800 [--ca-bundle FILE]
        [--idempotency-key KEY] [--csv DIR] [--xlsx FILE]
    fedstats study resume|status|get|cancel STUDY_ID --coordinator URL [--ca-bundle FILE]
        (run/resume/get: [--csv DIR], the tables as CSV with the Methods paragraph;
         [--xlsx FILE], the same as one workbook)
    fedstats study list [--status S] [--limit N] --coordinator URL     (get/list/cancel: --json)
    fedstats study plan study.toml --coordinator URL [--json]   (a dry run; exit 1: refusals)
    fedstats catalog|centers --coordinator URL [--json]
    fedstats demo [--workdir DIR] [--keep] [--dp]
    fedstats simulate mwu|boxplot|quantiles ...
    fedstats synth-data --hospital hospital_a --out cohort.csv
    fedstats health URL [--ca-bundle FILE]

Exit codes (README.md, "Exit codes"): 0 success; 1 a study that did not succeed (a
partially_failed or cancelled one included: its report shows which analyses failed), a call the
coordinator refused or could not answer (no such study, one that cannot be cancelled any more),
an unhealthy service; 2 bad usage or configuration; 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from pathlib import Path

from fedstats_cli.simulate import SCRIPTS

TOKEN_ENV = "FEDSTATS_ANALYST_TOKEN"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fedstats",
        description="Privacy-preserving statistics across hospitals.",
        epilog="Docs: README.md, docs/coordinator.md, docs/privacy.md",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    center_actions = None
    for role, env in (("center", "FEDSTATS_CENTER_CONFIG"),
                      ("coordinator", "FEDSTATS_COORDINATOR_CONFIG")):
        p = sub.add_parser(role, help=f"run the {role} service")
        actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
        serve = actions.add_parser("serve", help=f"serve the {role} (uvicorn) until stopped")
        serve.add_argument("--config", help=f"TOML settings file (default: ${env})")
        if role == "center":
            center_actions = actions
        else:
            add_coordinator_actions(actions, env)
    assert center_actions is not None
    keygen = center_actions.add_parser(
        "keygen", help="write a signing key (signing_key_file) and its public key (FILE.pub)")
    keygen.add_argument("--out", type=Path, required=True, metavar="FILE")
    keygen.add_argument("--public-dir", type=Path,
                        help="also copy the public key to DIR/<id>.pub (a peers directory)")
    keygen.add_argument("--id", help="the center's id (names the copied public key)")
    keygen.add_argument("--force", action="store_true", help="replace an existing key")
    for name, text in (("public-key", "print this center's public key (to give to its peers)"),
                       ("epoch", "show each dataset's epoch and the version check; --roll "
                                 "starts a new epoch"),
                       ("audit", "print or export the audit trail (who asked what, when, "
                                 "on which data; docs/privacy.md)")):
        op = center_actions.add_parser(name, help=text)
        op.add_argument("--config", help="TOML settings file (default: $FEDSTATS_CENTER_CONFIG)")
        if name in ("epoch", "audit"):
            op.add_argument("--dataset", help="one dataset (default: all)")
        if name == "epoch":
            op.add_argument("--roll", action="store_true",
                            help="start a new epoch on the data as they are now (DP mode: "
                                 "always, no check)")
            op.add_argument("--force", action="store_true",
                            help="with --roll: even when the check finds problems")
            op.add_argument("--renew", metavar="VARIABLE",
                            help="with --dataset: start a new version of a variable a forced "
                                 "epoch left blocked (the report names it)")
        if name == "audit":
            add_audit_arguments(op)

    study = sub.add_parser("study", help="run analyst study files against a coordinator")
    actions = study.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run", help="create a study, wait for it, write study.json and report.html",
        description="Unattended: validates STUDY.toml, submits it, polls with progress on "
        "stderr, writes the study (result and every center release) and an HTML report.",
    )
    run.add_argument("study_file", type=Path, metavar="STUDY.toml")
    add_coordinator_arguments(run, waits=True)
    run.add_argument("--idempotency-key", metavar="KEY",
                     help="submit once per KEY (1-128 printable characters, e.g. the date in a "
                     "cron job): run again with the same KEY and study file, it waits for the "
                     "study the first run made instead of starting another")
    resume = actions.add_parser(
        "resume", help="run a study that stopped short again, wait, write its outputs",
        description="For a study left failed_resumable (the coordinator stopped mid-study), "
        "partially_failed, or failed because a center was unreachable or timed out: runs what "
        "did not finish again (the releases it received are not asked again, nothing is paid "
        "twice), polls and writes study.json and report.html as run does.",
    )
    resume.add_argument("study_id", metavar="STUDY_ID")
    add_coordinator_arguments(resume, waits=True)
    status = actions.add_parser("status", help="print a study's status")
    status.add_argument("study_id", metavar="STUDY_ID")
    add_coordinator_arguments(status, waits=False)
    get = actions.add_parser(
        "get", help="write a study's study.json and report.html (or print it with --json)",
        description="Reads the study as it is now (provenance included) and writes its outputs "
        "as run does; exit 0 when it succeeded.")
    get.add_argument("study_id", metavar="STUDY_ID")
    add_coordinator_arguments(get, waits=False, json_output=True)
    get.add_argument("--out", type=Path, help="output folder (default: study-<id>)")
    add_csv_argument(get)
    listed = actions.add_parser("list", help="your studies and those shared with you, newest "
                                "first")
    listed.add_argument("--status", help="only studies in this status (running, succeeded, ...)")
    listed.add_argument("--limit", type=int, default=100, metavar="N",
                        help="the newest N (1-1000; default: 100)")
    add_coordinator_arguments(listed, waits=False, json_output=True)
    cancel = actions.add_parser(
        "cancel", help="stop a pending or running study (its owner or an admin)",
        description="The study becomes cancelled: it keeps what it received and `fedstats "
        "study resume` runs the rest later without paying twice. Exit 1 when it had already "
        "ended.")
    cancel.add_argument("study_id", metavar="STUDY_ID")
    add_coordinator_arguments(cancel, waits=False, json_output=True)
    plan = actions.add_parser(
        "plan", help="a dry run: what STUDY.toml would spend per center and what would be "
        "refused (nothing is released or spent; exit 1 when something would be refused)")
    plan.add_argument("study_file", type=Path, metavar="STUDY.toml")
    add_coordinator_arguments(plan, waits=False, json_output=True)
    for name, text in (("catalog", "what the centers hold: datasets, variables, group levels, "
                                   "sizes (rounded down to each center's K), ε left"),
                       ("centers", "each registered center's health and ε left per dataset")):
        discover = sub.add_parser(name, help=text)
        add_coordinator_arguments(discover, waits=False, json_output=True)

    demo = sub.add_parser(
        "demo", help="three synthetic hospitals + a coordinator + one study, all local",
        description="Generates data, starts three centers and a coordinator on free loopback "
        "ports, runs one study, prints a summary, writes report.html, stops everything.",
    )
    demo.add_argument("--workdir", type=Path, default=Path("fedstats-demo"),
                      help="folder for data, configs, logs and the report "
                      "(default: ./fedstats-demo; emptied if a previous demo made it)")
    demo.add_argument("--keep", action="store_true",
                      help="keep the services running after the study, with the web console "
                           "(its address is printed) until Ctrl-C")
    demo.add_argument("--seed", type=int, default=None,
                      help="seed of the synthetic data (default: fixed)")
    demo.add_argument("--dp", action="store_true",
                      help="serve the hospitals in DP mode (release_mode = \"dp\": every "
                           "release differentially private, exact ones refused) and run the "
                           "DP twin of the study (examples/dp_study.toml)")

    sim = sub.add_parser("simulate", help="the papers' simulations")
    kinds = sim.add_subparsers(dest="kind", required=True, metavar="KIND")
    mwu = kinds.add_parser("mwu", help="federated MWU tests: rejection rates (seed 001 §6.4)")
    mwu.add_argument("--centers", type=int, choices=[3, 5, 10], default=3)
    mwu.add_argument("--delta", type=float, default=0.0, help="shift between groups")
    mwu.add_argument("--sigma-alpha", type=float, default=0.0)
    mwu.add_argument("--sigma-beta", type=float, default=0.0)
    mwu.add_argument("--replications", type=int, default=200)
    mwu.add_argument("--seed", type=int, default=1)
    mwu.add_argument("-k", type=int, default=10)
    for name, script in SCRIPTS.items():
        # Every option after the kind, --help included, goes to the simulation (see main).
        kinds.add_parser(name, help=f"benchmarks/{script} with its own options", add_help=False)

    data = sub.add_parser("synth-data", help="write one synthetic hospital's CSV (compose uses "
                          "it to fill a center's data volume)")
    data.add_argument("--hospital", required=True, help="hospital_a, hospital_b or hospital_c")
    data.add_argument("--out", type=Path, required=True)
    data.add_argument("--seed", type=int, default=None)
    data.add_argument("--force", action="store_true", help="overwrite an existing file")

    health = sub.add_parser("health", help="exit 0 when URL/v1/health answers ok (for "
                            "container health checks)")
    health.add_argument("url")
    health.add_argument("--timeout", type=float, default=3.0)
    add_ca_bundle_argument(health, "the service's")
    health.add_argument("--client-cert", type=Path, metavar="FILE",
                        help="a client certificate (PEM) for a service that requires one "
                        "(mutual TLS: tls_client_ca); with --client-key")
    health.add_argument("--client-key", type=Path, metavar="FILE", help="its private key (PEM)")
    return parser


def add_coordinator_actions(actions: argparse._SubParsersAction[argparse.ArgumentParser],
                            env: str) -> None:
    """``fedstats coordinator analyst|audit``: the operator's tools on the coordinator's store
    (``coordinator.admin``; docs/coordinator.md, "Analyst accounts")."""
    analyst = actions.add_parser("analyst", help="analyst accounts: add, list, revoke, rotate, "
                                 "quota")
    ops = analyst.add_subparsers(dest="op", required=True, metavar="OP")
    add = ops.add_parser("add", help="make an account; prints its token, once")
    add.add_argument("--name", required=True, help="who it is for (shown in lists and logs)")
    add.add_argument("--role", choices=("analyst", "admin"), default="analyst",
                     help="admin: sees every study and the audit log (default: analyst)")
    listed = ops.add_parser("list", help="every account and each analyst's ε quotas")
    revoke = ops.add_parser("revoke", help="revoke an account: its token is refused at once")
    revoke.add_argument("analyst_id", metavar="ID")
    rotate = ops.add_parser("rotate", help="a new token for an account (prints it, once); the "
                            "old one is refused at once")
    rotate.add_argument("analyst_id", metavar="ID")
    for p in (add, rotate):
        p.add_argument("--expires-in", type=float, metavar="DAYS",
                       help="the token stops working DAYS from now (default: never); an "
                       "expired token is refused with 401 saying so")
    quota = ops.add_parser("quota", help="set an analyst's ε quota at a center's dataset")
    quota.add_argument("analyst_id", metavar="ID")
    quota.add_argument("--center", required=True)
    quota.add_argument("--dataset", required=True)
    limit = quota.add_mutually_exclusive_group(required=True)
    limit.add_argument("--epsilon", type=float, help="the most ε the analyst's studies may "
                       "spend there (spending so far counts)")
    limit.add_argument("--remove", action="store_true", help="no limit there")
    trail = actions.add_parser("audit", help="print or export the coordinator's audit log")
    trail.add_argument("--format", choices=("text", "csv", "json"), default="text")
    trail.add_argument("--out", type=Path, metavar="FILE",
                       help="write to FILE (readable by you only) instead of the terminal")
    trail.add_argument("--analyst", help="one analyst id")
    trail.add_argument("--action", dest="audit_action", metavar="ACTION",
                       help="one action (study.create, auth.refused, ...)")
    trail.add_argument("--limit", type=int, default=100, metavar="N",
                       help="the newest N records (default: 100)")
    for p in (add, listed, revoke, rotate, quota, trail):
        p.add_argument("--config", help=f"TOML settings file (default: ${env})")


def add_ca_bundle_argument(p: argparse.ArgumentParser, whose: str) -> None:
    p.add_argument("--ca-bundle", type=Path, metavar="FILE",
                   help=f"PEM file of the CA that signed {whose} HTTPS certificate (default: "
                   "$SSL_CERT_FILE / $SSL_CERT_DIR when set, else the system's trust store)")


def add_coordinator_arguments(p: argparse.ArgumentParser, *, waits: bool,
                              json_output: bool = False) -> None:
    """Where the coordinator is and how to call it; ``waits``: the options of a command that
    waits for a study and writes its outputs; ``json_output``: ``--json``."""
    p.add_argument("--coordinator", required=True, metavar="URL",
                   help="the coordinator's base URL, e.g. https://coordinator.example.org:8800")
    p.add_argument("--token", help=f"analyst bearer token (default: ${TOKEN_ENV}; prefer "
                   "the variable, a command line is visible to other users)")
    add_ca_bundle_argument(p, "the coordinator's")
    if waits:
        add_csv_argument(p)
        p.add_argument("--out", type=Path, help="output folder (default: study-<id>)")
        p.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                       help="give up waiting after this long (the study keeps running)")
    if json_output:
        p.add_argument("--json", action="store_true",
                       help="print the coordinator's answer as JSON on stdout (for scripts)")


def add_csv_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--csv", type=Path, metavar="DIR",
                   help="also write the study's tables as tidy CSV (table1, tests, effects, "
                   "...), its Methods paragraph, spec and reproducibility record into DIR")
    p.add_argument("--xlsx", type=Path, metavar="FILE",
                   help="also write the study's tables as one XLSX workbook (a sheet per table, "
                   "its Methods paragraph and spec) to FILE")


def _iso_time(value: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO 8601 time (e.g. 2026-01-31 or 2026-01-31T08:00:00Z)"
        ) from None


def add_audit_arguments(op: argparse.ArgumentParser) -> None:
    """``fedstats center audit``'s filters and output (``center_agent.operator.audit``)."""
    op.add_argument("--format", choices=("text", "csv", "json"), default="text",
                    help="a line per record (default), or an export: CSV with a header, JSON")
    op.add_argument("--out", type=Path, metavar="FILE",
                    help="write to FILE (readable by you only) instead of the terminal")
    op.add_argument("--study", help="one study id")
    op.add_argument("--analyst", help="one analyst id")
    op.add_argument("--since", type=_iso_time, metavar="TIME",
                    help="records at or after TIME (ISO 8601; UTC when no zone is given)")
    op.add_argument("--until", type=_iso_time, metavar="TIME", help="records before TIME")
    op.add_argument("--limit", type=int, metavar="N",
                    help="the newest N records (default: 100 as text, all in csv/json)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "simulate" and args.kind in SCRIPTS:
        args.args = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return dispatch(args)
    except KeyboardInterrupt:
        print("fedstats: interrupted", file=sys.stderr)
        return 130


def dispatch(args: argparse.Namespace) -> int:
    # Imports are local: `fedstats health` in a container health check stays light.
    if args.command == "center" and args.action == "serve":
        from center_agent.__main__ import main as center_main

        return center_main(["--config", args.config] if args.config else [])
    if args.command == "center":
        return center_operator(args)
    if args.command == "coordinator" and args.action != "serve":
        return coordinator_operator(args)
    if args.command == "coordinator":
        from coordinator.__main__ import main as coordinator_main

        return coordinator_main(["--config", args.config] if args.config else [])
    if args.command in ("catalog", "centers") or (args.command == "study"
                                                   and args.action == "plan"):
        from fedstats_cli.catalog import command

        return command(args, token=args.token or os.environ.get(TOKEN_ENV), token_env=TOKEN_ENV)
    if args.command == "study":
        return study_command(args)
    if args.command == "demo":
        import httpx

        from fedstats_cli.demo import run_demo
        from fedstats_cli.procs import Terminated
        from fedstats_cli.synth import DEFAULT_SEED

        try:
            return run_demo(args.workdir, seed=DEFAULT_SEED if args.seed is None else args.seed,
                            keep=args.keep, dp=args.dp)
        except Terminated:
            print("fedstats demo: terminated; every process it started is stopped",
                  file=sys.stderr)
            return 143
        except (RuntimeError, TimeoutError, httpx.HTTPError) as exc:
            # A service that did not start or stopped answering, a refused study.
            print(f"fedstats demo: {exc}", file=sys.stderr)
            return 1
    if args.command == "simulate":
        from fedstats_cli import simulate

        if args.kind == "mwu":
            print(simulate.run_mwu(args.centers, args.delta, args.sigma_alpha, args.sigma_beta,
                                   args.replications, args.seed, args.k))
            return 0
        return simulate.run_script(args.kind, args.args)
    if args.command == "synth-data":
        from fedstats_cli import synth

        if args.out.exists() and not args.force:
            print(f"fedstats synth-data: {args.out} exists; kept (--force overwrites)",
                  file=sys.stderr)
            return 0
        try:
            synth.write_hospital(args.hospital, args.out,
                                 synth.DEFAULT_SEED if args.seed is None else args.seed)
        except ValueError as exc:
            print(f"fedstats synth-data: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "health":
        if (args.client_cert is None) != (args.client_key is None):
            print("fedstats health: --client-cert and --client-key go together", file=sys.stderr)
            return 2
        client_cert = (args.client_cert, args.client_key) if args.client_cert else None
        return health(args.url, args.timeout, args.ca_bundle, client_cert)
    raise AssertionError(args.command)


def center_operator(args: argparse.Namespace) -> int:
    from center_agent import operator
    from center_agent.core.config import EpochSettings, LedgerSettings, Settings
    from fedstats_service.entry import reporting_errors

    if args.action == "keygen":
        if args.public_dir is not None and args.id is None:  # a usage error writes nothing
            print("fedstats center keygen: --public-dir needs --id (the file is named after the "
                  "center)", file=sys.stderr)
            return 2
        return operator.keygen(args.out, public_dir=args.public_dir, center_id=args.id,
                               force=args.force)

    def run() -> int:
        # Each reads only what it uses (no token, no service setting): the ledger, and for
        # `epoch` the datasets; `public-key` the keys, from the whole settings.
        if args.action == "public-key":
            return operator.public_key(Settings.load(args.config))
        if args.action == "epoch":
            return operator.epoch(EpochSettings.load(args.config), dataset=args.dataset,
                                  roll=args.roll, force=args.force, renew=args.renew)
        return operator.audit(LedgerSettings.load(args.config), fmt=args.format, out=args.out,
                              dataset=args.dataset, study=args.study, analyst=args.analyst,
                              since=args.since, until=args.until, limit=args.limit)

    return reporting_errors(Settings.SERVICE, run)


def coordinator_operator(args: argparse.Namespace) -> int:
    from coordinator import admin
    from coordinator.core.config import StoreSettings
    from fedstats_service.entry import reporting_errors

    def run() -> int:
        # The store's URL and the centers' ids only: no token needed (StoreSettings).
        settings = StoreSettings.load(args.config)
        if args.action == "audit":
            return admin.audit(settings, fmt=args.format, out=args.out, analyst=args.analyst,
                               action=args.audit_action, limit=args.limit)
        if args.op == "add":
            return admin.add(settings, args.name, args.role, args.expires_in)
        if args.op == "rotate":
            return admin.rotate(settings, args.analyst_id, args.expires_in)
        if args.op == "list":
            return admin.list_accounts(settings)
        if args.op == "revoke":
            return admin.revoke(settings, args.analyst_id)
        return admin.set_quota(settings, args.analyst_id, center=args.center,
                               dataset=args.dataset, epsilon=None if args.remove else args.epsilon)

    return reporting_errors(StoreSettings.SERVICE, run)


def health(url: str, timeout: float, ca_bundle: Path | None = None,
           client_cert: tuple[Path, Path] | None = None) -> int:
    """0 when ``url``/v1/health answers 200; 1 (with why on stderr) when not; 2 for TLS files
    that cannot serve."""
    import asyncio

    import httpx

    from fedstats_service.tls import TrustError, client_context, describe_failure, probe

    try:
        verify = client_context(ca_bundle, client_cert)
    except TrustError as exc:
        print(f"fedstats health: {exc}", file=sys.stderr)
        return 2
    try:
        ok = httpx.get(f"{url.rstrip('/')}/v1/health", timeout=timeout, trust_env=False,
                       verify=verify).status_code == 200
    except httpx.HTTPError as exc:
        said = describe_failure(exc)
        if said is None and isinstance(exc, httpx.RequestError) and url.startswith("https:"):
            # A server refusing our client certificate only closes the connection: ask why.
            said = asyncio.run(probe(httpx.URL(url), verify, client_cert=client_cert is not None,
                                     timeout_s=timeout))
        print(f"fedstats health: {said or type(exc).__name__}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def study_command(args: argparse.Namespace) -> int:
    """``fedstats study run|resume|status|get|list|cancel``: 0 when the study succeeded
    (``status``, ``list``: whenever the coordinator answers; ``cancel``: when it was
    cancelled), 1 when it did not or the coordinator refused or cannot be reached, 2 bad usage.
    """
    import json

    import httpx

    from coordinator.reporting.report import render_html, summary
    from fedstats_cli.study import (
        UsageError,
        cancel_study,
        connect,
        connection_problem,
        get_study,
        list_studies,
        resume_study,
        run_study,
        status_line,
        studies_table,
        study_status,
        write_csv,
        write_view,
        write_xlsx,
    )

    prog = f"fedstats study {args.action}"
    try:
        client, spec = connect(args.coordinator, args.token or os.environ.get(TOKEN_ENV),
                               token_env=TOKEN_ENV, ca_bundle=args.ca_bundle,
                               study_file=args.study_file if args.action == "run" else None)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        print(line, file=sys.stderr)

    with client:
        try:
            if args.action == "list":
                studies = list_studies(client, status=args.status, limit=args.limit)
                print(json.dumps(studies, indent=2) if args.json else studies_table(studies))
                return 0
            if spec is not None:
                view = run_study(client, spec, timeout_s=args.timeout, progress=progress,
                                 idempotency_key=args.idempotency_key)
            elif args.action == "resume":
                view = resume_study(client, args.study_id, timeout_s=args.timeout,
                                    progress=progress)
            elif args.action == "get":
                view = get_study(client, args.study_id)
            elif args.action == "cancel":
                view = cancel_study(client, args.study_id)
            else:
                view = study_status(client, args.study_id)
        except httpx.HTTPError as exc:
            print(f"{prog}: {connection_problem(exc, ca_bundle=args.ca_bundle)}",
                  file=sys.stderr)
            return 1
        except (RuntimeError, TimeoutError) as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 1
    if getattr(args, "csv", None) is not None and view.get("result") is not None:
        written = write_csv(view, args.csv)
        print(f"Wrote {len(written)} files to {args.csv}", file=sys.stderr)
    if getattr(args, "xlsx", None) is not None and view.get("result") is not None:
        print(f"Wrote {write_xlsx(view, args.xlsx)}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps(view, indent=2))
    elif args.action in ("status", "cancel"):
        print(status_line(view))
    if args.action in ("status", "cancel"):
        return 0
    if getattr(args, "json", False):
        return 0 if view["status"] == "succeeded" else 1
    out = args.out or Path(f"study-{view['id']}")
    write_view(view, out)
    (out / "report.html").write_text(render_html(view))
    print(summary(view))
    print(f"Wrote {out / 'study.json'} and {out / 'report.html'}")
    return 0 if view["status"] == "succeeded" else 1
