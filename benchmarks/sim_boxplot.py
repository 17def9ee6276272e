"""Seed 000's simulation: DPBoxplot (both walks) against the four naive DP boxplots and the
non-private one (``fedstats_cli.sim_boxplot``; the same as ``fedstats simulate boxplot``).

Run: ``.venv/bin/python benchmarks/sim_boxplot.py [--reps 50] [--jobs 2] [--quick]``
Writes ``benchmarks/out/sim_boxplot.csv``, one figure per ε and an example figure, and prints
the summary tables of ``docs/benchmarks.md`` (``--summary CSV`` prints them again from a written
CSV). Methods, design and metrics: ``shared/dp/simulate.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fedstats_cli.sim_boxplot import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], out=Path(__file__).resolve().parent / "out"))
