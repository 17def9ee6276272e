"""The exports (``coordinator.reporting.exports``), the Methods paragraph
(``coordinator.reporting.methods_text``) and
the reproducibility record (``coordinator.provenance.reproducibility``), over the analyst API in
process: every CSV cell is checked against the study's own JSON, and the record against what the
centers published."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pandas
import pytest
from pydantic import ValidationError

from coordinator.api.routes.studies import XLSX
from coordinator.models import StudySpec
from coordinator.provenance import NO_COMMIT, git_commit, software
from coordinator.reporting import exports
from coordinator.reporting.methods_text import methods_paragraph
from coordinator.reporting.rendering import fmt
from coordinator.reporting.report import render_html, summary, table_one
from tests.coordinator.test_coord_api import Running, counting_centers, serving
from tests.helpers.coordinator import ANALYST_TOKEN, AUTH, Federations, K, settings_for, sqlite_url

pytestmark = pytest.mark.anyio

SPEC: dict[str, Any] = {
    "title": "CRP by arm, a pre-registered comparison",
    "description": "Does treatment change CRP? Primary: the sum test.",
    "primary": {"analysis": 1, "test": "sum", "alpha": 0.01},
    "dataset": "cohort",
    "variable": "crp",
    "groups": ["ctl", "trt"],
    "k": K,
    "analyses": [
        {"kind": "table", "lower": "infinite"},
        {"kind": "mwu", "tests": ["sum", "weighted", "fisher", "table"], "epsilon": 2.0},
        {"kind": "describe", "epsilon": 1.0, "bounds": {"crp": [0, 100]}, "bins": 5},
        {"kind": "dp_boxplot", "epsilon": 4.0, "bounds": [0, 100], "group": "trt"},
    ],
}


@pytest.fixture
async def running(tmp_path: Path, federation: Federations) -> AsyncIterator[Running]:
    async with serving(settings_for(sqlite_url(tmp_path)),
                       centers=counting_centers(federation)) as r:
        yield r


@pytest.fixture
async def study(running: Running) -> dict[str, Any]:
    view = await running.run(SPEC)
    assert view["status"] == "succeeded", [a for a in view["result"]["analyses"]
                                           if a["status"] == "failed"]
    return view


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def number(cell: str) -> float:
    return float(cell)  # "Inf", "-Inf" and every repr() of a float read back exactly


async def test_spec_title_and_primary_are_checked() -> None:
    StudySpec.model_validate(SPEC)
    cases: list[tuple[dict[str, Any], str]] = [
                       ({"primary": {"analysis": 0, "test": "sum"}}, "not an mwu analysis"),
                       ({"primary": {"analysis": 9, "test": "sum"}}, "not an mwu analysis"),
                       ({"primary": {"analysis": 1, "test": "wilcoxon"}}, "test"),
                       ({"primary": {"analysis": 1, "test": "sum", "alpha": 1.5}}, "alpha"),
                       ({"title": ""}, "title"), ({"title": "x" * 201}, "title")]
    for bad, match in cases:
        with pytest.raises(ValidationError, match=match):
            StudySpec.model_validate({**SPEC, **bad})
    narrower = {**SPEC, "analyses": [SPEC["analyses"][0], {"kind": "mwu", "tests": ["fisher"]}]}
    with pytest.raises(ValidationError, match="is not one of analysis 1's tests"):
        StudySpec.model_validate(narrower)


async def test_csv_parts_hold_the_results_numbers(running: Running,
                                                  study: dict[str, Any]) -> None:
    c, sid = running.client, study["id"]
    mwu = study["result"]["analyses"][1]

    answer = await c.get(f"/v1/studies/{sid}/export.csv?part=tests", headers=AUTH)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    assert f"study-{sid}-tests.csv" in answer.headers["content-disposition"]
    rows = read_csv(answer.text)
    assert [r["test"] for r in rows] == list(mwu["tests"])
    for r in rows:
        test = mwu["tests"][r["test"]]
        assert number(r["statistic"]) == test["statistic"]  # exact, not rounded
        assert number(r["pvalue"]) == test["pvalue"]
        assert r["null"] == (test.get("null") or "")
        assert r["alternative"] == "two-sided"
    assert [(r["test"], r["primary"], r["alpha"]) for r in rows if r["primary"] == "TRUE"] == [
        ("sum", "TRUE", "0.01")]

    effects = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=effects",
                                    headers=AUTH)).text)
    assert [e["center"] for e in effects] == [e["center"] for e in mwu["effects"]]
    assert "stratified" in [e["center"] for e in effects]
    for row, effect in zip(effects, mwu["effects"], strict=True):
        for key in ("estimate", "low", "high", "level"):
            assert number(row[key]) == effect[key]
        assert int(row["n_x"]) == effect["n_x"] and int(row["n_y"]) == effect["n_y"]

    # Heterogeneity between the three centers: Q, I² and τ² with their Q-profile intervals and
    # the pooled θ the variances were taken at, exact.
    h = mwu["heterogeneity"]
    between = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=heterogeneity",
                                    headers=AUTH)).text)
    assert len(between) == 1 and between[0]["kind"] == "mwu" and between[0]["analysis"] == "1"
    for key in ("statistic", "pvalue", "i_squared", "tau_squared", "level", "variance_at"):
        assert number(between[0][key]) == h[key], key
    assert [number(between[0][f"tau_squared_{e}"]) for e in ("low", "high")] == list(
        h["tau_squared_interval"])
    assert [number(between[0][f"i_squared_{e}"]) for e in ("low", "high")] == list(
        h["i_squared_interval"])
    assert between[0]["centers"].split() == h["centers"]
    text = summary(study)
    lo, hi = h["tau_squared_interval"]
    assert f"τ² = {fmt(h['tau_squared'])} [{fmt(lo)}, {fmt(hi)}]" in text
    assert f"pooled θ = {fmt(h['variance_at'], 3)}" in text

    parts = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=test_parts",
                                  headers=AUTH)).text)
    assert len(parts) == sum(len(t["parts"]) for t in mwu["tests"].values())

    describe = study["result"]["analyses"][2]
    table1 = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=table1",
                                   headers=AUTH)).text)
    assert len(table1) == len(describe["rows"])
    for row, source in zip(table1, describe["rows"], strict=True):
        assert (row["center"], row["arm"], int(row["n"])) == (
            source["center"], source["arm"], source["n"])
        assert number(row["mean"]) == source["mean"]
        assert number(row["median_low"]) == source["median_interval"][0]
        assert number(row["n_low"]) < int(row["n"]) < number(row["n_high"])  # a DP count
        assert number(row["epsilon"]) == source["epsilon"] and row["unit"] == ""  # no unit
        # The missing count and its interval (a DP twin's; none for an exact or absent one).
        assert {"missing", "missing_low", "missing_high"} <= set(row)
    assert {(r["center"], r["arm"]) for r in table1} == {
        (c, a) for c in ("alpha", "beta", "gamma", "pooled") for a in ("ctl", "trt", "all")}

    formatted = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=table1_formatted",
                                      headers=AUTH)).text)
    header = list(formatted[0])
    assert header[:5] == ["analysis", "variable", "ctl", "trt", "Overall"]
    assert {"alpha: ctl", "beta: overall", "gamma: trt"} <= set(header)

    # The table's open lower end is written Inf, which R and Python both read.
    bins = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=table",
                                 headers=AUTH)).text)
    assert bins[0]["low"] == "-Inf" and math.isinf(number(bins[0]["low"]))
    read = pandas.read_csv(io.StringIO(exports.part_csv(study, "table")))
    assert read["low"].iloc[0] == -math.inf and read["low"].dtype == float
    table = study["result"]["analyses"][0]
    assert [number(b["count_trt"]) for b in bins] == table["counts"][1]

    boxes = read_csv((await c.get(f"/v1/studies/{sid}/export.csv?part=boxplots",
                                  headers=AUTH)).text)
    assert [b["box"] for b in boxes] == [*study["result"]["analyses"][3]["per_center"], "pooled"]
    assert number(boxes[-1]["median"]) == study["result"]["analyses"][3]["pooled"]["median"]

    # A part the study has nothing of: the header alone.
    empty = await c.get(f"/v1/studies/{sid}/export.csv?part=dp_quantiles", headers=AUTH)
    assert empty.status_code == 200 and empty.text.count("\n") <= 1
    for bad, status in [("?part=bogus", 422), ("", 422)]:
        assert (await c.get(f"/v1/studies/{sid}/export.csv{bad}", headers=AUTH)).status_code \
            == status
    assert (await c.get(f"/v1/studies/{'f' * 32}/export.csv?part=tests",
                        headers=AUTH)).status_code == 404
    assert (await c.get(f"/v1/studies/{sid}/export.zip")).status_code == 401


async def test_zip_bundle_record_methods_and_report(running: Running,
                                                    study: dict[str, Any]) -> None:
    c, sid = running.client, study["id"]
    answer = await c.get(f"/v1/studies/{sid}/export.zip", headers=AUTH)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(answer.content))
    names = {n.split("/", 1)[1] for n in archive.namelist()}
    assert {"table1.csv", "table1_formatted.csv", "tests.csv", "effects.csv", "boxplots.csv",
            "table.csv", "centers.csv", "reproducibility.csv", "methods.txt", "spec.json",
            "reproducibility.json"} <= names
    assert "dp_quantiles.csv" not in names  # nothing of it
    spec = json.loads(archive.read(f"study-{sid}/spec.json"))
    assert spec["title"] == SPEC["title"] and spec["primary"]["test"] == "sum"
    # The same study gives the same bytes (fixed timestamps).
    again = await c.get(f"/v1/studies/{sid}/export.zip", headers=AUTH)
    assert again.content == answer.content

    record = study["reproducibility"]
    assert record["software"] == json.loads(software().model_dump_json())
    assert record["software"]["version"] and (
        record["software"]["commit"] is None) == (record["software"]["commit_note"] == NO_COMMIT)
    assert record["k"] == K and len(record["spec_sha256"]) == 64
    assert {r["center"] for r in record["centers"]} == {"alpha", "beta", "gamma"}
    for center in record["centers"]:
        # As the centers published them in their info; ε as the releases stated it.
        assert center["epoch"] == 1 and center["k"] == K and center["data_fingerprint"] is None
        spent = sum(p["epsilon"] or 0 for p in study["provenance"]
                    if p["center"] == center["center"])
        assert center["epsilon"] == pytest.approx(spent) and center["epsilon"] >= 2.0 + 4.0
        assert "laplace" in center["mechanisms"]
    assert "none public" in record["seeds"]
    assert json.loads(archive.read(f"study-{sid}/reproducibility.json")) == record
    # Polling without the provenance carries no record (it is read from the releases).
    polled = (await c.get(f"/v1/studies/{sid}?provenance=false", headers=AUTH)).json()
    assert polled["reproducibility"] is None

    text = archive.read(f"study-{sid}/methods.txt").decode()
    assert text == methods_paragraph(study) + "\n"
    for said in ["across 3 centers (alpha, beta, gamma)", f"K = {K}",
                 "the sum test", "Fisher's combination", "all two-sided",
                 "primary test was the sum test at α = 0.01",
                 "Laplace noise at ε = 2", "Newcombe 2006, Method 5", "widened for the DP noise",
                 "at ε = 4 per box", "(ε = 8 in all)",
                 "each center's box by DPBoxplot (Ramsay & Diaz-Rodriguez 2025)",
                 "Hay et al. 2010", "Table 1", "ε-DP at ε = 1 per variable and arm",
                 f"{record['software']['name']} {record['software']['version']}",
                 "epoch 1", "References", "Statistics in Medicine 25, 559-573"]:
        assert said in text, said

    page = render_html(study)
    assert f"<title>{SPEC['title']}</title>" in page and SPEC["description"][:20] in page
    assert "sum (primary, α = 0.01)" in page and "Primary test (pre-specified)" in page
    assert "<h2>Methods</h2>" in page and "<h2>Reproducibility record</h2>" in page
    assert "alpha: ctl" in page  # per-center columns in Table 1
    assert SPEC["title"] in summary(study) and "  sum*  " in summary(study)
    header, _ = table_one(study["result"]["analyses"][2], ["ctl", "trt"])
    assert header == ["variable", "ctl", "trt", "Overall"]  # without per_center as before

    listed = (await c.get("/v1/studies", headers=AUTH)).json()
    assert listed[0]["title"] == SPEC["title"]
    assert exports.part_csv(study, "tests") == (
        await c.get(f"/v1/studies/{sid}/export.csv?part=tests", headers=AUTH)).text


async def test_xlsx_workbook_holds_the_csv_tables_with_numbers_as_numbers(
        running: Running, study: dict[str, Any]) -> None:
    from openpyxl import load_workbook

    c, sid = running.client, study["id"]
    answer = await c.get(f"/v1/studies/{sid}/export.xlsx", headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == XLSX
    book = load_workbook(io.BytesIO(answer.content))
    files = exports.csv_files(study)
    parts = [name.removesuffix(".csv") for name in files if name.endswith(".csv")]
    assert book.sheetnames == [*parts, "methods", "spec"]
    for part in parts:
        rows = list(csv.reader(io.StringIO(files[f"{part}.csv"])))
        sheet = [[("" if v is None else v) for v in row]
                 for row in book[part].iter_rows(values_only=True)]
        assert len(sheet) == len(rows), part
        assert [str(v) for v in sheet[0]] == rows[0], part
        for got, want in zip(sheet[1:], rows[1:], strict=True):
            for g, w in zip(got, want, strict=True):
                if isinstance(g, bool):  # TRUE/FALSE in the CSV
                    assert w == ("TRUE" if g else "FALSE"), (part, g, w)
                elif isinstance(g, (int, float)):  # a number: the CSV's to 15 digits
                    assert g == pytest.approx(float(w), rel=1e-14, abs=0), (part, g, w)
                else:
                    assert g == w, (part, g, w)
    tests = [dict(zip(rows := [str(v) for v in next(book["tests"].iter_rows(values_only=True))],
                      r, strict=True)) for r in book["tests"].iter_rows(min_row=2,
                                                                        values_only=True)]
    assert rows and all(isinstance(t["pvalue"], float) for t in tests)
    methods = ["" if r[0] is None else r[0] for r in book["methods"].iter_rows(values_only=True)]
    assert methods == methods_paragraph(study).splitlines()  # a line per row
    assert json.loads(book["spec"]["A1"].value) == study["spec"]
    again = await c.get(f"/v1/studies/{sid}/export.xlsx", headers=AUTH)
    assert again.content == answer.content  # the same study, the same bytes
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:  # no time of writing in it
        core = archive.read("docProps/core.xml").decode()
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in archive.infolist())
    stamps = re.findall(r"<dcterms:(?:created|modified)[^>]*>([^<]*)<", core)
    assert stamps == ["1980-01-01T00:00:00Z"] * 2, core
    assert (await c.get(f"/v1/studies/{sid}/export.xlsx")).status_code == 401


async def test_exports_need_a_result(running: Running) -> None:
    # A pending study of the configured token's analyst (made in the store: it never runs).
    store = running.app.state.services.store
    owner = "config-" + hashlib.sha256(ANALYST_TOKEN.encode()).hexdigest()[:16]
    pending = store.create_study("e" * 32, StudySpec.model_validate(SPEC).model_dump_json(),
                                 analyst_id=owner)
    for path in ["export.zip", "export.csv?part=tests", "export.xlsx"]:
        early = await running.client.get(f"/v1/studies/{pending.id}/{path}", headers=AUTH)
        assert early.status_code == 409 and "exports need a result" in early.json()["detail"]


def test_the_commit_is_read_from_git_files_or_said_unknown(tmp_path: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert git_commit(tmp_path) is None  # not a git checkout: unknown, never invented
    repo = tmp_path / "repo"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert git_commit(repo) is None  # a ref with no commit yet
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs\n{commit} refs/heads/main\n")
    assert git_commit(repo) == commit
    (repo / ".git" / "refs" / "heads" / "main").write_text(commit.replace("0", "f") + "\n")
    assert git_commit(repo) == commit.replace("0", "f")  # a loose ref wins over packed-refs
    # A worktree: .git is a file naming its own git dir, whose commondir holds the refs.
    tree, own = tmp_path / "tree", repo / ".git" / "worktrees" / "tree"
    tree.mkdir()
    own.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {own}\n")
    (own / "commondir").write_text("../..\n")
    (own / "HEAD").write_text("ref: refs/heads/main\n")
    assert git_commit(tree) == commit.replace("0", "f")
    (own / "HEAD").write_text(commit + "\n")  # detached
    assert git_commit(tree) == commit
    (own / "HEAD").write_text("garbage\n")
    assert git_commit(tree) is None


async def test_every_analysis_with_numbers_to_draw_has_a_figure(
        running: Running, study: dict[str, Any]) -> None:
    c, sid = running.client, study["id"]

    async def figure(index: int, query: str = "") -> Any:
        return await c.get(f"/v1/studies/{sid}/analyses/{index}/figure{query}", headers=AUTH)

    effects = await figure(1, "?name=effects")
    assert effects.status_code == 200 and effects.content.startswith(b"<?xml")
    assert b"stratified" in effects.content
    png = await figure(1, "?name=effects&format=png")
    assert png.content[:4] == b"\x89PNG"
    # An mwu with the table test: its table by default, its effects by name.
    assert b"cumulative" in (await figure(1)).content
    missing = await figure(0, "?name=effects")
    assert missing.status_code == 404 and "(it has: table)" in missing.json()["detail"]
    assert (await figure(2)).status_code == 404  # describe: a table, no figure
    assert (await figure(1, "?name=bogus")).status_code == 422

    spec = {"dataset": "cohort", "variable": "crp", "groups": ["ctl", "trt"], "k": K,
            "analyses": [{"kind": "table"}, {"kind": "quantiles", "levels": [0.25, 0.5, 0.75]},
                         {"kind": "dp_quantiles", "epsilon": 1.0, "bounds": [0, 100],
                          "levels": [0.25, 0.5, 0.75], "group": "trt"}]}
    other = await running.run(spec)
    for index, shown in [(1, b"yj_table"), (2, b"gamma")]:
        answer = await c.get(f"/v1/studies/{other['id']}/analyses/{index}/figure",
                             headers=AUTH)
        assert answer.status_code == 200 and shown in answer.content, index
