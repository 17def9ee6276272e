"""The boxplot simulation's pieces (``shared.dp.simulate``): the laws, the seed's boxplot of a
sample, and one cell's rows (the full runs are ``fedstats simulate boxplot``)."""

import math

import numpy as np
import pytest

from shared.dp.simulate import METHODS, METRICS, errors, laws, run_cell, sample_box


@pytest.mark.parametrize("name", list(laws()))
def test_every_law_is_standardized(name: str) -> None:
    mean, var = laws()[name].stats(moments="mv")
    assert float(mean) == pytest.approx(0.0, abs=1e-9)
    assert float(var) == pytest.approx(1.0, rel=1e-9)


def test_sample_box_follows_the_seed_definition() -> None:
    # 1..100 and one far outlier: quartiles by numpy's linear rule, the upper whisker stops at
    # the fence's last point below it, and the outlier proportion counts the one point above.
    x = np.append(np.arange(1.0, 101.0), 1000.0)
    box = sample_box(x)
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert (box.q1, box.median, box.q3) == (q1, med, q3)
    assert box.lower == 1.0 and box.p_lower == 0.0
    assert box.upper == q3 + 1.5 * (q3 - q1)
    assert box.p_upper == pytest.approx(1 / 101)
    assert errors(box, box) == (0.0, 0.0, 0.0, 0.0)


def test_one_cell_gives_one_row_per_method_from_its_seed() -> None:
    population = sample_box(laws()["normal"].rvs(size=20_000, random_state=1))
    cell = ("normal", 1_000, 1.0, 2, 7, population)
    rows = run_cell(cell)
    assert [r["method"] for r in rows] == list(METHODS)
    for row in rows:
        assert (row["law"], row["n"], row["epsilon"], row["reps"]) == ("normal", 1_000, 1.0, 2)
        for metric in METRICS:
            assert math.isfinite(row[metric]) and row[metric] >= 0
    assert run_cell(cell) == rows  # the cell's seed fixes every draw and every noise
