"""``fedstats simulate``: the reproductions, run from the command line (thin dispatch).

* ``mwu`` — the seed's testing simulation (``shared.simulate.simulate_mwu``): rejection rates of
  the pooled, sum, weighted, Fisher and table tests;
* ``boxplot`` / ``quantiles`` — the scripts ``benchmarks/sim_boxplot.py`` and
  ``benchmarks/sim_quantiles.py`` with their own options (a source checkout is needed: the
  benchmarks are not installed with the package).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from fedstats_cli.cli import SCRIPTS
from shared.simulate import CENTER_SIZES, METHODS, simulate_mwu

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run_mwu(centers: int, delta: float, sigma_alpha: float, sigma_beta: float,
            replications: int, seed: int, k: int) -> str:
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
    """Run ``benchmarks/<script> argv`` in a child Python; its exit code."""
    script = BENCHMARKS / SCRIPTS[name]
    if not script.is_file():
        print(f"fedstats simulate {name}: {script} not found (run from a source checkout)",
              file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(BENCHMARKS.parent), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.call([sys.executable, str(script), *argv], env=env)
