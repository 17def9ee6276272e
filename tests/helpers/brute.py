"""Brute-force reference distributions, written from the papers' definitions only.

Nothing here imports the code under test: the output distributions are enumerated configuration by
configuration (small n), or integrated numerically (the AboveThreshold walk).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats


def edges(x, a, b):
    return [a, *sorted(min(max(v, a), b) for v in x), b]


def exp_mech_config_logweights(x, a, b, levels, eps, delta):
    """log of ∫ exp(ε·u(o)/(2Δ)) over ordered outputs o whose j-th entry lies in interval i_j.

    u(o) = -Σ_p |#{x in (o_{p-1}, o_p]} - (q_p - q_{p-1})·n| (Gillenwater et al. 2021; m = 1 is
    Smith's utility up to the constant |...| of the last piece, which equals the first's).
    Volume of k ordered points in one interval of width w: w^k / k!.
    """
    n = len(x)
    e = edges(x, a, b)
    widths = [e[i + 1] - e[i] for i in range(n + 1)]
    qs = [0.0, *levels, 1.0]
    out = {}
    for conf in itertools.combinations_with_replacement(range(n + 1), len(levels)):
        counts = [conf[0]] + [conf[j] - conf[j - 1] for j in range(1, len(conf))] + [n - conf[-1]]
        score = -sum(abs(cnt - (qs[p + 1] - qs[p]) * n) for p, cnt in enumerate(counts))
        logw = eps / (2 * delta) * score
        for i in set(conf):
            k = conf.count(i)
            logw += -math.inf if widths[i] == 0 else k * math.log(widths[i]) - math.lgamma(k + 1)
        out[conf] = logw
    return out


def normalise(logw: dict) -> dict:
    vals = np.array(list(logw.values()))
    top = vals.max()
    logz = top + math.log(np.exp(vals - top).sum())
    return {k: v - logz for k, v in logw.items()}


def exp_mech_score(x, a, b, levels, o):
    """u(o) for an ordered output tuple o, counting the clipped data directly."""
    n = len(x)
    qs = [0.0, *levels, 1.0]
    cuts = [-math.inf, *o, math.inf]
    clipped = [min(max(v, a), b) for v in x]
    score = 0.0
    for p in range(len(levels) + 1):
        cnt = sum(1 for v in clipped if cuts[p] < v <= cuts[p + 1])
        score -= abs(cnt - (qs[p + 1] - qs[p]) * n)
    return score


def log_normaliser(logw: dict) -> float:
    vals = np.array(list(logw.values()))
    top = vals.max()
    return float(top + math.log(np.exp(vals - top).sum()))


def cell_midpoints(xs_union, a, b):
    pts = sorted(set([a, b, *[min(max(v, a), b) for v in xs_union]]))
    return [(lo + hi) / 2 for lo, hi in itertools.pairwise(pts)]


def max_log_ratio_exp_mech(x1, x2, a, b, levels, eps, delta1, delta2):
    """max over output cells of |log density_1 − log density_2| (densities are cell-constant)."""
    z1 = log_normaliser(exp_mech_config_logweights(x1, a, b, levels, eps, delta1))
    z2 = log_normaliser(exp_mech_config_logweights(x2, a, b, levels, eps, delta2))
    mids = cell_midpoints([*x1, *x2], a, b)
    worst = 0.0
    for o in itertools.combinations_with_replacement(mids, len(levels)):
        d1 = eps / (2 * delta1) * exp_mech_score(x1, a, b, levels, o) - z1
        d2 = eps / (2 * delta2) * exp_mech_score(x2, a, b, levels, o) - z2
        worst = max(worst, abs(d1 - d2))
    return worst


def above_threshold_stop_probs(counts, threshold, scale, n_buckets, noise="laplace"):
    """P(first k in 0..n_buckets-1 with counts[k] + Z_k > threshold + Z_T), then P(no stop).

    Z_T, Z_k i.i.d. Laplace(scale), or exponential with mean ``scale`` (``noise="exponential"``,
    density e^(-z/scale)/scale on z >= 0). Integrates over the noisy threshold T: the integrand is
    smooth between the kinks at the counts and the threshold (where the exponential density and
    distribution functions jump or bend), so Gauss-Legendre on sub-intervals no wider than the
    noise scale is accurate to ~1e-12.
    """
    lap = stats.laplace(scale=scale) if noise == "laplace" else stats.expon(scale=scale)
    counts = np.asarray(counts[:n_buckets], dtype=float)
    kinks = np.unique(np.append(counts, threshold))
    knots = np.concatenate(([kinks[0] - 80 * scale], kinks, [kinks[-1] + 80 * scale]))
    nodes, weights = np.polynomial.legendre.leggauss(40)
    ts, ws = [], []
    for lo, hi in itertools.pairwise(knots):
        pieces = max(1, math.ceil((hi - lo) / scale))
        for p in range(pieces):
            a = lo + (hi - lo) * p / pieces
            b = lo + (hi - lo) * (p + 1) / pieces
            ts.append((b - a) / 2 * nodes + (a + b) / 2)
            ws.append((b - a) / 2 * weights)
    t = np.concatenate(ts)
    w = np.concatenate(ws) * lap.pdf(t - threshold)
    below = lap.cdf(t[:, None] - counts[None, :])  # P(count_k + Z_k <= T)
    survive = np.cumprod(np.column_stack((np.ones_like(t), below)), axis=1)
    stop_here = survive[:, :-1] * (1.0 - below)
    probs = np.append(w @ stop_here, w @ survive[:, -1])
    return probs


def chi_square_pvalue(observed_counts, expected_probs, min_expected=5.0):
    """Pearson chi-square; cells with small expectation pooled into one."""
    observed = np.asarray(observed_counts, dtype=float)
    expected = np.asarray(expected_probs, dtype=float) * observed.sum()
    small = expected < min_expected
    if small.any():
        observed = np.append(observed[~small], observed[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
        if expected[-1] == 0:
            assert observed[-1] == 0, "a zero-probability outcome was drawn"
            observed, expected = observed[:-1], expected[:-1]
    return stats.chisquare(observed, expected).pvalue


def pq_log_density(x, a, b, q, eps, delta, v):
    """Smith's PrivateQuantile density at v: ∝ exp(−ε/(2Δ)·|#{x <= v} − q·n|) on [a, b]."""
    n = len(x)
    e = edges(x, a, b)
    logw = []
    for i in range(n + 1):
        width = e[i + 1] - e[i]
        if width > 0:
            logw.append(math.log(width) - eps / (2 * delta) * abs(i - q * n))
    top = max(logw)
    logz = top + math.log(sum(math.exp(v_ - top) for v_ in logw))
    count = sum(1 for x_ in x if min(max(x_, a), b) <= v)
    return -eps / (2 * delta) * abs(count - q * n) - logz
