"""The console's pages over in-process centers (``httpx.ASGITransport``): sign-in and its cookie,
CSRF on every form, the same ownership and roles as the API, a revoked analyst signed out at
once, the builder's errors as pages that say what to fix, a study from an uploaded TOML, and no
page without a session. The browser tests (``test_console_browser.py``) drive the same pages in
Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.analyses import REGISTRY
from coordinator.local import in_process_federation
from coordinator.ui.sessions import SESSION_COOKIE, digest
from tests.coordinator.test_coord_catalog import counted, serving
from tests.helpers.coordinator import CountingCenter, Federations, cohort, make_data

pytestmark = pytest.mark.anyio

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
STUDY_TOML = """\
dataset = "cohort"
variable = "crp"
groups = ["ctl", "trt"]
k = 10

[[analyses]]
kind = "table"
"""


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, token: str) -> httpx.Response:
    form = await client.get("/ui/login")
    return await client.post("/ui/login", data={"csrf_token": csrf_of(form), "token": token})


async def builder_post(client: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    csrf = csrf_of(await client.get("/ui/studies/new"))
    files = fields.pop("files", None)
    return await client.post("/ui/studies/new", data={"csrf_token": csrf, **fields},
                             files=files)


async def test_no_page_without_a_session_and_the_sign_in(tmp_path: Path,
                                                         federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        client = coord.client
        for path in ("/ui", "/ui/studies", "/ui/catalog", "/ui/studies/new", "/ui/centers",
                     "/ui/audit", "/ui/studies/" + "f" * 32):
            answer = await client.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"] in ("/ui/login", "/ui/studies"), path
        assert (await client.get("/ui/studies/abc/status")).status_code == 401
        assert (await client.get("/ui/studies/abc/events")).status_code == 401
        assert (await client.get("/ui/static/console.css")).status_code == 200
        # The API keeps its bearer gate: a console cookie is no token.
        ann = coord.app.state.services.accounts.add("ann")
        # A sign-in form that did not come from this coordinator (no matching cookie).
        bare = httpx.AsyncClient(transport=client._transport, base_url="http://coordinator")
        async with bare:
            forged = await bare.post("/ui/login", data={"csrf_token": "x", "token": ann.token})
            assert forged.status_code == 403 and SESSION_COOKIE not in forged.cookies
        wrong = await sign_in(client, "fsa_000000000000_wrong")
        assert wrong.status_code == 401 and "not valid" in wrong.text
        signed = await sign_in(client, ann.token)
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        assert "Secure" not in cookie  # plain HTTP here; over TLS it is (next test)
        assert (await client.get("/v1/studies")).status_code == 401
        # Only the cookie's digest is stored.
        session_id = client.cookies[SESSION_COOKIE]
        store = coord.app.state.services.store
        assert store.get_session(digest(session_id)) is not None
        assert store.get_session(session_id) is None


async def test_over_tls_the_cookie_is_secure(tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        async with httpx.AsyncClient(transport=coord.client._transport,
                                     base_url="https://coordinator") as client:
            signed = await sign_in(client, ann.token)
            assert signed.status_code == 303 and "Secure" in signed.headers["set-cookie"]


async def test_forms_need_the_sessions_csrf_token(tmp_path: Path,
                                                  federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        for path in ("/ui/studies/new", "/ui/logout", "/ui/studies/abc/cancel"):
            for token in (None, "guess"):
                data = {"dataset": "cohort", "variable": "crp", "analyses": "table",
                        "action": "submit", **({"csrf_token": token} if token else {})}
                answer = await coord.client.post(path, data=data)
                assert answer.status_code == 403, (path, token)
        assert coord.app.state.services.store.list_studies(visible_to=None) == []


async def test_builder_errors_say_what_to_fix_and_a_toml_upload_runs(
        tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        bad_k = await builder_post(coord.client, dataset="cohort", variable="crp", k="1",
                                   analyses="table", action="plan")
        assert bad_k.status_code == 422 and "k" in bad_k.text and 'role="alert"' in bad_k.text
        unknown = await builder_post(coord.client, dataset="cohort", variable="nope", k="10",
                                     analyses="table", action="submit")
        assert unknown.status_code == 422 and "nope" in unknown.text
        broken = await builder_post(coord.client, toml="dataset = ", action="submit")
        assert broken.status_code == 422 and "study TOML" in broken.text
        # A study file instead of the fields: submitted, and shown.
        made = await builder_post(coord.client, action="submit",
                                  files={"toml_file": ("study.toml", STUDY_TOML.encode())})
        assert made.status_code == 303, made.text[-2000:]
        study_id = made.headers["location"].rsplit("/", 1)[1]
        await coord.app.state.services.runner.wait(study_id)
        page = await coord.client.get(made.headers["location"])
        assert page.status_code == 200 and "Federated K-anonymous table" in page.text
        figure = await coord.client.get(f"/ui/studies/{study_id}/figures/0.png")
        assert figure.headers["content-type"] == "image/png"
        raw = await coord.client.get(f"/ui/studies/{study_id}/json")
        assert raw.json()["id"] == study_id
        status = (await coord.client.get(f"/ui/studies/{study_id}/status")).json()
        assert status["status"] == "succeeded" and status["releases_received"] > 0
        # The live pages' stream: an ended study is one event, its end.
        events = await coord.client.get(f"/ui/studies/{study_id}/events")
        assert events.headers["content-type"].startswith("text/event-stream")
        assert events.text.count("event: ") == 1 and "event: end\n" in events.text
        assert f'"releases_received":{status["releases_received"]}' in events.text


async def test_ownership_roles_and_revocation_as_in_the_api(tmp_path: Path,
                                                            federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        accounts = coord.app.state.services.accounts
        ann, bob = accounts.add("ann"), accounts.add("bob")
        transport = coord.client._transport
        await sign_in(coord.client, ann.token)
        made = await builder_post(coord.client, action="submit",
                                  files={"toml_file": ("s.toml", STUDY_TOML.encode())})
        study = made.headers["location"]
        await coord.app.state.services.runner.wait(study.rsplit("/", 1)[1])
        # Not an admin: no centers page, no audit log.
        assert (await coord.client.get("/ui/centers")).status_code == 403
        assert (await coord.client.get("/ui/audit")).status_code == 403
        async with httpx.AsyncClient(transport=transport, base_url="http://coordinator") as other:
            await sign_in(other, bob.token)
            for path in (study, study + "/json", study + "/figures/0.svg", study + "/status",
                         study + "/events"):
                assert (await other.get(path)).status_code == 404, path
            assert study.rsplit("/", 1)[1] not in (await other.get("/ui/studies")).text
        # Revoked: signed out at the next request.
        accounts.revoke(ann.analyst.id)
        assert (await coord.client.get("/ui/studies")).status_code == 303


async def test_the_builder_offers_every_analysis_from_the_catalog_and_marks_what_to_fix(
        tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, counted(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        page = (await coord.client.get("/ui/studies/new")).text
        for kind in REGISTRY:  # each its own fields, generated from its spec model
            assert f'id="analysis-{kind}"' in page, kind
        # Names are picked from the catalog, not typed: the variable, each DP group level,
        # Table 1's variables.
        assert '<select id="variable" name="variable">' in page
        assert re.search(r'<select id="f-dp_boxplot-group" name="dp_boxplot.group"[^>]*>\s*'
                         r'<option value="">\(none\)</option>\s*<option value="ctl" '
                         r'data-datasets="cohort">', page)
        assert 'name="describe.variables" value="crp"' in page
        study = {"dataset": "cohort", "variable": "crp", "group_x": "ctl", "group_y": "trt",
                 "k": "10"}
        # The spec model's refusal (the API's rules) marks the field it comes from.
        low = await builder_post(coord.client, **study, analyses="dp_boxplot",
                                 action="plan", **{"dp_boxplot.epsilon": "0",
                                                   "dp_boxplot.bounds.0": "0",
                                                   "dp_boxplot.bounds.1": "300"})
        assert low.status_code == 422
        assert re.search(r'name="dp_boxplot.epsilon" value="0"[^>]* aria-invalid="true"',
                         low.text)
        assert "DP boxplots › ε: Input should be greater than or equal to" in low.text
        # A group level the centers do not declare (the catalog's 422): the same.
        dp = {"dp_quantiles.epsilon": "1", "dp_quantiles.bounds.0": "0",
              "dp_quantiles.bounds.1": "300", "dp_quantiles.levels": "0.5"}
        unknown = await builder_post(coord.client, **study, analyses="dp_quantiles",
                                     action="submit", **dp, **{"dp_quantiles.group": "nope"})
        assert unknown.status_code == 422
        assert re.search(r'<select id="f-dp_quantiles-group" name="dp_quantiles.group" '
                         r'aria-invalid="true"', unknown.text), unknown.text[-3000:]
        assert "DP quantiles (per center) › group: group level &#39;nope&#39;" in unknown.text
        # Table 1 of the catalog's variable and DP quantiles of one arm: planned, then run.
        both = {**study, **dp, "dp_quantiles.group": "trt", "describe.variables": "crp",
                "describe.per_center": "true", "describe.pooled": "true",
                "analyses": ["describe", "dp_quantiles"]}
        planned = await builder_post(coord.client, **both, action="plan")
        assert planned.status_code == 200 and "The study would run" in planned.text
        made = await builder_post(coord.client, **both, action="submit")
        assert made.status_code == 303, made.text[-2000:]
        study_id = made.headers["location"].rsplit("/", 1)[1]
        await coord.app.state.services.runner.wait(study_id)
        record = coord.app.state.services.store.get_study(study_id)
        assert record is not None and record.status == "succeeded", record
        kinds = [a["kind"] for a in json.loads(record.spec)["analyses"]]
        assert kinds == ["describe", "dp_quantiles"]
        assert json.loads(record.spec)["analyses"][1]["group"] == "trt"
        shown = (await coord.client.get(made.headers["location"])).text
        assert "Table 1" in shown and "DP quantiles" in shown


def two_datasets(federation: Federations) -> dict[str, Any]:
    """Centers each declaring ``cohort`` (numeric crp) and ``visits`` (numeric sbp and the
    categorical smoking, by arm ctl and trt)."""
    centers = {}
    for cid, (x, y) in make_data().items():
        visits = federation.data / f"visits-{cid}.csv"
        smoking = ["never", "former", "current"]
        rows = [f"{float(v)!r},{smoking[i % 3]},{arm}"
                for arm, values in (("ctl", x), ("trt", y)) for i, v in enumerate(values)]
        visits.write_text("sbp,smoking,arm\n" + "\n".join(rows) + "\n")
        centers[cid] = {
            "cohort": cohort(federation.data / f"cohort-{cid}.parquet", x, y),
            "visits": {"source": {"kind": "csv", "path": str(visits)}, "variables": ["sbp"],
                       "categorical": {"smoking": smoking},
                       "group": {"column": "arm", "levels": ["ctl", "trt"]},
                       "epsilon_total": 1e6, "epsilon_per_request": 1e6}}
    made = in_process_federation(centers)
    for center in made.values():
        federation.adopt(center)
    return {cid: CountingCenter(port) for cid, port in made.items()}


async def test_several_analyses_of_a_kind_and_names_of_the_chosen_dataset(
        tmp_path: Path, federation: Federations) -> None:
    async with serving(tmp_path, two_datasets(federation)) as coord:
        ann = coord.app.state.services.accounts.add("ann")
        await sign_in(coord.client, ann.token)
        page = (await coord.client.get("/ui/studies/new")).text
        # Each name carries the datasets declaring it (the page's script offers only the
        # chosen dataset's); the categorical ones are offered where a categorical one is asked.
        assert '<option value="crp" data-datasets="cohort">' in page
        assert '<option value="sbp" data-datasets="visits">' in page
        assert '<option value="ctl" data-datasets="cohort visits">' in page
        assert re.search(r'<select id="f-categorical-variable" name="categorical.variable"[^>]*>'
                         r'\s*<option value="smoking" data-datasets="visits">', page)
        assert re.search(r'<label data-datasets="visits"><input type="checkbox" '
                         r'name="describe.categorical" value="smoking">', page)
        assert re.search(r'<div class="pair" data-datasets="visits">\s*<label '
                         r'for="f-describe-bounds-sbp-0">sbp: lower</label> <input '
                         r'id="f-describe-bounds-sbp-0" name="describe.bounds.sbp.0"', page)
        assert page.count('name="instances"') == len(REGISTRY) + 1  # a blank, then each kind's
        study = {"dataset": "visits", "variable": "sbp", "group_x": "ctl", "group_y": "trt",
                 "k": "10", "title": "two of a kind"}
        before = len(coord.app.state.services.store.list_studies())
        # A variable of another dataset: refused (the coordinator's names check), the field
        # marked with what the centers declare there.
        wrong = await builder_post(coord.client, **{**study, "variable": "crp"},
                                   analyses="table", action="submit")
        assert wrong.status_code == 422
        assert re.search(r'<select id="variable" name="variable" aria-invalid="true"',
                         wrong.text)
        assert ("variable &#39;crp&#39; is not declared in dataset &#39;visits&#39; by "
                "center(s) alpha, beta, gamma (declared there: sbp)") in wrong.text
        # Table 1 naming a numeric variable of the other dataset: its field marked too.
        other = await builder_post(coord.client, **study, analyses="describe", action="plan",
                                   **{"describe.variables": ["sbp", "crp"]})
        assert other.status_code == 200 and "would not run" in other.text
        assert "variable &#39;crp&#39; is not declared in dataset &#39;visits&#39;" in other.text
        # Add a second DP quantiles, then a third; remove the second: the page again, with
        # what was posted, each instance its own fields.
        dp = {"dp_quantiles.epsilon": "0.5", "dp_quantiles.bounds.0": "0",
              "dp_quantiles.bounds.1": "300", "dp_quantiles.levels": "0.5",
              "dp_quantiles.group": "ctl"}
        shown = await builder_post(coord.client, **study, **dp, instances=["", *REGISTRY],
                                   analyses=["dp_quantiles"], action="add:dp_quantiles")
        assert shown.status_code == 200
        assert 'id="analysis-dp_quantiles-2"' in shown.text
        assert re.search(r'name="analyses" value="dp_quantiles-2" checked', shown.text)
        assert 'name="dp_quantiles-2.levels" value="0.25, 0.5, 0.75"' in shown.text
        assert 'value="two of a kind"' in shown.text  # what was posted is kept
        # One analysis ticked, the page shown again: that one ticked, no other.
        bad = await builder_post(coord.client, **study, **{**dp, "dp_quantiles.epsilon": "x"},
                                 analyses="dp_quantiles", action="plan")
        assert bad.status_code == 422
        assert 'name="analyses" value="dp_quantiles" checked' in bad.text
        assert 'name="analyses" value="quantiles" checked' not in bad.text
        assert len(coord.app.state.services.store.list_studies()) == before  # nothing made
        on_page = [*REGISTRY, "dp_quantiles-2", "dp_quantiles-3"]
        removed = await builder_post(coord.client, **study, **dp, instances=["", *on_page],
                                     analyses=["dp_quantiles", "dp_quantiles-2",
                                               "dp_quantiles-3"],
                                     action="remove:dp_quantiles-2")
        assert 'id="analysis-dp_quantiles-2"' not in removed.text
        assert 'id="analysis-dp_quantiles-3"' in removed.text
        both = {**study, **dp, "instances": ["", *REGISTRY, "dp_quantiles-3"],
                "analyses": ["dp_quantiles", "dp_quantiles-3", "categorical"],
                "dp_quantiles-3.epsilon": "0.25", "dp_quantiles-3.bounds.0": "0",
                "dp_quantiles-3.bounds.1": "300", "dp_quantiles-3.levels": "0.25, 0.75",
                "dp_quantiles-3.group": "trt", "categorical.variable": "smoking"}
        # The dry run: each DP quantiles' ε (0.5 + 0.25 per center), each one's errors.
        planned = await builder_post(coord.client, **both, action="plan")
        assert planned.status_code == 200 and "The study would run" in planned.text
        assert re.search(r"<td>0\.75</td>", planned.text), planned.text[-3000:]
        assert "analysis 0 (dp_quantiles)" in planned.text
        assert "analysis 1 (dp_quantiles)" in planned.text
        assert re.search(r"<td>1</td><th scope=\"row\">DP quantiles \(per center\) #3</th>"
                         r"<td>0.25</td>", planned.text)
        assert "<td>2</td><th scope=\"row\">A categorical variable by arm</th><td>none</td>" \
            in planned.text
        made = await builder_post(coord.client, **both, action="submit")
        assert made.status_code == 303, made.text[-2000:]
        study_id = made.headers["location"].rsplit("/", 1)[1]
        await coord.app.state.services.runner.wait(study_id)
        record = coord.app.state.services.store.get_study(study_id)
        assert record is not None and record.status == "succeeded", record
        analyses = json.loads(record.spec)["analyses"]
        assert analyses == [
            {"kind": "dp_quantiles", "epsilon": 0.5, "bounds": [0.0, 300.0], "levels": [0.5],
             "algorithm": "joint_exp", "group": "ctl"},
            {"kind": "dp_quantiles", "epsilon": 0.25, "bounds": [0.0, 300.0],
             "levels": [0.25, 0.75], "algorithm": "joint_exp", "group": "trt"},
            {"kind": "categorical", "variable": "smoking", "mode": None, "epsilon": None,
             "per_center": True}]
