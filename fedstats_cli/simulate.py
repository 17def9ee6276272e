"""``fedstats simulate``: the reproductions, run from the command line (thin dispatch).

* ``mwu`` — the seed's testing simulation (``shared.simulate.simulate_mwu``): rejection rates of
  the pooled, sum, weighted, Fisher and table tests;
* ``boxplot`` / ``quantiles`` — :mod:`fedstats_cli.sim_boxplot` and
  :mod:`fedstats_cli.sim_quantiles` with their own options (which ``benchmarks/sim_boxplot.py``
  and ``benchmarks/sim_quantiles.py`` run too), writing under :func:`default_out`.

Only the standard library is imported here: ``fedstats_cli.cli`` reads :data:`SCRIPTS` to build
its parser, and ``fedstats health`` must stay light.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

SCRIPTS = {"boxplot": "sim_boxplot.py", "quantiles": "sim_quantiles.py"}
"""The simulations that take their own options, and the benchmark script that runs each."""


def default_out() -> Path:
    """``benchmarks/out`` of the source checkout fedstats runs from (where ``docs/benchmarks.md``
    reads the results), else of the current folder."""
    checkout = Path(__file__).resolve().parents[1]
    base = checkout if (checkout / "benchmarks").is_dir() else Path.cwd()
    return base / "benchmarks" / "out"


def run_mwu(centers: int, delta: float, sigma_alpha: float, sigma_beta: float,
            replications: int, seed: int, k: int) -> str:
    import numpy as np

    from shared.simulate import CENTER_SIZES, METHODS, simulate_mwu

    sim = simulate_mwu(CENTER_SIZES[centers], delta=delta, sigma_alpha=sigma_alpha,
                       sigma_beta=sigma_beta, replications=replications,
                       rng=np.random.default_rng(seed), k=k)
    rates = sim.rejection_rate(0.05)
    lines = [f"{replications} replications, {centers} centers {CENTER_SIZES[centers]}, "
             f"δ = {delta}, σ_α = {sigma_alpha}, σ_β = {sigma_beta}, K = {k}",
             "rejection rate at 5 %:"]
    lines += [f"  {m:<9}{rates[m]:.3f}" for m in METHODS]
    return "\n".join(lines)


def run_script(name: str, argv: list[str]) -> int:
    """The simulation ``name`` of :data:`SCRIPTS` with the options ``argv``; its exit code (0
    after ``--help``, 2 after a usage error, as the script's)."""
    main: Callable[..., int]
    if name == "boxplot":
        from fedstats_cli.sim_boxplot import main
    else:
        from fedstats_cli.sim_quantiles import main
    try:
        return main(argv, out=default_out())
    except SystemExit as exc:  # argparse ends --help and usage errors so
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        return 1
    except OSError as exc:  # an output folder it may not write, a CSV that is not there
        print(f"fedstats simulate {name}: {exc}", file=sys.stderr)
        return 1
