"""Noisy local MWU releases: U_l + w_l with the law of w_l; every test's p-value from the exact
law of normal + noise (the level itself: tests/shared/test_mwu_noisy_level.py, slow).

p-value references are independent of shared.noisy_null: adaptive quadrature and partial
fractions (tests/helpers/noisy_reference.py).
"""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from shared.mechanisms import FisherOptimal, FisherOptimalBox, Gaussian, Laplace
from shared.mwu import (
    MannWhitneyResult,
    fisher_test,
    mann_whitney,
    released_result,
    sum_test,
    weighted_coefficients,
    weighted_test,
)
from shared.noisy_null import NoiseLaw, NoisyNormal
from shared.protocol import MWUNoise, MWURelease
from tests.helpers import noisy_reference as ref


def _data(seed, n=30, m=40, shift=0.2):
    g = np.random.default_rng(seed)
    return g.normal(size=n), g.normal(shift, size=m)


def test_noisy_release_is_u_plus_one_draw():
    x, y = _data(1)
    noise = Laplace(epsilon=1.0, sensitivity=2 * max(x.size, y.size))  # U's swap sensitivity
    clean = mann_whitney(x, y)
    noisy = mann_whitney(x, y, noise=noise, rng=np.random.default_rng(5))
    w = noise.sample(np.random.default_rng(5), 1)[0]
    assert noisy.statistic == clean.statistic + w
    assert noisy.variance == clean.variance
    assert noisy.noise_variance == noise.variance == 2 * 80.0**2
    assert noisy.noise == NoiseLaw.laplace(80.0)
    assert noisy.total_variance == clean.variance + noise.variance
    z = (clean.statistic + w) / math.sqrt(clean.variance + noise.variance)
    assert noisy.zstatistic == pytest.approx(z, rel=1e-12)
    # the p-value: U + w under N(0, V) + Laplace(80), not z under N(0, 1)
    sigma = math.sqrt(clean.variance)
    want = 2 * ref.normal_laplace_sf(abs(noisy.statistic), sigma, 80.0)
    assert noisy.pvalue == pytest.approx(want, rel=1e-11)
    assert noisy.pvalue != pytest.approx(2 * stats.norm.sf(abs(z)), rel=1e-3)
    assert clean.noise_variance == 0.0 and clean.noise is None
    assert noisy.null_law == NoisyNormal(clean.variance, (NoiseLaw.laplace(80.0),))


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_local_p_value_for_each_alternative(alternative):
    # a release far in the upper tail: "less" (U large) small, "greater" near 1
    r = released_result(900.0, 2500.0, 30, 40, NoiseLaw.laplace(200.0), alternative)
    upper = ref.normal_laplace_sf(900.0, 50.0, 200.0)
    want = {"less": upper, "greater": 1 - upper, "two-sided": 2 * upper}[alternative]
    assert r.pvalue == pytest.approx(want, rel=1e-11)


def test_noisy_release_refusals():
    x, y = _data(2)
    with pytest.raises(ValueError, match=r"`rng`.*required when `noise`"):
        mann_whitney(x, y, noise=Laplace(1.0, 80.0))
    with pytest.raises(TypeError, match="`rng` must be a numpy"):
        mann_whitney(x, y, noise=Laplace(1.0, 80.0), rng=np.random.RandomState(0))
    with pytest.raises(ValueError, match="`noise` must be one-dimensional"):
        mann_whitney(x, y, noise=FisherOptimalBox(1.0, (1.0, 1.0)), rng=np.random.default_rng(0))

    @dataclasses.dataclass(frozen=True)
    class Lawless:  # a mechanism that does not say what law it draws from
        dim: int = 1
        variance: float = 1.0
        guarantee: object = None

        def sample(self, rng, size):
            return rng.normal(size=size)

    with pytest.raises(ValueError, match="does not expose its law"):
        mann_whitney(x, y, noise=Lawless(), rng=np.random.default_rng(0))  # type: ignore[arg-type]
    release = mann_whitney(x, y)
    with pytest.raises(ValueError, match="noise variance must be >= 0"):
        sum_test([dataclasses.replace(release, noise_variance=-1.0)])
    with pytest.raises(ValueError, match="center 0 states a noise variance but no noise law"):
        sum_test([dataclasses.replace(release, noise_variance=4.0)])
    noisy = dataclasses.replace(release, noise_variance=8.0, noise=NoiseLaw.laplace(2.0))
    with pytest.raises(ValueError, match=r"center 1's noise_variance .* is not the variance"):
        fisher_test([noisy, dataclasses.replace(noisy, noise_variance=5.0)])


# --- the federated tests with noise ---------------------------------------------------------------


SIZES = [(30, 40), (50, 20), (25, 25)]


def _noisy_centers(mechs, seed=3, shift=0.1, method="asymptotic"):
    # the normal + noise law asked for: at N = 50 the default is U's exact law + the noise
    # (tests/shared/test_mwu_exact.py)
    g = np.random.default_rng(seed)
    return [mann_whitney(g.normal(size=n), g.normal(shift, size=m), noise=mech, rng=g,
                         method=method)
            for (n, m), mech in zip(SIZES, mechs, strict=True)]


def test_federated_statistics_keep_the_inflated_variance():
    mechs = [Laplace(0.5, 80.0), Gaussian(100.0, rho=0.1), FisherOptimal(4000.0, 150.0)]
    parts = _noisy_centers(mechs)
    u = np.array([p.statistic for p in parts])
    v = np.array([p.variance + mech.variance for p, mech in zip(parts, mechs, strict=True)])
    z_sum = u.sum() / math.sqrt(v.sum())
    assert sum_test(parts).statistic == pytest.approx(z_sum, rel=1e-12)
    w = np.array([n * m for n, m in SIZES]) / np.sqrt(v)
    z_w = (w * u / np.sqrt(v)).sum() / math.sqrt((w**2).sum())
    weighted = weighted_test(parts)
    assert weighted.statistic == pytest.approx(z_w, rel=1e-12)
    assert [p.weight for p in weighted.parts] == pytest.approx(w, rel=1e-12)
    assert weighted_coefficients(parts) == pytest.approx(w / np.sqrt(v) / math.sqrt(w @ w))
    assert [p.variance for p in weighted.parts] == pytest.approx(v, rel=1e-12)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_sum_and_weighted_p_values_from_laplace_partial_fractions(alternative):
    mechs = [Laplace(0.5, 80.0), Laplace(0.3, 100.0), Laplace(1.0, 50.0)]  # b = 160, 333, 50
    parts = _noisy_centers(mechs, seed=8, shift=0.4)
    v = np.array([p.variance for p in parts])
    scales = [m.scale for m in mechs]

    def p_of(upper_tail, t):
        up = upper_tail(t)
        return {"less": up, "greater": 1 - up, "two-sided": 2 * upper_tail(abs(t))}[alternative]

    t_sum = sum(p.statistic for p in parts)
    s = sum_test(parts, alternative=alternative)
    want = p_of(lambda t: ref.laplace_sum_sf(t, math.sqrt(v.sum()), scales), t_sum)
    assert s.pvalue == pytest.approx(want, rel=1e-9)
    # weighted: Z_w = Σ c_l (U_l + w_l), normal part Σ c_l² V_l, noises c_l·w_l
    c = weighted_coefficients(parts)
    wt = weighted_test(parts, alternative=alternative)
    assert wt.statistic == pytest.approx(float(c @ [p.statistic for p in parts]), rel=1e-12)
    sigma = math.sqrt(float(c**2 @ v))
    want = p_of(lambda t: ref.laplace_sum_sf(t, sigma, list(c * scales)), wt.statistic)
    assert wt.pvalue == pytest.approx(want, rel=1e-9)
    # each part's p-value is its center's own, from its exact law
    for part, p, b in zip(s.parts, parts, scales, strict=True):
        own = p_of(lambda t, p=p, b=b: ref.normal_laplace_sf(t, math.sqrt(p.variance), b),
                   p.statistic)
        assert part.pvalue == pytest.approx(min(1.0, own), rel=1e-10)


def test_mixed_noise_laws_against_nested_quadrature():
    # Laplace, Gaussian and raised-cosine centers: the sum is N(0, ΣV + σ_G²) + Laplace + cosine
    mechs = [Laplace(0.5, 80.0), Gaussian(100.0, rho=0.1), FisherOptimal(4000.0, 150.0)]
    assert mechs[2].kind == "raised_cosine"
    parts = _noisy_centers(mechs, seed=4, shift=0.5)
    t = sum(p.statistic for p in parts)
    sigma = math.sqrt(sum(p.variance for p in parts) + mechs[1].variance)
    upper = ref.bounded_sf(abs(t), sigma, ref.raised_cosine_pdf(150.0), 150.0,
                           laplace=(mechs[0].scale,))
    assert sum_test(parts).pvalue == pytest.approx(2 * upper, rel=1e-8)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_fisher_combines_exact_center_p_values(alternative):
    mechs = [Laplace(0.5, 80.0), Laplace(0.2, 100.0), Gaussian(100.0, rho=0.1)]
    parts = _noisy_centers(mechs, seed=6, shift=0.3)
    (u1, v1), (u2, v2), (u3, v3) = ((p.statistic, p.variance) for p in parts)
    upper = np.array([
        ref.normal_laplace_sf(u1, math.sqrt(v1), mechs[0].scale),
        ref.normal_laplace_sf(u2, math.sqrt(v2), mechs[1].scale),
        stats.norm.sf(u3 / math.sqrt(v3 + mechs[2].variance)),
    ])
    t_less, t_greater = -2 * np.log(upper).sum(), -2 * np.log1p(-upper).sum()
    p_less, p_greater = stats.chi2.sf(t_less, 6), stats.chi2.sf(t_greater, 6)
    r = fisher_test(parts, alternative=alternative)
    assert r.df == 6
    if alternative == "less":
        assert (r.statistic, r.pvalue) == (pytest.approx(t_less, rel=1e-10),
                                           pytest.approx(p_less, rel=1e-9))
    elif alternative == "greater":
        assert (r.statistic, r.pvalue) == (pytest.approx(t_greater, rel=1e-10),
                                           pytest.approx(p_greater, rel=1e-9))
    else:
        assert r.pvalue == pytest.approx(min(1, 2 * min(p_less, p_greater)), rel=1e-9)
        assert r.statistic == pytest.approx(t_less if p_less <= p_greater else t_greater)


def test_noisy_and_exact_centers_together():
    # one center releases U exactly: its V joins the normal part, its p-value stays normal
    g = np.random.default_rng(9)
    exact = mann_whitney(g.normal(size=40), g.normal(0.2, size=30))
    noisy = mann_whitney(g.normal(size=30), g.normal(0.2, size=40), noise=Laplace(0.5, 80.0),
                         rng=g)
    s = sum_test([exact, noisy])
    t = exact.statistic + noisy.statistic
    want = 2 * ref.normal_laplace_sf(abs(t), math.sqrt(exact.variance + noisy.variance), 160.0)
    assert s.pvalue == pytest.approx(want, rel=1e-10)
    assert s.parts[0].pvalue == exact.pvalue  # the normal p-value, bit for bit
    assert s.parts[1].pvalue == pytest.approx(noisy.pvalue, rel=1e-14)


def test_without_noise_the_p_values_are_the_normal_ones_bit_for_bit():
    g = np.random.default_rng(12)
    data = [(g.normal(size=n), g.normal(0.2, size=m)) for n, m in SIZES]
    # the normal law asked for (at N = 50 the default is U's exact law: tests/shared/test_mwu_exact)
    parts = [mann_whitney(x, y, method="asymptotic") for x, y in data]
    z = np.array([p.zstatistic for p in parts])
    for alternative in ("two-sided", "less", "greater"):
        f = fisher_test(parts, alternative=alternative)
        local = [mann_whitney(x, y, alternative=alternative, method="asymptotic").pvalue
                 for x, y in data]
        assert [c.pvalue for c in f.parts] == local
        assert f.df == 6 and sum_test(parts).df is None
    assert fisher_test(parts, alternative="less").statistic == pytest.approx(
        -2 * np.log(stats.norm.sf(z)).sum(), rel=1e-13)
    assert all(p.null_law == NoisyNormal(p.variance) for p in parts)
    assert MannWhitneyResult(0.0, 0.0, 0.0, 1.0, 3, 3).null_law is None


# --- the wire -------------------------------------------------------------------------------------


def test_wire_release_carries_the_noise_law():
    parts = _noisy_centers([Laplace(0.5, 80.0), Gaussian(100.0, rho=0.1), Laplace(1.0, 60.0)],
                           method="auto")  # the (25, 25) center: U's exact law + noise
    assert [p.null for p in parts] == ["normal+noise", "normal+noise", "exact+noise"]
    wired = [MWURelease.model_validate_json(MWURelease.from_result(p).model_dump_json())
             for p in parts]
    assert wired[0].noise == MWUNoise(kind="laplace", scale=160.0)
    assert wired[1].noise == MWUNoise(kind="gaussian", scale=parts[1].noise.scale)
    for test in (sum_test, weighted_test, fisher_test):
        a = test(parts, alternative="greater")
        b = test([w.to_result("greater") for w in wired], alternative="greater")
        assert a.statistic == b.statistic and a.pvalue == b.pvalue
    with pytest.raises(ValueError, match="only Laplace or Gaussian noise travels"):
        MWURelease.from_result(_noisy_centers([FisherOptimal(4000.0, 150.0)] * 3)[0])


def test_wire_release_noise_must_agree_with_its_variance():
    base = {"statistic": 10.0, "variance": 100.0, "n_x": 5, "n_y": 5}
    # parsing accepts a disagreement (the coordinator names the center implausible) ...
    odd = MWURelease.model_validate({**base, "noise_variance": 3.0,
                                     "noise": {"kind": "laplace", "scale": 2.0}})
    with pytest.raises(ValueError, match="noise_variance 3 is not the variance"):
        odd.to_result()
    silent = MWURelease.model_validate({**base, "noise_variance": 8.0, "noise": None})
    with pytest.raises(ValueError, match="states no noise law"):
        silent.noise_law()
    # ... and a payload from before the field is read as Laplace, the protocol's only noise
    legacy = MWURelease.model_validate({**base, "noise_variance": 8.0})
    assert legacy.noise == MWUNoise(kind="laplace", scale=2.0)
    assert legacy.to_result().noise == NoiseLaw.laplace(2.0)
    assert MWURelease.model_validate({**base}).noise is None
    with pytest.raises(ValueError, match="greater than 0"):
        MWURelease.model_validate({**base, "noise": {"kind": "laplace", "scale": 0.0}})
    with pytest.raises(ValueError, match="'laplace' or 'gaussian'"):
        MWURelease.model_validate({**base, "noise": {"kind": "cosine", "scale": 1.0}})
