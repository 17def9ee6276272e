"""The coordinator under test: tokens, settings and configuration files, in-process centers with
known data (real center apps that trust each other's signed tables), wrappers around a port that
count the calls it forwards and keep the answers (or alter them), independent checks of a
center's releases against its raw data, and a mock center's answers."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from numpy.typing import NDArray

from coordinator.core.config import RetryPolicy, Settings
from coordinator.core.errors import CenterFailure
from coordinator.local import InProcessCenter, in_process_federation
from fedstats_cli.procs import free_port
from shared.binning import BinTable
from shared.federation import apply_refinement
from shared.kinds import Kind, Rel, Req
from shared.protocol import (
    BinTableRelease,
    Budget,
    CenterInfo,
    Health,
    LimitsStatement,
    RefinementRelease,
)
from tests.helpers.center import TOKEN
from tests.helpers.config import write_toml

T = TypeVar("T")

ANALYST_TOKEN = "analyst-" + "0123456789abcdef"
CENTER_TOKENS = {
    "alpha": "center-alpha-" + "s3cr3t-0000000001",
    "beta": "center-beta-" + "s3cr3t-0000000002",
    "gamma": "center-gamma-" + "s3cr3t-0000000003",
}
AUTH = {"Authorization": f"Bearer {ANALYST_TOKEN}"}
K = 10
SIZES = {"alpha": 260, "beta": 190, "gamma": 120}  # distinct after rounding to multiples of K

Arrays = tuple[NDArray[np.float64], NDArray[np.float64]]


def make_data(seed: int = 20261129, shift: float = 0.3) -> dict[str, Arrays]:
    """Per center: X and Y samples (continuous, so every value is distinct)."""
    rng = np.random.default_rng(seed)
    return {
        cid: (np.round(rng.normal(50, 10, n), 6), np.round(rng.normal(50 + 10 * shift, 10, n), 6))
        for cid, n in SIZES.items()
    }


def cohort(path: Path, x: NDArray[np.float64], y: NDArray[np.float64]) -> dict[str, Any]:
    """X and Y as levels ctl and trt of one variable ``crp``, written to ``path`` (Parquet) and
    declared as a center declares a dataset (a budget no test exhausts)."""
    labels = ["ctl"] * x.size + ["trt"] * y.size
    pq.write_table(pa.table({"crp": pa.array(np.concatenate([x, y]), pa.float64()),
                             "group": pa.array(labels, pa.string())}), path)
    return {"source": {"kind": "parquet", "path": str(path)}, "variables": ["crp"],
            "group": {"column": "group", "levels": ["ctl", "trt"]},
            "epsilon_total": 1e6, "epsilon_per_request": 1e6}


def csv_cohort(path: Path, x: NDArray[np.float64], y: NDArray[np.float64], *,
               epsilon_total: float = 3.0, **declared: Any) -> dict[str, Any]:
    """X and Y as levels ctl and trt of one variable ``crp`` (group column ``arm``), written to
    ``path`` (CSV, every value exact) and declared as a center declares a dataset."""
    rows = [f"{float(v)!r},ctl" for v in x] + [f"{float(v)!r},trt" for v in y]
    path.write_text("crp,arm\n" + "\n".join(rows) + "\n")
    return {"source": {"kind": "csv", "path": str(path)}, "variables": ["crp"],
            "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "epsilon_total": epsilon_total, **declared}


def in_process_centers(
    data: Mapping[str, Arrays], directory: Path, k: int = K, **settings: Any
) -> dict[str, InProcessCenter]:
    """One real center app per id, its ``cohort`` dataset the id's (X, Y) as levels ctl and trt
    (written to ``directory``); each trusts the others' signed tables. The caller closes them
    (:class:`Federations`)."""
    return in_process_federation(
        {cid: {"cohort": cohort(directory / f"{cid}.parquet", x, y)}
         for cid, (x, y) in data.items()},
        k=k, **settings,
    )


class Federations:
    """Makes in-process federations (``make_data()``'s by default) and closes every center it
    made (their ledgers, temporary folders and data files go with them)."""

    def __init__(self) -> None:
        self.made: list[InProcessCenter] = []
        self.data = Path(tempfile.mkdtemp(prefix="fedstats-data-"))
        self._files = 0

    def dataset(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> dict[str, Any]:
        """A ``cohort``-like dataset of X and Y (:func:`cohort`), for a center made elsewhere."""
        self._files += 1
        return cohort(self.data / f"extra-{self._files}.parquet", x, y)

    def __call__(
        self, data: Mapping[str, Arrays] | None = None, *, k: int = K, **settings: Any
    ) -> dict[str, InProcessCenter]:
        self._files += 1
        directory = self.data / f"federation-{self._files}"
        directory.mkdir()
        centers = in_process_centers(make_data() if data is None else data, directory, k=k,
                                     **settings)
        self.made.extend(centers.values())
        return centers

    def ports(self, data: Mapping[str, Arrays] | None = None, **settings: Any) -> list[Any]:
        """The federation's centers, in the registry's order (alpha, beta, gamma)."""
        return list(self(data, **settings).values())

    def adopt(self, center: InProcessCenter) -> InProcessCenter:
        """Close ``center`` (made elsewhere) with the others."""
        self.made.append(center)
        return center

    async def aclose(self) -> None:
        while self.made:
            await self.made.pop().aclose()
        shutil.rmtree(self.data, ignore_errors=True)

    def close(self) -> None:
        """For synchronous tests (no event loop running)."""
        asyncio.run(self.aclose())


def admin_auth(app: Any, name: str = "test admin") -> dict[str, str]:
    """The headers of a new admin account in a coordinator app's store: an admin reads every
    study with every raw answer its centers gave (an analyst's provenance leaves them out)."""
    made = app.state.services.accounts.add(name, "admin")
    return {"Authorization": f"Bearer {made.token}"}


def settings_for(
    store_url: str, centers: Sequence[str] = tuple(SIZES), **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "analyst_tokens": [ANALYST_TOKEN],
        "centers": {
            cid: {"url": f"http://{cid}.test:8700", "token": CENTER_TOKENS[cid]}
            for cid in centers
        },
        "min_centers": 2,
        "store_url": store_url,
        "connect_timeout_s": 1.0,
        "read_timeout_s": 2.0,
        "retry": RetryPolicy(attempts=3, backoff_initial_s=0.0, backoff_max_s=0.0),
    }
    values.update(overrides)
    return Settings(**values)


def coordinator_config(path: Path, centers: Mapping[str, str], *,
                       tokens: Mapping[str, str] | None = None,
                       **settings: Any) -> tuple[Path, int]:
    """A ``python -m coordinator`` TOML at ``path`` and its free port: the analyst token, a
    SQLite store next to ``path``, ``settings``, and one ``[centers."id"]`` table per center URL
    (each center's token from ``tokens``, else the center tests' ``TOKEN``)."""
    port = free_port()
    write_toml(path, {
        "analyst_tokens": [ANALYST_TOKEN], "port": port,
        "store_url": f"sqlite:///{path.with_suffix('.sqlite')}", **settings,
        "centers": {cid: {"url": url, "token": (tokens or {}).get(cid, TOKEN)}
                    for cid, url in centers.items()},
    })
    return path, port


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'coordinator.sqlite'}"


class CountingCenter:
    """Wraps a port and counts the calls it forwards; ``gate`` (if set) is awaited first.

    ``answers[call]`` keeps what the port answered, in order: the releases the protocol really
    received, for checks independent of the protocol's own arithmetic.
    """

    def __init__(self, port: Any) -> None:
        self.port = port
        self.calls: Counter[str] = Counter()
        self.answers: defaultdict[str, list[Any]] = defaultdict(list)
        self.gate: Any = None

    @property
    def center_id(self) -> str:
        return str(self.port.center_id)

    async def _enter(self, name: str) -> None:
        self.calls[name] += 1
        if self.gate is not None:
            await self.gate.wait()

    async def _forward(self, name: str, answer: Awaitable[T]) -> T:
        await self._enter(name)
        got = await answer
        self.answers[name].append(got)
        return got

    async def health(self) -> Health:
        await self._enter("health")
        return await self.port.health()

    async def info(self) -> CenterInfo:
        return await self._forward("info", self.port.info())

    async def budget(self) -> Budget:
        await self._enter("budget")
        return await self.port.budget()

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        """Counted and kept under the kind's name (``calls["table"]``, ``answers["refine"]``)."""
        release: Rel = await self._forward(kind.name, self.port.release(kind, dataset, request))
        return release


class Tampered(CountingCenter):
    """A center whose releases of the kinds named are altered before they leave: a function of
    the release's JSON (``table=forged``), fields to replace (``dp_quantiles={"epsilon": 0.1}``)
    or an exception raised instead (``dp_boxplot=CenterFailure(...)``)."""

    def __init__(self, port: Any, **change: Any) -> None:
        super().__init__(port)
        self.change = change

    async def release(self, kind: Kind[Req, Rel], dataset: str, request: Req) -> Rel:
        release = await super().release(kind, dataset, request)
        change = self.change.get(kind.name)
        if change is None:
            return release
        if isinstance(change, BaseException):
            raise change
        if callable(change):
            return type(release).model_validate(change(release.model_dump()))
        return release.model_copy(update=dict(change))


def lying(federation: Federations, who: str, data: Mapping[str, Arrays] | None = None,
          **change: Any) -> list[Any]:
    """The ports of a new federation (:meth:`Federations.ports`), ``who``'s releases altered by
    ``change`` (:class:`Tampered`)."""
    return [Tampered(p, **change) if p.center_id == who else p for p in federation.ports(data)]


async def named_implausible(who: str, match: str, answer: Awaitable[Any]) -> None:
    """``answer`` fails naming ``who``'s release ``implausible``, for a reason matching
    ``match``."""
    with pytest.raises(CenterFailure, match=match) as caught:
        await answer
    assert (caught.value.center, caught.value.kind) == (who, "implausible")


# -- independent checks of releases against the raw data ----------------------------------------


def true_cells(limits: Sequence[float], values: NDArray[np.float64]) -> NDArray[Any]:
    """The cell of ``limits`` each value falls in: cells are right-closed, the first open below
    and the last open above (values beyond a natural limit are counted in the extreme cell)."""
    return np.searchsorted(np.asarray(limits, dtype=np.float64)[1:-1], values, side="left")


def true_counts(limits: Sequence[float], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """How many of ``values`` fall in each cell of ``limits``, from the raw values."""
    return np.bincount(true_cells(limits, values), minlength=len(limits) - 1).astype(np.float64)


def _check_extremes(statement: LimitsStatement, values: NDArray[np.float64]) -> None:
    """Buffers hold every value strictly inside (a buffer is never a data value); a natural
    limit clips and an infinite one holds everything."""
    if statement.lower == "buffer":
        assert statement.limits[0] < values.min()
    if statement.upper == "buffer":
        assert values.max() < statement.limits[-1]


def check_built_table(release: BinTableRelease, groups: Sequence[NDArray[np.float64]]) -> None:
    """A builder's table, against its raw values per group: every count is the group's true
    count in the bin (values beyond a natural limit counted in the extreme bin), 0 or >= K, and
    the signed statement states the released limits."""
    assert release.signed is not None
    statement = release.signed.statement
    assert statement.limits == release.limits and statement.k == release.k
    for row, values in zip(release.counts, groups, strict=True):
        _check_extremes(statement, values)
        np.testing.assert_array_equal(row, true_counts(release.limits, values))
    counts = np.asarray(release.counts)
    assert np.all((counts == 0) | (counts >= release.k))


def refined_sets(release: RefinementRelease, g: int, values: NDArray[np.float64]) -> NDArray[Any]:
    """The run of group ``g``'s refinement each of ``values`` is counted in."""
    assert release.signed is not None
    return np.asarray(release.runs[g].run_of_cell)[true_cells(release.signed.statement.limits,
                                                              values)]


def check_refined_runs(release: RefinementRelease, groups: Sequence[NDArray[np.float64]]) -> None:
    """A refinement, against its raw values per group: every run total is the group's true count
    in the run's cells (the cells of the refined limits the center signed), 0 or >= K."""
    assert release.signed is not None
    statement = release.signed.statement
    for g, (runs, values) in enumerate(zip(release.runs, groups, strict=True)):
        _check_extremes(statement, values)
        assert len(runs.run_of_cell) == len(statement.limits) - 1
        totals = np.bincount(refined_sets(release, g, values), minlength=len(runs.totals))
        np.testing.assert_array_equal(runs.totals, totals)
        assert all(t == 0 or t >= release.k for t in runs.totals)


def check_atoms(
    releases: Sequence[BinTableRelease | RefinementRelease],
    groups: Sequence[NDArray[np.float64]],
    k: int = K,
) -> None:
    """No combination of a center's two-group releases isolates 1..k-1 records: per group, the
    records counted in the same set by every release (an atom: whatever anyone derives by adding
    and subtracting released counts is the count of a union of atoms) number 0 or >= k, from the
    raw values."""
    for g, values in enumerate(groups):
        labels = np.column_stack([
            true_cells(r.limits, values) if isinstance(r, BinTableRelease)
            else refined_sets(r, g, values)
            for r in releases
        ])
        _, sizes = np.unique(labels, axis=0, return_counts=True)
        assert sizes.min() >= k, f"group {g}: an atom of {sizes.min()} records"


def fold_releases(
    tables: Sequence[tuple[str, BinTableRelease]],
    refinements: Sequence[tuple[str, RefinementRelease]],
) -> tuple[BinTable, tuple[str, ...]]:
    """The federated table from (center, release) pairs as they were received, and who sent
    them in turn: the one builder's table with each refinement folded in
    (``shared.federation.apply_refinement``) in the order of the chain of signed statements
    (each refinement names, as its parent, the digest of the statement it refined)."""
    assert len(tables) == 1, "one center builds the table"
    builder, built = tables[0]
    assert built.signed is not None
    by_parent = {r.signed.statement.parent: (cid, r) for cid, r in refinements if r.signed}
    assert len(by_parent) == len(refinements), "each refinement is of another statement"
    table, order, digest = built.to_table(), [builder], built.signed.statement.digest()
    while digest in by_parent:
        center, release = by_parent.pop(digest)
        table = apply_refinement(table, release.to_result())
        order.append(center)
        assert release.signed is not None
        np.testing.assert_array_equal(release.signed.statement.limits, table.limits)
        digest = release.signed.statement.digest()
    assert not by_parent, "every refinement refined the table of the one before"
    return table, tuple(order)


def fold_received(centers: Iterable[CountingCenter]) -> tuple[BinTable, tuple[str, ...]]:
    """:func:`fold_releases` of what the wrapped centers answered."""
    centers = list(centers)
    return fold_releases([(c.center_id, t) for c in centers for t in c.answers["table"]],
                         [(c.center_id, r) for c in centers for r in c.answers["refine"]])


def center_info_json(center_id: str, n_ctl: int = 100, n_trt: int = 100) -> dict[str, Any]:
    """What a real center answers on /v1/info for the ``cohort`` dataset."""
    return {
        "center_id": center_id,
        "k": K,
        "neighbouring": "add_remove",
        "quantile_loss_enabled": False,
        "datasets": [{
            "name": "cohort",
            "variables": ["crp"],
            "group": {"column": "arm", "levels": ["ctl", "trt"]},
            "n_records": n_ctl + n_trt,
            "n_by_group": {"ctl": n_ctl, "trt": n_trt},
        }],
    }


Handler = Callable[[httpx.Request], httpx.Response]


def json_response(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode(),
                          headers={"Content-Type": "application/json"})
