"""Cochran's Q, I² and its Q-profile interval, DerSimonian-Laird τ²: against metafor (its
published BCG example and confint values pasted with the R call), hand computations written
independently here, and the project's probabilistic index."""

import functools

import numpy as np
import pytest
from scipy import stats

from shared.effects import newcombe_variance
from shared.heterogeneity import (
    cochran_q,
    i_squared_interval,
    index_heterogeneity,
    q_profile_interval,
)
from shared.mwu import mann_whitney, released_result
from shared.noisy_null import NoiseLaw

# metafor's dat.bcg (Colditz et al. 1994): tpos, tneg, cpos, cneg per trial.
BCG = np.array([
    [4, 119, 11, 128], [6, 300, 29, 274], [3, 228, 11, 209], [62, 13536, 248, 12619],
    [33, 5036, 47, 5761], [180, 1361, 372, 1079], [8, 2537, 10, 619],
    [505, 87886, 499, 87892], [29, 7470, 45, 7232], [17, 1699, 65, 1600],
    [186, 50448, 141, 27197], [5, 2493, 3, 2338], [27, 16886, 29, 17825],
], dtype=float)


def test_against_metafor_bcg_dl():
    """escalc(measure = "RR", ai = tpos, bi = tneg, ci = cpos, di = cneg, data = dat.bcg);
    rma(yi, vi, method = "DL") prints τ² = 0.3088, I² = 92.12 %, Q(df = 12) = 152.2330,
    estimate −0.7141 (SE 0.1787), 95 % CI −1.0644 to −0.3638; method = "FE": −0.4303 (SE
    0.0405). Published to 4 decimals: tolerance 6e-5 (half a unit in the last place + rounding)."""
    a, b, c, d = BCG.T
    yi = np.log(a / (a + b)) - np.log(c / (c + d))
    vi = 1 / a - 1 / (a + b) + 1 / c - 1 / (c + d)
    r = cochran_q(yi, vi)
    assert r.df == 12
    assert r.statistic == pytest.approx(152.2330, abs=6e-5)
    assert r.tau_squared == pytest.approx(0.3088, abs=6e-5)
    assert 100 * r.i_squared == pytest.approx(92.12, abs=6e-3)
    assert r.random == pytest.approx(-0.7141, abs=6e-5)
    assert r.random_se == pytest.approx(0.1787, abs=6e-5)
    assert r.random_interval == pytest.approx((-1.0644, -0.3638), abs=6e-5)
    assert r.fixed == pytest.approx(-0.4303, abs=6e-5)
    assert r.fixed_se == pytest.approx(0.0405, abs=6e-5)


def hand(y, v):
    """The textbook formulas, term by term (Borenstein et al. 2009, ch. 16)."""
    k = len(y)
    w = [1 / vi for vi in v]
    sw = sum(w)
    fe = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    q = sum(wi * (yi - fe) ** 2 for wi, yi in zip(w, y, strict=True))
    c = sw - sum(wi * wi for wi in w) / sw
    tau2 = max(0.0, (q - (k - 1)) / c)
    ws = [1 / (vi + tau2) for vi in v]
    re = sum(wi * yi for wi, yi in zip(ws, y, strict=True)) / sum(ws)
    i2 = max(0.0, (q - (k - 1)) / q)
    return q, i2, tau2, fe, re, (1 / sum(ws)) ** 0.5


def newcombe_by_hand(theta, n, m):
    """Newcombe (2006), Method 5: θ(1 − θ)/(nm)·[1 + (N/2 − 1)((1 − θ)/(2 − θ) + θ/(1 + θ))]."""
    return theta * (1 - theta) / (n * m) * (
        1 + ((n + m) / 2 - 1) * ((1 - theta) / (2 - theta) + theta / (1 + theta)))


def pooled_by_iteration(theta, sizes, extra=None):
    """θ̄ = Σ θ̂_c/v_c(θ̄) / Σ 1/v_c(θ̄) by fixed-point iteration from the plain mean (another
    route to the root than the code's bracketing)."""
    extra = extra or [0.0] * len(theta)
    t = sum(theta) / len(theta)
    for _ in range(500):
        w = [1 / (newcombe_by_hand(t, n, m) + e) for (n, m), e in zip(sizes, extra, strict=True)]
        new = sum(wi * th for wi, th in zip(w, theta, strict=True)) / sum(w)
        if abs(new - t) < 1e-15:
            break
        t = new
    assert abs(new - t) < 1e-14
    return new


def test_index_heterogeneity_against_hand_computation():
    """Variances at the pooled θ̄ (its own fixed-effect estimate), then Q, I², τ², FE and RE by
    the textbook formulas."""
    g = np.random.default_rng(7)
    centers = []
    for n, m, shift in ((20, 25, 0.1), (40, 35, 0.8), (15, 12, -0.3), (60, 50, 0.5)):
        centers.append(mann_whitney(np.round(g.normal(size=n), 1),
                                    np.round(g.normal(shift, size=m), 1)))
    r = index_heterogeneity(centers)
    theta = [0.5 + c.statistic / (2 * c.n_x * c.n_y) for c in centers]
    sizes = [(c.n_x, c.n_y) for c in centers]
    at = pooled_by_iteration(theta, sizes)
    var = [newcombe_by_hand(at, n, m) for n, m in sizes]
    q, i2, tau2, fe, re, re_se = hand(theta, var)
    assert r.variance_at == pytest.approx(at, rel=1e-12)
    assert r.fixed == pytest.approx(at, rel=1e-12)  # the estimate is its weights' θ
    assert r.estimates == pytest.approx(theta, rel=1e-12)
    assert r.variances == pytest.approx(var, rel=1e-10)
    assert (r.statistic, r.i_squared, r.tau_squared) == pytest.approx((q, i2, tau2), rel=1e-9)
    assert (r.fixed, r.random, r.random_se) == pytest.approx((fe, re, re_se), rel=1e-9)
    assert r.pvalue == pytest.approx(stats.chi2.sf(q, 3), rel=1e-9)
    assert r.tau_squared > 0 and 0 < r.i_squared < 1


def test_equal_sizes_pool_at_the_mean():
    """With equal n·m (and no noise) every center has the same V(θ̄), so θ̄ is the plain mean."""
    g = np.random.default_rng(11)
    centers = [mann_whitney(g.normal(size=12), g.normal(s, size=12)) for s in (0.0, 0.5, 1.0)]
    r = index_heterogeneity(centers)
    assert r.variance_at == pytest.approx(np.mean(r.estimates), rel=1e-12)
    assert len(set(r.variances)) == 1


def test_homogeneous_centers_give_zero_tau_and_i2():
    r = cochran_q([0.6, 0.6, 0.6], [0.01, 0.02, 0.03])
    assert r.statistic == 0 and r.i_squared == 0 and r.tau_squared == 0
    assert r.fixed == pytest.approx(0.6) and r.random == pytest.approx(0.6)


def test_noise_adds_its_share_of_variance():
    law = NoiseLaw.laplace(10.0)
    noisy = released_result(30.0, 20 * 25 * 46 / 3, 20, 25, law)
    plain = released_result(-40.0, 30 * 30 * 61 / 3, 30, 30)
    r = index_heterogeneity([noisy, plain])
    theta = [0.5 + 30 / (2 * 500), 0.5 - 40 / (2 * 900)]
    share = law.variance / 1000**2
    at = pooled_by_iteration(theta, [(20, 25), (30, 30)], [share, 0.0])
    assert r.variance_at == pytest.approx(at, rel=1e-12)
    assert r.variances[0] == pytest.approx(newcombe_by_hand(at, 20, 25) + share, rel=1e-10)
    assert r.variances[1] == pytest.approx(newcombe_by_hand(at, 30, 30), rel=1e-10)


def test_refusals():
    with pytest.raises(ValueError, match="at least two centers"):
        cochran_q([0.5], [0.1])
    with pytest.raises(ValueError, match="center 1's variance"):
        cochran_q([0.5, 1.0], [0.1, 0.0])
    with pytest.raises(ValueError, match="one entry per center"):
        cochran_q([0.5, 0.6], [0.1])
    # every center with θ̂ = 1: θ̄ = 1, where the variance is 0
    separated = mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    with pytest.raises(ValueError, match="center 0's variance"):
        index_heterogeneity([separated, mann_whitney([1.0, 2.0], [7.0, 8.0, 9.0])])


def hand_i2_interval(q, k, z=1.959963984540054):
    """Higgins & Thompson (2002), Appendix, written out: SE(ln H) by their two cases, the
    interval of ln H about ln max(H, 1), each end of H read as at least 1, I² = 1 − 1/H²."""
    h = (q / (k - 1)) ** 0.5
    if q > k:
        se = 0.5 * (np.log(q) - np.log(k - 1)) / ((2 * q) ** 0.5 - (2 * k - 3) ** 0.5)
    else:
        se = (1 / (2 * (k - 2)) * (1 - 1 / (3 * (k - 2) ** 2))) ** 0.5
    ends = [max(np.exp(np.log(max(h, 1.0)) + s * z * se), 1.0) for s in (-1, 1)]
    return tuple(1 - 1 / e**2 for e in ends)


@pytest.mark.parametrize("q, k", [(152.2330, 13), (3.0, 3), (7.5, 4), (0.4, 5), (2.5, 2),
                                  (40.0, 2), (5.0, 5)])
def test_i_squared_interval_against_hand_computation(q, k):
    assert i_squared_interval(q, k - 1) == pytest.approx(hand_i2_interval(q, k), rel=1e-12)


def test_higgins_thompson_interval_on_the_bcg_data():
    """BCG (13 trials, Q = 152.233): Higgins & Thompson's I² = 92.12 % in [88.32 %, 94.68 %]
    (the function is kept; the result reports the Q-profile interval)."""
    a, b, c, d = BCG.T
    r = cochran_q(np.log(a / (a + b)) - np.log(c / (c + d)),
                  1 / a - 1 / (a + b) + 1 / c - 1 / (c + d))
    lo, hi = i_squared_interval(r.statistic, r.df)
    assert (lo, hi) == pytest.approx((0.8832, 0.9468), abs=1e-4)
    assert lo < r.i_squared < hi


def test_i_squared_interval_edges():
    # Two centers with Q <= 2: Higgins & Thompson's SE of ln H is undefined (k − 2 = 0).
    assert i_squared_interval(1.5, 1) is None
    # Q below its df: I² = 0 and the interval starts at 0.
    lo, hi = i_squared_interval(0.5, 4)
    assert lo == 0 and 0 < hi < 1
    # A narrower level gives a narrower interval.
    wide, narrow = i_squared_interval(20.0, 5), i_squared_interval(20.0, 5, level=0.8)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
    with pytest.raises(ValueError, match="df >= 1"):
        i_squared_interval(3.0, 0)


def test_a_center_at_theta_one_is_weighed_at_the_pooled_theta():
    """θ̂ = 1 (one arm entirely above the other) has Newcombe's variance 0 at θ̂, but its
    variance is taken at θ̄ < 1: it gets a finite weight. Released with noise its variance adds
    the noise's share σ²/(2nm)²."""
    separated = mann_whitney(np.arange(10.0), np.arange(10.0) + 20)
    other = mann_whitney(np.arange(10.0), np.arange(10.0) + 3)
    r = index_heterogeneity([separated, other])
    assert r.estimates[0] == 1.0 and 0.5 < r.variance_at < 1
    assert r.variances[0] == pytest.approx(newcombe_by_hand(r.variance_at, 10, 10), rel=1e-10)
    law = NoiseLaw.laplace(5.0)
    noisy = released_result(separated.statistic, separated.variance, 10, 10, law)
    r = index_heterogeneity([noisy, other])
    assert r.variances[0] == pytest.approx(newcombe_by_hand(r.variance_at, 10, 10)
                                           + law.variance / (2 * 100) ** 2, rel=1e-10)


@pytest.mark.slow
@pytest.mark.parametrize("centers", [3, 10])
@pytest.mark.parametrize("size", [10, 20])
def test_q_level_under_homogeneity(centers, size):
    """Cochran's Q at α = .05 under homogeneity: L centers of n = m normal records, Y shifted
    by 0.5 SD everywhere (θ = Φ(0.5/√2) = .638), 2000 seeded replications (SE .0049): the
    rejection rate within .05 ± 4 SE. (With the variances at each θ̂_c it was .073-.195.)"""
    g = np.random.default_rng(1000 * centers + size)
    reps, rejected = 2000, 0
    for _ in range(reps):
        local = [mann_whitney(g.normal(size=size), g.normal(0.5, size=size),
                              method="asymptotic") for _ in range(centers)]
        rejected += index_heterogeneity(local).pvalue < 0.05
    rate = rejected / reps
    print(f"L = {centers}, n = m = {size}: {rate:.4f}")
    assert abs(rate - 0.05) < 4 * np.sqrt(0.05 * 0.95 / reps), rate


# metafor 3.8-1 (Debian's r-cran-metafor, R 4.2.2), the Q-profile interval with a tight root
# tolerance (its default uniroot tol, 1.2e-4, moves the 4th-5th digit):
#   f <- rma(yi, vi, method = "DL"); ci <- confint(f, control = list(tol = 1e-12))$random
#   ci[c("tau^2", "I^2(%)"), c("ci.lb", "ci.ub")]
# BCG: dat <- escalc(measure = "RR", ai = tpos, bi = tneg, ci = cpos, di = cneg,
#                    data = dat.bcg); yi = dat$yi, vi = dat$vi.
METAFOR_Q_PROFILE = [
    ("four", [0.62, 0.55, 0.71, 0.48], [0.0061, 0.0083, 0.0052, 0.0110],
     (0.0, 0.12659049266), (0.0, 0.94598061313)),
    ("homogeneous", [0.60, 0.64, 0.58], [0.010, 0.012, 0.009],
     (0.0, 0.0260705106593), (0.0, 0.71763097048)),
    ("two", [0.52, 0.81], [0.004, 0.006],
     (0.00337001445339, 42.8127602417), (0.402629466431, 0.999883226026)),
    ("ten", [0.55, 0.60, 0.72, 0.41, 0.66, 0.58, 0.49, 0.77, 0.63, 0.52],
     [0.004, 0.006, 0.005, 0.008, 0.003, 0.007, 0.009, 0.004, 0.006, 0.005],
     (0.0, 0.0329030307571), (0.0, 0.863458052217)),
]


def bcg_log_rr():
    a, b, c, d = BCG.T
    return np.log(a / (a + b)) - np.log(c / (c + d)), 1 / a - 1 / (a + b) + 1 / c - 1 / (c + d)


@pytest.mark.parametrize("name, y, v, tau2, i2", [
    ("bcg", *bcg_log_rr(), (0.119718361141, 1.11147908406), (0.819205745586, 0.976780749579)),
    *METAFOR_Q_PROFILE])
def test_q_profile_against_metafor(name, y, v, tau2, i2):
    """metafor's confint to its printed 12 digits, rel 1e-8 (both roots to ~1e-12)."""
    r = q_profile_interval(y, v)
    assert r.tau_squared == pytest.approx(tau2, rel=1e-8, abs=1e-14)
    assert r.i_squared == pytest.approx(i2, rel=1e-8, abs=1e-14)
    # the result reports it
    h = cochran_q(y, v)
    assert h.i_squared_interval == r.i_squared and h.tau_squared_interval == r.tau_squared


def q_gen_by_hand(tau2, y, v):
    w = [1 / (vi + tau2) for vi in v]
    mean = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sum(w)
    return sum(wi * (yi - mean) ** 2 for wi, yi in zip(w, y, strict=True))


def bisect_decreasing(f, target, hi=1e6):
    """τ² with f(τ²) = target for f decreasing, by plain bisection (0 if f(0) <= target)."""
    if f(0.0) <= target:
        return 0.0
    lo = 0.0
    for _ in range(400):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > target else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_q_profile_against_bisection(level):
    """Random centers: the ends solve Q_gen(τ²) = χ²_{L−1} quantiles, found here by bisection
    on Q_gen written out; I² = τ²/(τ² + s²) with s² from its formula."""
    g = np.random.default_rng(int(level * 100))
    for L in (2, 3, 7, 25):
        v = g.uniform(0.002, 0.02, size=L)
        y = g.normal(0.6, np.sqrt(v + 0.01))
        r = q_profile_interval(y, v, level=level)
        a = 1 - level
        f = functools.partial(q_gen_by_hand, y=y, v=v)
        ends = (bisect_decreasing(f, stats.chi2.isf(a / 2, L - 1)),
                bisect_decreasing(f, stats.chi2.ppf(a / 2, L - 1)))
        assert r.tau_squared == pytest.approx(ends, rel=1e-9, abs=1e-13)
        w = 1 / v
        s2 = (L - 1) * w.sum() / (w.sum() ** 2 - (w * w).sum())
        assert r.i_squared == pytest.approx(tuple(t / (t + s2) for t in ends), rel=1e-9,
                                            abs=1e-13)


def test_q_profile_edges():
    # identical estimates: Q_gen = 0 everywhere, the interval is [0, 0]
    r = q_profile_interval([0.6, 0.6, 0.6], [0.01, 0.02, 0.03])
    assert r.tau_squared == (0.0, 0.0) and r.i_squared == (0.0, 0.0)
    # a narrower level, a narrower interval
    y, v = bcg_log_rr()
    wide, narrow = q_profile_interval(y, v), q_profile_interval(y, v, level=0.8)
    assert wide.tau_squared[0] < narrow.tau_squared[0] < narrow.tau_squared[1] \
        < wide.tau_squared[1]
    with pytest.raises(ValueError, match="at least two centers"):
        q_profile_interval([0.5], [0.1])
    with pytest.raises(ValueError, match="variance > 0"):
        q_profile_interval([0.5, 0.6], [0.1, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize("centers, i2", [(10, 0.75), (20, 0.5), (5, 0.5)])
def test_i_squared_interval_coverage(centers, i2):
    """Coverage of the reported 95 % I² interval under the random-effects model
    θ̂_c ~ N(θ, v_c + τ²), v_c the index's variances for centers of 10-60 records per arm, τ² set
    so that τ²/(τ² + s²) = I²; 2000 seeded replications (SE .0049): within .95 ± 4 SE.
    Higgins & Thompson's interval is printed beside it (it undercovers here)."""
    g = np.random.default_rng(centers * 100 + int(i2 * 100))
    sizes = g.integers(10, 61, size=(centers, 2)).astype(float)
    theta = 0.65
    n, m = sizes[:, 0], sizes[:, 1]
    v = newcombe_variance(theta, n, m)
    w = 1 / v
    s2 = (centers - 1) * w.sum() / (w.sum() ** 2 - (w * w).sum())
    tau2 = i2 / (1 - i2) * s2
    reps, covered, ht = 2000, 0, 0
    for _ in range(reps):
        y = g.normal(theta, np.sqrt(v + tau2))
        r = cochran_q(y, v)
        lo, hi = r.i_squared_interval
        covered += lo <= i2 <= hi
        h = i_squared_interval(r.statistic, r.df)
        ht += h is not None and h[0] <= i2 <= h[1]
    print(f"L = {centers}, I² = {i2}: Q-profile {covered / reps:.4f}, "
          f"Higgins-Thompson {ht / reps:.4f}")
    assert abs(covered / reps - 0.95) < 4 * np.sqrt(0.95 * 0.05 / reps)
