"""The center's placement of limits between data (``center_agent.gate.gaps``; docs/privacy.md
§13): one keyed number per gap of the population, the one already released there if any."""

from __future__ import annotations

import secrets
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import func, select

from center_agent.db import Store, placed_blocks, placed_numbers
from center_agent.gate import gaps
from center_agent.gate.gaps import GapPoints
from center_agent.gate.keys import CenterKeys
from shared.binning import bin_groups
from shared.federation import refine_table

KEYS = CenterKeys("c", secrets.token_bytes(32), Ed25519PrivateKey.generate(), {})
VALUES = np.array([1.0, 2.0, 2.0, 3.5, 4.0, 7.0, 7.5, 9.0, 10.0, 12.0])


def placement(remembered: list[float] | None = None, keys: CenterKeys = KEYS) -> GapPoints:
    return GapPoints(keys, "x", [VALUES], np.sort(np.asarray(remembered or [], dtype=float)), 3)


def test_one_keyed_number_per_gap_whoever_asks() -> None:
    place = placement()
    below, above = np.array([2.0, 4.0, 9.0]), np.array([3.5, 7.0, 10.0])
    first = place(below, above)
    assert np.all((first > below) & (first < above))
    # Asked again, alone, in another order, or by another placement of the same key: the same.
    np.testing.assert_array_equal(place(below[::-1], above[::-1]), first[::-1])
    assert place(below[1:2], above[1:2])[0] == first[1]
    assert placement()(below, above).tolist() == first.tolist()
    # Another secret places other numbers; another variable too.
    other = CenterKeys("c", secrets.token_bytes(32), Ed25519PrivateKey.generate(), {})
    assert not np.any(placement(keys=other)(below, above) == first)
    assert not np.any(GapPoints(KEYS, "y", [VALUES], np.zeros(0), 3)(below, above) == first)


def test_a_gap_of_some_levels_lands_in_the_populations_gap_below_its_upper_value() -> None:
    """Two levels' values 2.0 and 7.0 (the population holds 3.5 and 4.0 between them): the
    limit goes in (4.0, 7.0), the one number that gap ever gets."""
    place = placement()
    wide = place(np.array([2.0]), np.array([7.0]))[0]
    assert 4.0 < wide < 7.0
    assert wide == place(np.array([4.0]), np.array([7.0]))[0]
    # Below a subset's smallest value 3.5: in (2.0, 3.5), not beyond the population.
    low = place(np.array([-np.inf]), np.array([3.5]))[0]
    assert 2.0 < low < 3.5 and low == place(np.array([2.0]), np.array([3.5]))[0]


def test_buffers_beyond_the_data() -> None:
    """Below the smallest value by (1/2 + u) times the mean gap of the K = 3 smallest records,
    above the largest likewise; the same buffer for every release."""
    place = placement()
    lo = place(np.array([-np.inf]), np.array([1.0]))[0]
    hi = place(np.array([12.0]), np.array([np.inf]))[0]
    assert 1.0 - 1.5 * 0.5 <= lo <= 1.0 - 0.5 * 0.5
    assert 12.0 + 0.5 * 1.5 <= hi <= 12.0 + 1.5 * 1.5
    table = bin_groups([VALUES], k=3, place=place)
    assert table.limits[0] == lo and table.limits[-1] == hi


def test_a_remembered_number_is_reused_in_its_gap() -> None:
    """A number released before (in an earlier epoch, when the gap was wider) is the gap's
    number; a gap without one gets its keyed number."""
    place = placement([5.0])
    out = place(np.array([4.0, 9.0]), np.array([7.0, 10.0]))
    assert out[0] == 5.0
    assert out[1] == placement()(np.array([9.0]), np.array([10.0]))[0]


def test_natural_limits_never_move_a_split() -> None:
    """A refinement inside one wide bin: with any natural lower (a raw value, one ulp below or
    above it, a split limit itself), the split limits are those of the refinement without it,
    less those at or below it."""
    place = placement()
    x = VALUES.repeat(2)
    base = refine_table([-np.inf, 100.0], x, k=3, place=place, lower="buffer")
    assert base.split_limits
    for lower in [0.5, 2.0, np.nextafter(2.0, 0), np.nextafter(2.0, 9), 7.0,
                  *base.split_limits]:
        viewed = refine_table([lower, 100.0], x, k=3, place=place, lower="natural")
        assert viewed.split_limits == [v for v in base.split_limits if v > lower]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_record_keeps_each_number_once(backend: str, tmp_path: Path,
                                       request: pytest.FixtureRequest) -> None:
    url = (f"sqlite:///{tmp_path / 'ledger.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_url"))
    store = Store(url)
    try:
        with store.engine.begin() as conn:
            gaps.record(conn, "d", "x", [1.5, -0.0, np.inf, 1.5])
            gaps.record(conn, "d", "x", [1.5, 0.1 + 0.2])
            gaps.record(conn, "d", "y", [7.0])
        with store.engine.connect() as conn:
            assert gaps.placed(conn, "d", "x").tolist() == [0.0, 0.1 + 0.2, 1.5]
            assert gaps.placed(conn, "d", "y").tolist() == [7.0]
            # One block per release that placed new numbers, each holding only its new ones.
            blocks = conn.execute(select(placed_blocks.c.numbers).where(
                placed_blocks.c.variable == "x").order_by(placed_blocks.c.id)).scalars().all()
            assert [np.frombuffer(b, "<f8").tolist() for b in blocks] == [[0.0, 1.5],
                                                                         [0.1 + 0.2]]
        # A ledger made before blocks holds one row per number: read with the blocks, exact.
        with store.engine.begin() as conn:
            conn.execute(placed_numbers.insert(), [
                {"dataset": "d", "variable": "x", "value": v.hex()} for v in (1.5, 2.0 / 3)])
            gaps.record(conn, "d", "x", [2.0 / 3, 9.0])
        with store.engine.connect() as conn:
            assert gaps.placed(conn, "d", "x").tolist() == [0.0, 0.1 + 0.2, 2.0 / 3, 1.5, 9.0]
    finally:
        store.close()


def test_ten_thousand_numbers_are_one_row_read_back_exactly(tmp_path: Path) -> None:
    """A fine table's limits (a 10^7-row variable has about 10^6) are one row, not one each."""
    store = Store(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    numbers = np.random.default_rng(3).normal(size=10_000)
    try:
        with store.engine.begin() as conn:
            gaps.record(conn, "d", "x", numbers.tolist())
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(placed_blocks)).scalar() == 1
            assert gaps.placed(conn, "d", "x").tobytes() == np.sort(numbers).tobytes()
    finally:
        store.close()


@pytest.mark.parametrize("seed", range(20))
def test_the_levels_place_what_their_pooled_values_place(seed: int) -> None:
    """A placement reads the population's levels where they lie: its gaps, buffers and numbers
    are, bit for bit, those of the levels pooled by a stable sort (0.0 and -0.0 included: the
    larger value below a point is the later level's, the smaller above the earlier's)."""
    rng = np.random.default_rng(seed)
    levels = [np.sort(rng.choice([-2.0, -0.0, 0.0, 0.5, 1.0, 3.0], size)
                      + rng.choice([0.0, 0.25], size))
              for size in rng.integers(0, 12, rng.integers(1, 4))]
    pooled = np.sort(np.concatenate(levels), kind="stable")
    points = np.concatenate([rng.choice([-3.0, -0.0, 0.0, 0.25, 1.0, 3.25, 4.0], 30),
                             [-np.inf, np.inf]])
    below, above = np.sort(rng.choice(points, (2, 40)), axis=0)
    above[rng.random(40) < 0.3] = np.inf
    for k in (2, 3, 5):
        apart = GapPoints(KEYS, "x", levels, np.zeros(0), k)
        together = GapPoints(KEYS, "x", [pooled], np.zeros(0), k)
        assert apart.scales == together.scales
        for mine, theirs in zip(apart.gaps(below, above), together.gaps(below, above),
                                strict=True):
            assert mine.tobytes() == theirs.tobytes()
        if pooled.size:
            assert apart(below, above).tobytes() == together(below, above).tobytes()
