"""The ``fedstats`` command line (argparse; every subcommand's ``--help`` says what it does).

    fedstats center serve --config center.toml
    fedstats center keygen|public-key|epoch|audit ...   (a center's operator)
    fedstats coordinator serve --config coordinator.toml
    fedstats study run study.toml --coordinator http://127.0.0.1:8800 [--out DIR]
    fedstats demo [--workdir DIR]
    fedstats simulate mwu|boxplot|quantiles ...
    fedstats synth-data --hospital hospital_a --out cohort.csv
    fedstats health URL

Exit codes: 0 success; 1 a study that did not succeed, an unhealthy service; 2 bad usage or
configuration; 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
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
                       ("audit", "print the newest audit records")):
        op = center_actions.add_parser(name, help=text)
        op.add_argument("--config", help="TOML settings file (default: $FEDSTATS_CENTER_CONFIG)")
        if name in ("epoch", "audit"):
            op.add_argument("--dataset", help="one dataset (default: all)")
        if name == "epoch":
            op.add_argument("--roll", action="store_true",
                            help="start a new epoch on the data as they are now")
            op.add_argument("--force", action="store_true",
                            help="with --roll: even when the check finds problems")
        if name == "audit":
            op.add_argument("--limit", type=int, default=100)

    study = sub.add_parser("study", help="run analyst study files against a coordinator")
    actions = study.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run", help="create a study, wait for it, write study.json and report.html",
        description="Unattended: validates STUDY.toml, submits it, polls with progress on "
        "stderr, writes the study (result and every center release) and an HTML report.",
    )
    run.add_argument("study_file", type=Path, metavar="STUDY.toml")
    run.add_argument("--coordinator", required=True, metavar="URL",
                     help="the coordinator's base URL, e.g. http://127.0.0.1:8800")
    run.add_argument("--token", help=f"analyst bearer token (default: ${TOKEN_ENV}; prefer "
                     "the variable, a command line is visible to other users)")
    run.add_argument("--out", type=Path, help="output folder (default: study-<id>)")
    run.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                     help="give up waiting after this long (the study keeps running)")

    demo = sub.add_parser(
        "demo", help="three synthetic hospitals + a coordinator + one study, all local",
        description="Generates data, starts three centers and a coordinator on free loopback "
        "ports, runs one study, prints a summary, writes report.html, stops everything.",
    )
    demo.add_argument("--workdir", type=Path, default=Path("fedstats-demo"),
                      help="folder for data, configs, logs and the report "
                      "(default: ./fedstats-demo; emptied if a previous demo made it)")
    demo.add_argument("--seed", type=int, default=None,
                      help="seed of the synthetic data (default: fixed)")

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
    return parser


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
    if args.command == "coordinator":
        from coordinator.__main__ import main as coordinator_main

        return coordinator_main(["--config", args.config] if args.config else [])
    if args.command == "study":
        return study_run(args)
    if args.command == "demo":
        import httpx

        from fedstats_cli.demo import run_demo
        from fedstats_cli.procs import Terminated
        from fedstats_cli.synth import DEFAULT_SEED

        try:
            return run_demo(args.workdir, seed=DEFAULT_SEED if args.seed is None else args.seed)
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
        return health(args.url, args.timeout)
    raise AssertionError(args.command)


def center_operator(args: argparse.Namespace) -> int:
    from center_agent import operator
    from center_agent.core.config import Settings
    from fedstats_service.entry import reporting_errors

    if args.action == "keygen":
        if args.public_dir is not None and args.id is None:  # a usage error writes nothing
            print("fedstats center keygen: --public-dir needs --id (the file is named after the "
                  "center)", file=sys.stderr)
            return 2
        return operator.keygen(args.out, public_dir=args.public_dir, center_id=args.id,
                               force=args.force)

    def run() -> int:
        settings = Settings.load(args.config)
        if args.action == "public-key":
            return operator.public_key(settings)
        if args.action == "epoch":
            return operator.epoch(settings, dataset=args.dataset, roll=args.roll,
                                  force=args.force)
        return operator.audit(settings, dataset=args.dataset, limit=args.limit)

    return reporting_errors(Settings.SERVICE, run)


def health(url: str, timeout: float) -> int:
    import httpx

    try:
        ok = httpx.get(f"{url.rstrip('/')}/v1/health", timeout=timeout,
                       trust_env=False).status_code == 200
    except httpx.HTTPError as exc:
        print(f"fedstats health: {type(exc).__name__}", file=sys.stderr)
        return 1
    return 0 if ok else 1


def study_run(args: argparse.Namespace) -> int:
    import httpx

    from fedstats_cli.report import render_html, summary
    from fedstats_cli.study import (
        StudyFileError,
        analyst_client,
        load_spec,
        run_study,
        write_view,
    )

    token = args.token or os.environ.get(TOKEN_ENV)
    if not token:
        print(f"fedstats study run: give --token or set {TOKEN_ENV}", file=sys.stderr)
        return 2
    try:
        spec = load_spec(args.study_file)
    except StudyFileError as exc:
        print(f"fedstats study run: {exc}", file=sys.stderr)
        return 2
    with analyst_client(args.coordinator, token) as client:
        try:
            view = run_study(client, spec, timeout_s=args.timeout,
                             progress=lambda line: print(line, file=sys.stderr))
        except (RuntimeError, TimeoutError, httpx.HTTPError) as exc:
            print(f"fedstats study run: {exc}", file=sys.stderr)
            return 1
    out = args.out or Path(f"study-{view['id']}")
    write_view(view, out)
    (out / "report.html").write_text(render_html(view))
    print(summary(view))
    print(f"Wrote {out / 'study.json'} and {out / 'report.html'}")
    return 0 if view["status"] == "succeeded" else 1
