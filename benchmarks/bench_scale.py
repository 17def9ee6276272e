"""Hospital scale: a center's memory per row, a study on 10^8 rows, a SQL source read
once per data version, and the data engine, each printed as a ratio.

``rss``    For each size n it writes one hospital as Parquet (one continuous variable ``los``,
           float64, and a two-level group column ``arm``) into a temporary directory, starts
           ``python -m center_agent`` over it, as deployed, and reads the process's resident
           memory from ``/proc/<pid>/status``: idle after start-up (the population is read by
           the start-up check) and after a study's releases (a K-anonymous table, the
           Mann-Whitney statistic, ε-DP quantiles of every record). Printed per row and as a
           ratio to the raw bytes of the values the center keeps (8 n), after subtracting the
           base: the same center over 10^3 rows. The peak (VmHWM) is read after start-up (the
           read's transient copies) and, reset then, after the study (its working copies).
           With ``--baseline`` also the local core on the same data (read the column
           with pyarrow, ``np.sort`` it, the baseline of the other benchmarks) and the study's
           wall time against it.
``sql``    A PostgreSQL-backed center (10^6 rows by default) with a ``version_query``: the same
           study three times: after the data changed (the first study pays one read), again on
           unchanged data (the second), and on a center with ``version_ttl_s = 0`` (a read per
           request, what every SQL source did before). Skipped without a server at
           127.0.0.1:5432 (database ``test``, trust auth).
``engines`` Reading one float64 column of 10^7 rows: Parquet with pyarrow and with DuckDB (when
           installed: ``pip install .[duckdb]``); PostgreSQL through SQLAlchemy rows (the
           center's generic path), psycopg ``COPY ... TO STDOUT`` parsed by Arrow, and a
           counting query pushed down to the server.

    .venv/bin/python benchmarks/bench_scale.py rss --rows 1e6 --rows 1e7 --rows 1e8 --baseline
    .venv/bin/python benchmarks/bench_scale.py sql --rows 1e6
    .venv/bin/python benchmarks/bench_scale.py engines --rows 1e7
    .venv/bin/python benchmarks/bench_scale.py rss --rows 1e5      # a quick look
    .venv/bin/python benchmarks/bench_scale.py rss --rows 1e7 --per-release  # peak per release
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fedstats_cli.procs import ProcessGroup, child_env, free_port, terminate_on_sigterm
from fedstats_cli.settings_files import write_toml

K = 10
LEVELS = ("control", "treated")
VARIABLE = "los"
ROW_GROUP = 1 << 20
BASE_ROWS = 1_000
PG_URL = "postgresql+psycopg://{user}@127.0.0.1:5432/test"


# -- data ----------------------------------------------------------------------------------------

def write_hospital(path: Path, n: int, seed: int) -> Path:
    """``n`` rows (``los``: a continuous log-normal length of stay, ``arm``: two levels), written
    one row group at a time so that 10^8 rows never sit in this process's memory at once."""
    rng = np.random.default_rng(seed)
    schema = pa.schema([(VARIABLE, pa.float64()), ("arm", pa.dictionary(pa.int8(), pa.string()))])
    labels = pa.array(LEVELS)
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, n, ROW_GROUP):
            m = min(ROW_GROUP, n - start)
            arm = rng.integers(0, 2, m).astype(np.int8)
            los = np.exp(rng.normal(1.6, 0.6, m) + 0.1 * arm)
            writer.write_table(pa.table({
                VARIABLE: pa.array(los),
                "arm": pa.DictionaryArray.from_arrays(pa.array(arm), labels)}, schema=schema))
    return path


def study_requests(n: int) -> list[tuple[str, dict[str, Any]]]:
    """A study's releases at one center: table, Mann-Whitney, ε-DP quantiles (every record).
    The table asks for K = n / 10^4 (at least the center's): a signed table holds at most
    ``shared.protocol.MAX_LIMITS`` (10^5) limits, and this keeps about 5,000 bins at every n."""
    return [
        ("table", {"variable": VARIABLE, "groups": list(LEVELS), "k": max(K, n // 10_000)}),
        ("mwu", {"variable": VARIABLE, "groups": list(LEVELS)}),
        ("dp/quantiles", {"variable": VARIABLE, "epsilon": 1.0, "bounds": [0.0, 100.0],
                          "levels": [0.25, 0.5, 0.75]}),
    ]


# -- a center process ----------------------------------------------------------------------------

def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a running process, kB (Linux ``/proc``)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


@contextlib.contextmanager
def center(work: Path, source: dict[str, Any], variables: list[str], name: str = "center",
           timeout_s: float = 3600) -> Iterator[tuple[httpx.Client, int, float]]:
    """A running ``python -m center_agent`` over ``source``: an authenticated client, its pid,
    and the seconds from start to healthy (imports and the start-up read of the data)."""
    token = secrets.token_urlsafe(32)
    port = free_port()
    config = write_toml(
        work / f"{name}.toml",
        {"center_id": name, "k": K, "tokens": [token], "port": port,
         "ledger_url": f"sqlite:///{work / f'{name}-ledger.sqlite'}",
         # A table at K = 10 has about n / 2K limits: 5e6 at 10^8 rows (the cap's maximum).
         "max_limits_per_variable": 10_000_000},
        {"datasets.cohort": {"source": source, "variables": variables,
                             "group": {"column": "arm", "levels": list(LEVELS)},
                             "epsilon_total": 1000.0, "epsilon_per_request": 10.0}})
    with ProcessGroup() as group:
        start = time.perf_counter()
        child = group.start(name, [sys.executable, "-m", "center_agent", "--config", str(config)],
                            url=f"http://127.0.0.1:{port}", log=work / f"{name}.log",
                            env=child_env())
        group.wait_healthy(timeout_s=timeout_s)
        ready = time.perf_counter() - start
        with httpx.Client(base_url=child.url, timeout=timeout_s, trust_env=False,
                          headers={"Authorization": f"Bearer {token}"}) as client:
            yield client, child.proc.pid, ready


def run_study(client: httpx.Client, n: int, variable: str = VARIABLE,
              pid: int | None = None, peaks: list[int] | None = None) -> float:
    """Wall seconds of the study's releases, one request after the other. With ``pid`` (the
    center's), each release's peak above the center's RSS before it is printed (VmHWM reset
    before each request) and its VmHWM appended to ``peaks``."""
    start = time.perf_counter()
    for path, body in study_requests(n):
        if pid is not None:
            reset_peak(pid)
            before = memory_kb(pid)["VmRSS"]
        r = client.post(f"/v1/datasets/cohort/{path}", json={**body, "variable": variable})
        if r.status_code != 200:
            raise SystemExit(f"{path}: {r.status_code} {r.text}")
        if pid is not None:
            after = memory_kb(pid)
            print(f"  {path}: peak {(after['VmHWM'] - before) / 1024:.0f} MB above the RSS "
                  f"before it ({before / 1024:.0f} MB; {after['VmRSS'] / 1024:.0f} MB after)",
                  flush=True)
            if peaks is not None:
                peaks.append(after["VmHWM"])
    return time.perf_counter() - start


# -- rss -----------------------------------------------------------------------------------------

def local_core(path: Path) -> float:
    """The local core on the same data: read the column, sort it (seconds)."""
    start = time.perf_counter()
    values = pq.read_table(path, columns=[VARIABLE]).column(0).to_numpy()
    np.sort(values)
    return time.perf_counter() - start


def reset_peak(pid: int) -> None:
    """Reset a process's VmHWM to its current RSS (Linux ``/proc/<pid>/clear_refs``, 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def rss_run(n: int, work: Path, seed: int, baseline: bool,
            per_release: bool = False) -> dict[str, Any]:
    path = work / f"hospital-{n}.parquet"
    t0 = time.perf_counter()
    write_hospital(path, n, seed)
    generated = time.perf_counter() - t0
    source = {"kind": "parquet", "path": str(path)}
    with center(work, source, [VARIABLE], name=f"c{n}") as (client, pid, ready):
        idle = memory_kb(pid)
        if per_release:
            print(f"  {n:.0e} rows: start-up peak {idle['VmHWM'] / 1024:.0f} MB, "
                  f"{idle['VmRSS'] / 1024:.0f} MB idle", flush=True)
        reset_peak(pid)  # from here VmHWM is the study's peak alone
        peaks: list[int] = []
        study = run_study(client, n, pid=pid if per_release else None, peaks=peaks)
        after = memory_kb(pid)
        if peaks:  # reset before each release: the study's peak is the largest of theirs
            after["VmHWM"] = max(peaks)
        again = run_study(client, n)  # the stored answers: what a repeat costs
    core = local_core(path) if baseline else float("nan")
    path.unlink()
    return {"n": n, "generate_s": generated, "start_s": ready, "idle_kb": idle["VmRSS"],
            "study_kb": after["VmRSS"], "start_peak_kb": idle["VmHWM"],
            "peak_kb": max(idle["VmHWM"], after["VmHWM"]), "study_peak_kb": after["VmHWM"],
            "study_s": study,
            "repeat_s": again, "core_s": core}


def cmd_rss(args: argparse.Namespace) -> None:
    sizes = [int(float(r)) for r in (args.rows or ["1e6", "1e7"])]
    with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=args.tmp) as tmp:
        work = Path(tmp)
        base = rss_run(BASE_ROWS, work, args.seed, baseline=False)
        print(f"base: a center over {BASE_ROWS} rows: {base['idle_kb'] / 1024:.0f} MB idle, "
              f"{base['study_kb'] / 1024:.0f} MB after the study", flush=True)
        print(f"{'rows':>9} {'raw MB':>8} {'idle MB':>8} {'study MB':>9} {'peak MB':>8} "
              f"{'B/row idle':>10} {'B/row study':>11} {'idle/raw':>8} {'study/raw':>9} "
              f"{'peak/raw':>8} {'start pk':>8} {'study pk':>8} {'start s':>8} {'study s':>8} "
              f"{'core s':>7} {'study/core':>10}",
              flush=True)
        for n in sizes:
            r = rss_run(n, work, args.seed, baseline=args.baseline,
                        per_release=args.per_release)
            raw = 8 * n / 1024  # kB of the values kept: one float64 per row
            idle = r["idle_kb"] - base["idle_kb"]
            study = r["study_kb"] - base["study_kb"]
            peak = r["peak_kb"] - base["study_kb"]
            start_peak = r["start_peak_kb"] - base["study_kb"]
            study_peak = r["study_peak_kb"] - base["study_kb"]
            print(f"{n:>9.0e} {raw / 1024:>8.0f} {r['idle_kb'] / 1024:>8.0f} "
                  f"{r['study_kb'] / 1024:>9.0f} {r['peak_kb'] / 1024:>8.0f} "
                  f"{idle * 1024 / n:>10.1f} {study * 1024 / n:>11.1f} {idle / raw:>8.2f} "
                  f"{study / raw:>9.2f} {peak / raw:>8.2f} {start_peak / raw:>8.2f} "
                  f"{study_peak / raw:>8.2f} {r['start_s']:>8.1f} "
                  f"{r['study_s']:>8.2f} {r['core_s']:>7.2f} "
                  f"{r['study_s'] / r['core_s']:>10.2f}", flush=True)
    print("idle/raw, study/raw, peak/raw: (RSS - the base's) / 8 bytes per row; start pk, "
          "study pk: the peak (VmHWM) of the start-up read and of the study alone, the same "
          "ratio (peak/raw is the larger); start: process "
          "start to healthy (imports and the start-up read); study: table + MWU + DP quantiles "
          "over HTTP on the started center; core: pyarrow read of the column + np.sort")


# -- sql -----------------------------------------------------------------------------------------

def pg_url() -> str | None:
    import sqlalchemy as sa

    for user in ("postgres", "root"):
        url = PG_URL.format(user=user)
        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("select 1"))
            return url
        except Exception:
            continue
        finally:
            engine.dispose()
    return None


def psycopg_dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def load_pg(url: str, table: str, n: int, seed: int) -> None:
    """``n`` rows (``los``, ``los2``, ``arm``, ``updated_at``) into ``table`` by COPY."""
    import psycopg

    rng = np.random.default_rng(seed)
    with psycopg.connect(psycopg_dsn(url), autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (los double precision, los2 double precision, "
                     "arm text, updated_at bigint)")
        with conn.cursor() as cur, cur.copy(
                f"COPY {table} (los, los2, arm, updated_at) FROM STDIN") as copy:
            for start in range(0, n, ROW_GROUP):
                m = min(ROW_GROUP, n - start)
                arm = rng.integers(0, 2, m)
                los = np.exp(rng.normal(1.6, 0.6, m) + 0.1 * arm)
                los2 = np.exp(rng.normal(1.0, 0.5, m))
                buf = io.StringIO()
                labels = np.array(LEVELS)[arm]
                np.savetxt(buf, np.column_stack([los.astype(str), los2.astype(str), labels,
                                                 np.ones(m, dtype=int).astype(str)]),
                           fmt="%s", delimiter="\t")
                copy.write(buf.getvalue())
        conn.execute(f"ANALYZE {table}")


def touch_pg(url: str, table: str) -> None:
    """A change of the data: K new rows per level with a new stamp (the version changes)."""
    import psycopg

    with psycopg.connect(psycopg_dsn(url), autocommit=True) as conn:
        stamp = conn.execute(f"SELECT max(updated_at) + 1 FROM {table}").fetchone()
        assert stamp is not None
        for arm in LEVELS:
            conn.execute(f"INSERT INTO {table} SELECT 50 + g, 50 + g, %s, %s "
                         "FROM generate_series(1, %s) g", (arm, stamp[0], K))


def cmd_sql(args: argparse.Namespace) -> None:
    url = pg_url()
    if url is None:
        print("PostgreSQL not reachable at 127.0.0.1:5432 (database test): skipped")
        return
    n = int(float((args.rows or ["1e6"])[0]))
    table = "bench_scale_cohort"
    load_pg(url, table, n, args.seed)
    version = f"SELECT max(updated_at), count(*) FROM {table}"
    variables = [VARIABLE, "los2"]
    try:
        with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=args.tmp) as tmp:
            work = Path(tmp)
            source = {"kind": "sql", "url": url, "table": table, "version_query": version}
            with center(work, source, variables, name="versioned") as (client, _pid, ready):
                touch_pg(url, table)
                first = run_study(client, n, VARIABLE)
                second = run_study(client, n, "los2")
            legacy = {"kind": "sql", "url": url, "table": table, "version_ttl_s": 0}
            with center(work, legacy, variables, name="every") as (client, _pid, _ready):
                every = run_study(client, n, VARIABLE)
        print(f"{'rows':>9} {'start s':>8} {'first s':>8} {'second s':>9} {'first/second':>12} "
              f"{'ttl 0 s':>8} {'ttl0/second':>11}")
        print(f"{n:>9.0e} {ready:>8.2f} {first:>8.2f} {second:>9.2f} {first / second:>12.1f} "
              f"{every:>8.2f} {every / second:>11.1f}")
        print("first: the study after the data changed (one read of the table); second: a "
              "study of the other variable on unchanged data (the version query only); ttl 0: "
              "the first study on a center reading the table on every request")
    finally:
        import psycopg

        with psycopg.connect(psycopg_dsn(url), autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


# -- engines -------------------------------------------------------------------------------------

def timed(fn: Any, repeat: int = 3) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
        del out
        out = None
    out = fn()
    return best, out


def cmd_engines(args: argparse.Namespace) -> None:
    n = int(float((args.rows or ["1e7"])[0]))
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=args.tmp) as tmp:
        path = write_hospital(Path(tmp) / "h.parquet", n, args.seed)
        s, ref = timed(lambda: pq.read_table(path, columns=[VARIABLE]).column(0).to_numpy())
        rows.append(("parquet: pyarrow read_table(columns) -> numpy", s))
        try:
            import duckdb
        except ImportError:
            print("duckdb not installed (pip install .[duckdb]): its rows skipped")
        else:
            con = duckdb.connect()
            query = f"SELECT {VARIABLE} FROM read_parquet('{path}')"
            s, got = timed(lambda: con.sql(query).fetchnumpy()[VARIABLE])
            assert np.array_equal(np.asarray(got), ref)
            rows.append(("parquet: duckdb fetchnumpy", s))
            s, _ = timed(lambda: con.sql(query).to_arrow_table())
            rows.append(("parquet: duckdb -> arrow", s))
            s, _ = timed(lambda: con.sql(
                f"SELECT {VARIABLE} FROM read_parquet('{path}') ORDER BY 1").fetchnumpy())
            rows.append(("parquet: duckdb ORDER BY -> numpy (sorted)", s))
            con.close()
        s, _ = timed(lambda: np.sort(ref))
        rows.append(("np.sort of the column (the core's floor)", s))
        url = pg_url()
        if url is None:
            print("PostgreSQL not reachable: its rows skipped")
        else:
            rows += pg_engines(url, n, args.seed)
    print(f"{'reading one float64 column of ' + format(n, '.0e') + ' rows':<56} {'s':>7} "
          f"{'/ pyarrow':>9}")
    for name, s in rows:
        print(f"{name:<56} {s:>7.2f} {s / rows[0][1]:>9.2f}")


def pg_engines(url: str, n: int, seed: int) -> list[tuple[str, float]]:
    import psycopg

    from center_agent.data.sources import SqlTable

    table = "bench_scale_engines"
    load_pg(url, table, n, seed)
    rows = []
    try:
        source = SqlTable(url, table=table)
        s, ref = timed(lambda: source._rows([VARIABLE, "arm"], ["arm"]), repeat=1)
        rows.append(("postgres: SQLAlchemy fetch rows (los, arm) -> arrow", s))
        s, got = timed(lambda: source.read([VARIABLE, "arm"], text=["arm"]), repeat=1)
        assert np.array_equal(got.column(0).to_numpy(), ref.column(0).to_numpy())
        rows.append(("postgres: COPY csv (los, arm) -> pyarrow.csv (the center's)", s))
        s, _ = timed(lambda: source._rows([VARIABLE], []), repeat=1)
        rows.append(("postgres: SQLAlchemy fetch rows (los) -> arrow", s))
        s, _ = timed(lambda: source.read([VARIABLE], text=[]), repeat=1)
        rows.append(("postgres: COPY csv (los) -> pyarrow.csv (the center's)", s))
        source.close()
        with psycopg.connect(psycopg_dsn(url)) as conn:
            query = (f"SELECT arm, width_bucket({VARIABLE}, 0, 100, 100), count(*) "
                     f"FROM {table} GROUP BY 1, 2")
            s, _ = timed(lambda: conn.execute(query).fetchall(), repeat=1)
        rows.append(("postgres: push-down counts (arm x 100 bins)", s))
    finally:
        with psycopg.connect(psycopg_dsn(url), autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["rss", "sql", "engines"])
    parser.add_argument("--rows", action="append", help="rows (repeatable for rss)")
    parser.add_argument("--baseline", action="store_true",
                        help="rss: also time the local core on the same data")
    parser.add_argument("--per-release", action="store_true",
                        help="rss: print each release's peak (and the start-up's)")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--tmp", default=None, help="where the data files go (default: $TMPDIR)")
    args = parser.parse_args()
    {"rss": cmd_rss, "sql": cmd_sql, "engines": cmd_engines}[args.what](args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    with terminate_on_sigterm():  # a `timeout` or kill stops the services started too
        main()
