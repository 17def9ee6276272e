"""How many records complete cases drop, against the per-variable rule (``missing =
"per_variable"``, ``center_agent.data.missing``), on missingness completely at random.

For each scenario (records per arm, variables, each variable's missing rate) and K, over
``--reps`` seeded data sets: the share of records complete cases over every variable leave out
(every analysis loses them), and under the per-variable rule the share of records that leave
their level (a variable with 1..K-1 missing there) and the share of values withheld (a variable
with 1..K-1 present) or missing, against the values truly present.

    python benchmarks/sim_missing.py            # the table in docs/privacy.md, guarantee 15
"""

from __future__ import annotations

import argparse

import numpy as np

from center_agent.data.missing import available_cases

SCENARIOS = [
    # (records per arm, missing rate of each variable)
    (1000, [0.05] * 10),
    (200, [0.05] * 10),
    (50, [0.05] * 10),
    (200, [0.01, 0.01, 0.02, 0.02, 0.05, 0.05, 0.10, 0.10, 0.20, 0.30]),
    (50, [0.01, 0.01, 0.02, 0.02, 0.05, 0.05, 0.10, 0.10, 0.20, 0.30]),
    (1000, [0.05] * 30),
]


def one(n: int, rates: list[float], k: int, rng: np.random.Generator) -> tuple[float, ...]:
    present = rng.random((len(rates), n)) >= np.asarray(rates)[:, None]
    complete = present.all(axis=0).mean()
    keep, withheld = available_cases(present, k)
    kept = present[:, keep] & ~withheld[:, None]
    values_lost = 1 - kept.sum() / max(1, present.sum())
    return 1 - complete, 1 - keep.mean(), values_lost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print("| records per arm | variables (missing rate) | K | complete cases drop | "
          "per variable: records dropped | per variable: present values lost |")
    print("|---|---|---|---|---|---|")
    for n, rates in SCENARIOS:
        for k in (5, 10):
            runs = np.array([one(n, rates, k, rng) for _ in range(args.reps)])
            mean = runs.mean(axis=0)
            label = (f"{len(rates)} × {rates[0]:.0%}" if len(set(rates)) == 1
                     else f"{len(rates)}: " + ", ".join(f"{r:.0%}" for r in rates))
            print(f"| {n} | {label} | {k} | {mean[0]:.1%} | {mean[1]:.1%} | {mean[2]:.1%} |")


if __name__ == "__main__":
    main()
