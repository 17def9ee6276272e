"""The web console in a real browser: Debian's Chromium driven by Playwright (its executable, no
browser download), against a real center process and a real coordinator process.

One analyst signs in, reads the catalog, builds a study, sees the dry run's ε before submitting,
watches the study finish, reads a p-value and the boxplots, downloads a figure and signs out; a
second analyst cannot open the first one's study; a form without the session's CSRF token is
refused; the pages keep to the keyboard and to a narrow screen. Screenshots of each page go to
``test-output/console/`` (``FEDSTATS_TEST_OUTPUT`` overrides the folder).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.accounts import Accounts
from coordinator.db import Store
from tests.helpers.center import center_process
from tests.helpers.coordinator import coordinator_config
from tests.helpers.processes import REPO, running_coordinator
from tests.helpers.timing import scaled

pytestmark = pytest.mark.process

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).is_file():
    pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
                allow_module_level=True)

OUTPUT = Path(os.environ.get("FEDSTATS_TEST_OUTPUT", REPO / "test-output")) / "console"


@dataclass
class Console:
    url: str
    ann: str
    bob: str


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    workdir = tmp_path_factory.mktemp("console")
    # A second dataset declaring other names (y only; levels a and c): the builder offers
    # only the chosen dataset's.
    with center_process(workdir, {"cohort": 5.0, "visits": 5.0}, declared={"visits": {
            "variables": ["y"], "group": {"column": "arm", "levels": ["a", "c"]}}}) as center:
        config, port = coordinator_config(workdir / "coordinator.toml", {"alpha": center.url},
                                          min_centers=1)
        store = Store(f"sqlite:///{config.with_suffix('.sqlite')}")
        accounts = Accounts(store)
        ann = accounts.add("Ann Analyst", "admin").token
        bob = accounts.add("Bob Other").token
        store.close()
        with running_coordinator(config, port):
            yield Console(f"http://127.0.0.1:{port}", ann, bob)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


def sign_in(page: object, console: Console, token: str) -> None:
    page.goto(console.url + "/ui")  # type: ignore[attr-defined]
    assert page.url.endswith("/ui/login")  # type: ignore[attr-defined]
    page.get_by_label("Analyst token").fill(token)  # type: ignore[attr-defined]
    page.get_by_role("button", name="Sign in").click()  # type: ignore[attr-defined]
    page.wait_for_url(re.compile(r".*/ui/studies$"))  # type: ignore[attr-defined]


def offers(select: object, names: list[str]) -> None:
    """Wait until the select offers exactly ``names`` (the chosen dataset's: the page's script
    hides the others, once the page is loaded and whenever the dataset changes)."""
    sync_api.expect(select.locator(  # type: ignore[attr-defined]
        "option:not([hidden]):not([disabled])")).to_have_text(names, timeout=scaled(30) * 1000)


def shot(page: object, name: str) -> None:
    page.screenshot(path=str(OUTPUT / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def test_an_analyst_builds_runs_reads_and_downloads(console: Console, browser: object,
                                                    tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900},  # type: ignore[attr-defined]
                                  accept_downloads=True)
    page = context.new_page()
    page.goto(console.url + "/ui/login")
    shot(page, "01-sign-in")
    # A wrong token is refused on the page, not with a trace.
    page.get_by_label("Analyst token").fill("fsa_000000000000_nope")
    page.get_by_role("button", name="Sign in").click()
    assert "not valid" in page.get_by_role("alert").inner_text()
    sign_in(page, console, console.ann)
    # The session cookie is HttpOnly and SameSite=Strict.
    [cookie] = [c for c in context.cookies() if c["name"] == "fedstats_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

    page.get_by_role("link", name="Catalog").click()
    assert "cohort" in page.locator("main").inner_text()
    shot(page, "02-catalog")

    page.get_by_role("link", name="New study").first.click()
    page.get_by_label("Title").fill("Console: x by arm")
    page.get_by_label("Description").fill("Does b differ from a? Primary: the sum test.")
    page.get_by_label("Variable", exact=True).select_option("x")
    page.get_by_label("Group X").select_option("a")
    page.get_by_label("Group Y").select_option("b")
    page.get_by_label("Primary test (pre-registered)").select_option("sum")
    boxes = page.locator("#analysis-dp_boxplot")
    boxes.get_by_label("DP boxplots", exact=True).check()
    boxes.get_by_label("ε", exact=True).fill("0.5")
    boxes.get_by_label("bounds: lower").fill("0")
    boxes.get_by_label("bounds: upper").fill("100")
    page.get_by_role("button", name="Dry run (nothing is spent)").click()
    plan = page.locator("section.plan").inner_text()
    assert "The study would run" in plan and "alpha" in plan
    # ε per center before submitting: the boxplots' per-center and pooled boxes, 2 × 0.5.
    assert re.search(r"alpha\s+10\s+1\b", plan), plan
    shot(page, "03-dry-run")

    page.get_by_role("button", name="Submit the study").click()
    page.wait_for_url(re.compile(r".*/ui/studies/[0-9a-f]{32}$"))
    study_url = page.url
    # The page follows the study and reloads with its results when it ends.
    page.wait_for_selector("section.report", timeout=scaled(120) * 1000)
    assert page.locator("[data-field=status]").inner_text() == "succeeded"
    report = page.locator("section.report").inner_text()
    assert "Mann-Whitney tests" in report
    pvalue = page.locator("section.report table").nth(1).locator("tr").nth(1)
    value = float(pvalue.locator("td").last.inner_text())
    assert 0.0 <= value <= 1.0
    assert page.locator("section.report figure svg").count() >= 2  # the table and the boxes
    assert "outliers" in report or "above" in page.locator("section.report").inner_html()
    shot(page, "04-study")
    # The picture the README shows (docs/img/console.png is a copy of one such run's).
    page.screenshot(path=str(OUTPUT / "console.png"))

    with page.expect_download() as download_info:
        page.get_by_role("link", name=re.compile(r"DP boxplots \(SVG\)")).click()
    saved = tmp_path / "boxplots.svg"
    download_info.value.save_as(saved)
    assert saved.read_bytes().startswith(b"<?xml") and b"<svg" in saved.read_bytes()

    # The title heads the page; the primary test is marked; every table downloads as CSV, in
    # one zip with the Methods paragraph.
    assert "Console: x by arm" in page.locator("h1").inner_text()
    assert "sum (primary, α = 0.05)" in report and "Methods" in report
    with page.expect_download() as download_info:
        page.get_by_role("link", name="All tables (CSV zip)").click()
    bundle = tmp_path / "study.zip"
    download_info.value.save_as(bundle)
    with zipfile.ZipFile(bundle) as archive:
        files = {n.split("/", 1)[1]: archive.read(n).decode() for n in archive.namelist()}
    tests_csv = list(csv.DictReader(io.StringIO(files["tests.csv"])))
    assert (tests_csv[0]["test"], tests_csv[0]["primary"], tests_csv[0]["alpha"]) == (
        "sum", "TRUE", "0.05")
    assert float(tests_csv[0]["pvalue"]) == pytest.approx(value, rel=1e-3)  # as shown, rounded
    assert "The pre-specified primary test was the sum test at α = 0.05" in files["methods.txt"]
    with page.expect_download() as download_info:  # the same tables as one workbook
        page.get_by_role("link", name="All tables (XLSX)").click()
    workbook = tmp_path / "study.xlsx"
    download_info.value.save_as(workbook)
    from openpyxl import load_workbook
    sheets = load_workbook(workbook)
    assert "tests" in sheets.sheetnames and sheets["tests"]["A1"].value == "analysis"
    with page.expect_download() as download_info:
        page.get_by_role("link", name="Effect sizes (CSV)").click()
    effects = tmp_path / "effects.csv"
    download_info.value.save_as(effects)
    assert effects.read_text().startswith("analysis,center,n_x,n_y,estimate,low,high")

    page.get_by_role("link", name="Studies").click()
    assert "succeeded" in page.locator("table.studies").inner_text()
    assert "Console: x by arm" in page.locator("table.studies").inner_text()
    shot(page, "05-studies")
    page.get_by_role("link", name="Centers").click()
    assert "alpha" in page.locator("main").inner_text()
    shot(page, "06-centers")
    page.get_by_role("link", name="Audit log").click()
    assert "study.create" in page.locator("main").inner_text()
    shot(page, "07-audit")

    # A narrow screen: nothing wider than the screen but the tables' own scrolling boxes.
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(study_url)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1, width
    shot(page, "08-study-narrow")
    page.set_viewport_size({"width": 1280, "height": 900})

    # The keyboard: the first Tab reaches the skip link, which moves focus to the content.
    page.goto(console.url + "/ui/studies")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r".*/ui/login$"))
    page.goto(study_url)
    assert page.url.endswith("/ui/login")
    context.close()
    (OUTPUT / "study_url.txt").write_text(study_url)


def test_an_analyst_builds_table_one_and_dp_quantiles_from_the_catalog(
        console: Console, browser: object) -> None:
    """Two analyses, every name picked from the catalog (none typed), each DP analysis its own
    ε, bounds and group: dry run, submit, and both results read on the study's page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    sign_in(page, console, console.ann)
    page.get_by_role("link", name="New study").first.click()
    # The study's variable is a choice among the catalog's, not a text box.
    variable = page.get_by_label("Variable", exact=True)
    assert variable.evaluate("e => e.tagName") == "SELECT"
    offers(variable, ["x", "y"])  # the first dataset's
    page.get_by_label("Title").fill("Console: Table 1 and DP quantiles")
    variable.select_option("x")
    page.get_by_label("Group X").select_option("a")
    page.get_by_label("Group Y").select_option("b")
    for kind in ("table", "mwu", "quantiles"):  # the analyses ticked by default: not these
        page.locator(f"#analysis-{kind} legend input").uncheck()
    table_one = page.locator("#analysis-describe")
    table_one.get_by_label("Descriptive statistics (Table 1)").check()
    described = table_one.get_by_role("group", name="variables")
    described.get_by_label("x", exact=True).check()
    described.get_by_label("y", exact=True).check()
    quantiles = page.locator("#analysis-dp_quantiles")
    quantiles.get_by_label("DP quantiles (per center)").check()
    quantiles.get_by_label("ε", exact=True).fill("0.5")
    quantiles.get_by_label("bounds: lower").fill("0")
    quantiles.get_by_label("bounds: upper").fill("100")
    assert quantiles.get_by_label("levels", exact=True).input_value() == "0.25, 0.5, 0.75"
    quantiles.get_by_label("group", exact=True).select_option("b")
    page.get_by_role("button", name="Dry run (nothing is spent)").click()
    plan = page.locator("section.plan").inner_text()
    # The DP quantiles' own ε, once per center; Table 1 from the tables spends none.
    assert "The study would run" in plan and re.search(r"alpha\s+10\s+0\.5\b", plan), plan
    shot(page, "09-dry-run-two-analyses")
    page.get_by_role("button", name="Submit the study").click()
    page.wait_for_url(re.compile(r".*/ui/studies/[0-9a-f]{32}$"))
    page.wait_for_selector("section.report", timeout=scaled(120) * 1000)
    assert page.locator("[data-field=status]").inner_text() == "succeeded"
    report = page.locator("section.report").inner_text()
    assert "Table 1" in report and "DP quantiles" in report
    shot(page, "10-table-one-and-dp-quantiles")
    context.close()


def test_another_analyst_cannot_open_the_study(console: Console, browser: object) -> None:
    marker = OUTPUT / "study_url.txt"
    if not marker.exists():
        pytest.skip("needs the study of test_an_analyst_builds_runs_reads_and_downloads")
    study_url = marker.read_text()
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    sign_in(page, console, console.bob)
    answer = page.goto(study_url)
    assert answer.status == 404
    assert "no study" in page.get_by_role("alert").inner_text().lower()
    assert "succeeded" not in page.locator("main").inner_text()
    # Nor its figure or its JSON.
    assert page.request.get(study_url + "/json").status == 404
    assert page.request.get(study_url + "/figures/0.svg").status == 404
    context.close()


def test_a_form_without_the_csrf_token_is_refused(console: Console, browser: object) -> None:
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    sign_in(page, console, console.ann)
    before = page.locator("table.studies tbody tr").count()
    # The session cookie goes with it (as with a forged cross-site form), the token does not.
    forged = page.request.post(console.url + "/ui/studies/new", multipart={
        "dataset": "cohort", "variable": "x", "k": "10", "analyses": "table",
        "action": "submit"}, max_redirects=0)
    assert forged.status == 403
    wrong = page.request.post(console.url + "/ui/logout", form={"csrf_token": "guess"},
                              max_redirects=0)
    assert wrong.status == 403
    page.goto(console.url + "/ui/studies")
    assert page.locator("table.studies tbody tr").count() == before  # nothing was created
    context.close()


def test_an_analyst_asks_two_analyses_of_a_kind_of_the_chosen_datasets_names(
        console: Console, browser: object) -> None:
    """A dataset chosen: only its variables and levels are offered, and again on changing it.
    Two DP quantiles added to the first, one of them removed: the dry run shows both left,
    each its own ε, and the study runs them both."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    # Every wait of this test (a page after Add or Remove, an element, an assertion) may take
    # as long as the machine's load makes it.
    context.set_default_timeout(scaled(30) * 1000)
    expect = sync_api.expect
    page = context.new_page()
    sign_in(page, console, console.ann)
    page.get_by_role("link", name="New study").first.click()
    dataset = page.get_by_label("Dataset", exact=True)
    variable = page.get_by_label("Variable", exact=True)
    group_x = page.get_by_label("Group X")
    quantiles = page.locator("#analysis-dp_quantiles")
    described = page.locator("#analysis-describe").get_by_role("group", name="variables")
    offers(variable, ["x", "y"])
    offers(group_x, ["(none: one group)", "a", "b"])
    dataset.select_option("visits")
    offers(variable, ["y"])
    offers(group_x, ["(none: one group)", "a", "c"])
    offers(quantiles.get_by_label("group", exact=True), ["(none)", "a", "c"])
    expect(described.get_by_label("x", exact=True)).to_be_hidden()
    expect(described.get_by_label("y", exact=True)).to_be_visible()
    shot(page, "11-names-of-one-dataset")
    dataset.select_option("cohort")
    offers(variable, ["x", "y"])
    offers(group_x, ["(none: one group)", "a", "b"])
    expect(described.get_by_label("x", exact=True)).to_be_visible()

    page.get_by_label("Title").fill("Console: two DP quantiles")
    variable.select_option("x")
    for kind in ("table", "mwu", "quantiles"):  # the analyses ticked by default: not these
        page.locator(f"#analysis-{kind} legend input").uncheck()
    quantiles.get_by_label("DP quantiles (per center)").check()
    quantiles.get_by_label("ε", exact=True).fill("0.5")
    quantiles.get_by_label("bounds: lower").fill("0")
    quantiles.get_by_label("bounds: upper").fill("100")
    quantiles.get_by_label("group", exact=True).select_option("a")
    # Two more of the kind (each added one the page again, with what was filled kept).
    add = page.get_by_role("button", name="Add another: DP quantiles (per center)")
    add.click()
    second = page.locator("#analysis-dp_quantiles-2")
    expect(second).to_be_visible()
    expect(quantiles.get_by_label("ε", exact=True)).to_have_value("0.5")
    add.click()
    third = page.locator("#analysis-dp_quantiles-3")
    expect(third).to_be_visible()
    expect(third.get_by_label("DP quantiles (per center) #3")).to_be_checked()
    expect(third.get_by_label("DP quantiles (per center) #3")).to_be_focused()  # went on there
    second.get_by_role("button", name="Remove: DP quantiles (per center) #2").click()
    expect(second).to_have_count(0)
    expect(add).to_be_focused()
    expect(third).to_be_visible()
    # The page came back with the dataset chosen: still only its names.
    offers(variable, ["x", "y"])
    expect(variable).to_have_value("x")
    third.get_by_label("ε", exact=True).fill("0.25")
    third.get_by_label("bounds: lower").fill("0")
    third.get_by_label("bounds: upper").fill("100")
    third.get_by_label("levels", exact=True).fill("0.25, 0.75")
    third.get_by_label("group", exact=True).select_option("b")
    # Enter in a field is the form's default action, a dry run: never an Add or a Remove.
    third.get_by_label("levels", exact=True).press("Enter")
    plan = page.locator("section.plan")
    expect(plan).to_be_visible()
    expect(page.locator("fieldset.analysis[id^=analysis-dp_quantiles]")).to_have_count(2)
    text = plan.inner_text()
    # Both left, each its own ε: 0.5 + 0.25 per center; each its own errors.
    assert "The study would run" in text and re.search(r"alpha\s+10\s+0\.75\b", text), text
    assert "analysis 0 (dp_quantiles)" in text and "analysis 1 (dp_quantiles)" in text, text
    asked = plan.locator("table.asked").inner_text()
    assert re.search(r"0\s+DP quantiles \(per center\)\s+0\.5\b", asked), asked
    assert re.search(r"1\s+DP quantiles \(per center\) #3\s+0\.25\b", asked), asked
    shot(page, "12-dry-run-two-of-a-kind")
    page.get_by_role("button", name="Submit the study").click()
    page.wait_for_url(re.compile(r".*/ui/studies/[0-9a-f]{32}$"))
    page.wait_for_selector("section.report", timeout=scaled(120) * 1000)
    assert page.locator("[data-field=status]").inner_text() == "succeeded"
    report = page.locator("section.report").inner_text()
    assert "DP quantiles of a, per center" in report, report
    assert "DP quantiles of b, per center" in report, report
    spec = page.request.get(page.url + "/json").json()["spec"]
    assert [(a["kind"], a["epsilon"], a["group"]) for a in spec["analyses"]] == [
        ("dp_quantiles", 0.5, "a"), ("dp_quantiles", 0.25, "b")]
    assert spec["dataset"] == "cohort" and spec["analyses"][1]["levels"] == [0.25, 0.75]
    shot(page, "13-two-of-a-kind")
    context.close()
