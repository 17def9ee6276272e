"""Speed of the noise mechanisms (issue 4): a cold Fisher-optimal solve and 10^6 draws.

Run: ``.venv/bin/python benchmarks/bench_mechanisms.py``

Targets: solving a new (a, ρ) (cache cleared) < 50 ms; 10^6 draws < 100 ms. Times are also printed
as ratios to numpy's own samplers measured in the same run, which travel across machines better
than milliseconds. Exit status 1 if a target is missed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from shared.mechanisms import FisherOptimal, FisherOptimalBox, Gaussian, Laplace, clear_cache

N = 10**6
SOLVE_TARGET_MS = 50.0
DRAW_TARGET_MS = 100.0


def best_ms(fn: Callable[[], object], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * min(times)


def cold_solve_ms(rho: float, a: float) -> float:
    clear_cache()
    t0 = time.perf_counter()
    FisherOptimal(rho, a)
    return 1e3 * (time.perf_counter() - t0)


def main() -> int:
    rng = np.random.default_rng(2026)
    FisherOptimal(0.3, 1.0)  # imports and first-call overheads out of the way

    ok = True
    print("cold solve of a new (a, ρ), cache cleared (ms):")
    cases = [
        (0.005, 1.0),
        (0.02, 1.0),
        (0.05, 1.0),
        (0.1, 1.0),
        (0.12, 1.0),
        (0.1306, 1.0),
        (0.4, 2.0),
        (3.0, 7.0),
        (1e-3, 0.05),
    ]
    solve_times = []
    for rho, a in cases:
        ms = statistics.median(cold_solve_ms(rho, a) for _ in range(5))
        solve_times.append(ms)
        print(f"  ρ = {rho:<7g} a = {a:<5g} ρ/a² = {rho / a**2:<9.4g} {ms:7.2f}")
    worst = max(solve_times)
    ok &= worst < SOLVE_TARGET_MS
    verdict = "ok" if worst < SOLVE_TARGET_MS else "SLOW"
    print(f"  worst {worst:.2f} ms (target < {SOLVE_TARGET_MS:g}) {verdict}")
    clear_cache()
    t0 = time.perf_counter()
    FisherOptimalBox(0.3, (0.5, 1.0, 2.0))
    print(f"  box (0.5, 1, 2), ρ = 0.3: {1e3 * (time.perf_counter() - t0):.2f} ms")

    base_laplace = best_ms(lambda: rng.laplace(size=N))
    base_normal = best_ms(lambda: rng.standard_normal(N))
    print(
        f"\n10^6 draws (ms, best of 7; ratio to rng.laplace {base_laplace:.1f} ms, "
        f"rng.standard_normal {base_normal:.1f} ms):"
    )
    mechanisms = {
        "FisherOptimal(0.1, a=1)": FisherOptimal(0.1, 1.0),
        "FisherOptimal(0.005, a=1) harmonic": FisherOptimal(0.005, 1.0),
        "FisherOptimal(1.0, a=1) raised cosine": FisherOptimal(1.0, 1.0),
        "FisherOptimal(0.1) unbounded": FisherOptimal(0.1),
        "Laplace(1, 1)": Laplace(1.0, 1.0),
        "Gaussian(1, ε=1, δ=1e-6)": Gaussian(1.0, epsilon=1.0, delta=1e-6),
    }
    for name, mech in mechanisms.items():
        ms = best_ms(lambda mech=mech: mech.sample(rng, N))
        fisher = name.startswith("FisherOptimal")
        flag = ("ok" if ms < DRAW_TARGET_MS else "SLOW") if fisher else ""
        ok &= ms < DRAW_TARGET_MS or not fisher
        print(
            f"  {name:<40} {ms:7.2f}   ×{ms / base_laplace:5.2f} laplace"
            f"   ×{ms / base_normal:5.2f} normal  {flag}"
        )
    box = FisherOptimalBox(0.3, (0.5, 1.0, 2.0))
    ms = best_ms(lambda: box.sample(rng, N // 3))
    print(f"  {'FisherOptimalBox 3-D, 10^6/3 vectors':<40} {ms:7.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
