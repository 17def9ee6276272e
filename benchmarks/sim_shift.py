"""The shift interval printed from a federated bin table against the raw data's Moses interval
(docs/methods.md §12.3): coverage of the true shift, containment of the raw interval and width.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/sim_shift.py [--reps 600] [--seed 20261207]``;
``--demo`` instead prints the demo's figures: its three hospitals' length of stay
(``fedstats_cli.synth``, default seed), the raw Moses interval, the sum test's p, and for three
seeds of the federated table (lower limit 0, as the demo closes it) the table test's p, the sharp
bounds and the printed interval.

Data: three centers with the given records per arm, X from the model and Y = X' + Δ (Δ = 0.5,
X' an independent draw of the same law), the normal N(0, 1) and the lognormal(0, 1); the
federated K = 10 table built as the services build it (``shared.federation.federated_table``:
the largest center bins, the others refine, shared-out counts and all). Per replication:
the raw data's 95 % Moses interval (``hodges_lehmann``) and, from the table
(``hodges_lehmann_table``), the midpoints' Moses interval widened by the binning allowance λ
for λ = 0 (the midpoints' own), ¼, ½ (the printed one) and 1 (the sharp outer bounds). Printed:
coverage of Δ, the share of replications whose interval contains the raw one, and the median of
width / raw width, as the markdown rows of the table in docs/methods.md §12.3.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from shared.federation import federated_table
from shared.hodges_lehmann import hodges_lehmann, hodges_lehmann_table

MODELS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "normal": lambda g, n: g.normal(size=n),
    "lognormal": lambda g, n: g.lognormal(0.0, 1.0, size=n),
}
SIZES = ((40, 30, 20), (100, 80, 60), (300, 250, 200))
ALLOWANCES = (0.0, 0.25, 0.5, 1.0)
SHIFT = 0.5


def cell(model: str, sizes: tuple[int, ...], reps: int, g: np.random.Generator) -> str:
    raw_hits = 0
    hits = np.zeros(len(ALLOWANCES))
    contained = np.zeros(len(ALLOWANCES))
    ratios: list[list[float]] = [[] for _ in ALLOWANCES]
    for _ in range(reps):
        centers = [(MODELS[model](g, s), MODELS[model](g, s) + SHIFT) for s in sizes]
        x = np.concatenate([c[0] for c in centers])
        y = np.concatenate([c[1] for c in centers])
        raw = hodges_lehmann(x, y)
        raw_hits += raw.low <= SHIFT <= raw.high
        table = federated_table(centers, k=10, rng=g)
        for i, lam in enumerate(ALLOWANCES):
            lo, hi = hodges_lehmann_table(table, allowance=lam).binned_interval
            hits[i] += lo <= SHIFT <= hi
            contained[i] += lo <= raw.low and raw.high <= hi
            ratios[i].append((hi - lo) / (raw.high - raw.low))
    parts = [f"{hits[i] / reps:.3f} / {contained[i] / reps:.3f} / {np.median(ratios[i]):.2f}"
             for i in range(len(ALLOWANCES))]
    return (f"| {model} | {', '.join(map(str, sizes))} | {raw_hits / reps:.3f} | "
            + " | ".join(parts) + " |")


def demo() -> None:
    from fedstats_cli import synth
    from shared.mwu import mann_whitney, sum_test, table_test

    centers = []
    for h in synth.HOSPITALS:
        cols = synth.generate(h, np.random.default_rng(
            synth.hospital_seed(synth.DEFAULT_SEED, h.center_id)))
        arm, los = cols[synth.GROUP_COLUMN], cols[synth.VARIABLE]
        centers.append((los[arm == synth.LEVELS[0]], los[arm == synth.LEVELS[1]]))
    raw = hodges_lehmann(np.concatenate([c[0] for c in centers]),
                         np.concatenate([c[1] for c in centers]))
    p = sum_test([mann_whitney(*c) for c in centers]).pvalue
    print(f"raw: estimate {raw.estimate:.3g}, interval [{raw.low:.3g}, {raw.high:.3g}]; "
          f"sum test p = {p:.2g}")
    for seed in range(3):
        table = federated_table(centers, k=10, rng=np.random.default_rng(seed), lower=0.0)
        b = hodges_lehmann_table(table)
        print(f"table seed {seed}: table test p = {table_test(table).pvalue:.2g}; sharp bounds "
              f"[{b.interval[0]:.3g}, {b.interval[1]:.3g}]; printed estimate {b.estimate:.3g}, "
              f"interval [{b.binned_low:.3g}, {b.binned_high:.3g}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--demo", action="store_true")
    args = parser.parse_args()
    if args.demo:
        demo()
        return
    g = np.random.default_rng(args.seed)
    heads = " | ".join(f"λ = {lam:g}" for lam in ALLOWANCES)
    print(f"| model | records per arm | raw Moses | {heads} |")
    print("|---|---|---|" + "---|" * len(ALLOWANCES))
    for model in MODELS:
        for sizes in SIZES:
            print(cell(model, sizes, args.reps, g), flush=True)


if __name__ == "__main__":
    main()
