"""Seed 001's federated quantile simulation (§7.3; design in docs/methods.md §8.8), one command
(``fedstats_cli.sim_quantiles``; the same as ``fedstats simulate quantiles``).

    .venv/bin/python benchmarks/sim_quantiles.py --replications 2000 --jobs 2
    .venv/bin/python benchmarks/sim_quantiles.py --dp 1 10 100 --replications 200

Writes its tables and figure under ``--out`` (default ``benchmarks/out/``); ``--help`` lists
every option.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fedstats_cli.sim_quantiles import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], out=Path(__file__).parent / "out"))
