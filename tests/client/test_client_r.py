"""The R client (``clients/r``, the R package ``fedstats``): installed from source into a
temporary library (no network: ``R CMD INSTALL`` fetches nothing), then its testthat suite and
its vignette run against real services — three synthetic hospitals and a coordinator started
as ``fedstats demo`` starts them, their URL and token passed in the environment — and the
frames R made of its study are compared with the Python client's frames of the same study
(same columns, same values): the two clients give an analyst the same tables.

Skipped only where ``Rscript`` is missing (``.ci/run`` installs R with Debian's r-cran-*
packages where it is missing and it may); with R present, a missing R package fails."""

from __future__ import annotations

import http.server
import json
import math
import numbers
import os
import shutil
import ssl
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedstats_client import Client, Study
from tests.client.test_client_notebook import federation_configs
from tests.helpers.processes import REPO, running_center, running_coordinator
from tests.helpers.timing import scaled
from tests.helpers.tls import make_ca

PACKAGE = REPO / "clients" / "r"
RSCRIPT = shutil.which("Rscript")
# xml2: testthat's JUnit reporter, which the test reads the results from (only recommended by
# testthat's Debian package, so installed by name).
R_PACKAGES = ("httr2", "jsonlite", "testthat", "RcppTOML", "xml2")

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(RSCRIPT is None, reason="Rscript is not installed (Debian: apt-get "
                       "install r-base-core r-cran-httr2 r-cran-jsonlite r-cran-testthat "
                       "r-cran-rcpptoml r-cran-xml2)"),
]


def r_env(library: Path, **extra: str) -> dict[str, str]:
    """This environment without FEDSTATS_* settings, the package's library first, ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEDSTATS_")}
    env.update(R_LIBS=str(library), R_LIBS_USER=str(library), FEDSTATS_REPO=str(REPO),
               LANG="C.UTF-8", **extra)
    return env


def rscript(expr: str, env: dict[str, str], timeout_s: float = 300
            ) -> subprocess.CompletedProcess[str]:
    assert RSCRIPT is not None
    # A guard against a hung R, not a deadline: scaled by the machine's load.
    return subprocess.run([RSCRIPT, "--vanilla", "-e", expr], env=env, capture_output=True,
                          text=True, timeout=scaled(timeout_s))


@pytest.fixture(scope="module")
def r_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package installed from source into a library of the test's own."""
    library = tmp_path_factory.mktemp("r-library")
    env = r_env(library)
    missing = rscript(f"for (p in c({', '.join(repr(p) for p in R_PACKAGES)})) "
                      "if (!requireNamespace(p, quietly = TRUE)) cat(p, '')", env)
    assert missing.returncode == 0 and not missing.stdout.strip(), (
        f"R packages missing: {missing.stdout} {missing.stderr} (Debian: r-cran-<name>)")
    assert RSCRIPT is not None
    built = subprocess.run([str(Path(RSCRIPT).with_name("R")), "CMD", "INSTALL", "--no-docs",
                            "--no-multiarch", "-l", str(library), str(PACKAGE)], env=env,
                           capture_output=True, text=True, timeout=scaled(300))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return library


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(URL, analyst token) of the demo's federation, its centers declaring the categorical
    smoking column; every process stopped afterwards."""
    centers, config, port, token = federation_configs(tmp_path_factory.mktemp("federation"),
                                                      categorical=True)
    (a_config, a_port), (b_config, b_port), (c_config, c_port) = centers.values()
    with running_center(a_config, a_port), running_center(b_config, b_port), \
            running_center(c_config, c_port), running_coordinator(config, port):
        yield f"http://127.0.0.1:{port}", token


def test_the_package_loads_and_exports_every_public_function(r_library: Path) -> None:
    """The hand-written NAMESPACE exports every ``fs_*`` function (but the internal call) and
    nothing that does not exist."""
    shown = rscript('ns <- asNamespace("fedstats"); '
                    'cat(setdiff(ls(ns, pattern = "^fs_"), getNamespaceExports("fedstats")))',
                    r_env(r_library))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["fs_call"]


def test_the_r_builders_send_what_the_python_study_builds(r_library: Path) -> None:
    """``fs_add_shift``, ``fs_add_kruskal`` and ``fs_add_categorical`` send the spec Python's
    ``Study.shift``, ``.kruskal`` and ``.categorical`` build from the same arguments, defaults
    (NULL, None) left to the coordinator."""
    shown = rscript(
        'library(fedstats); '
        'spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |> '
        'fs_add_shift() |> fs_add_shift(level = 0.9) |> fs_add_kruskal() |> '
        'fs_add_kruskal(ordered = TRUE, alternative = "two-sided") |> '
        'fs_add_categorical("smoking") |> '
        'fs_add_categorical("smoking", mode = "dp", epsilon = 0.5, per_center = FALSE); '
        'cat(fedstats:::to_json(fedstats:::spec_body(spec)))', r_env(r_library))
    assert shown.returncode == 0, shown.stderr
    python = (Study("cohort", "los_days", groups=["control", "treated"])
              .shift().shift(level=0.9).kruskal().kruskal(ordered=True, alternative="two-sided")
              .categorical("smoking")
              .categorical("smoking", mode="dp", epsilon=0.5, per_center=False))
    assert json.loads(shown.stdout) == python.to_dict()
    python.spec()  # and the coordinator's model reads it


def test_the_r_client_runs_a_study_against_real_services(
    r_library: Path, coordinator: tuple[str, str], tmp_path: Path
) -> None:
    url, token = coordinator
    out, junit = tmp_path / "frames", tmp_path / "junit.xml"
    out.mkdir()
    tests = PACKAGE / "tests" / "testthat"
    reporters = (f'testthat::MultiReporter$new(list(testthat::SummaryReporter$new(), '
                 f'testthat::JunitReporter$new(file = "{junit}")))')
    ran = rscript(f'testthat::test_dir("{tests}", package = "fedstats", '
                  f'load_package = "installed", reporter = {reporters}, '
                  f'stop_on_failure = TRUE)',
                  r_env(r_library, FEDSTATS_COORDINATOR_URL=url, FEDSTATS_ANALYST_TOKEN=token,
                        FEDSTATS_R_OUT=str(out)))
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-3000:]
    assert token not in ran.stdout + ran.stderr

    # Every test ran (none skipped: the live ones saw the coordinator) and passed.
    suites = ET.parse(junit).getroot()
    counts = {k: sum(int(s.get(k, 0)) for s in suites.iter("testsuite"))
              for k in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts
    files = {s.get("name") for s in suites.iter("testsuite")}
    assert {"study", "errors", "spec", "vignette"} <= files, files
    assert counts["tests"] >= 100, counts

    # The frames R made of its study are the Python client's frames of the same study.
    study_id = (out / "study_id").read_text().strip()
    with Client(url, token=token) as fs:
        result = fs.study(study_id).result
    assert result is not None
    python = {"mwu": result.mwu.to_frame(), "effects": result.mwu.effects(),
              "table": result.table.to_frame(), "quantiles": result.quantiles.to_frame(),
              "dp_quantiles": result.dp_quantiles.to_frame(),
              "boxplots": result.boxplots.to_frame(), "describe": result.describe.to_frame()}
    for name, frame in python.items():
        assert_same_frame(name, pd.read_csv(out / f"{name}.csv"), frame)
    # The DP study (dp_mwu): its tests, effects and the centers' guarantees, the same frames.
    with Client(url, token=token) as fs:
        dp = fs.study((out / "dp_study_id").read_text().strip()).result
    assert dp is not None
    for name, frame in {"dp_mwu": dp.dp_mwu.to_frame(), "dp_effects": dp.dp_mwu.effects(),
                        "guarantees": dp.guarantees}.items():
        assert_same_frame(name, pd.read_csv(out / f"{name}.csv"), frame)
    # The shift, Kruskal-Wallis and categorical study: the same frames.
    with Client(url, token=token) as fs:
        arms = fs.study((out / "arms_study_id").read_text().strip()).result
    assert arms is not None
    for name, frame in {"shift": arms.shift.to_frame(), "kruskal": arms.kruskal.to_frame(),
                        "kruskal_arms": arms.kruskal.arms(),
                        "categorical": arms.categorical.to_frame(),
                        "categorical_tests": arms.categorical.tests()}.items():
        assert_same_frame(name, pd.read_csv(out / f"{name}.csv"), frame)


def assert_same_frame(name: str, r: pd.DataFrame, python: pd.DataFrame) -> None:
    """Every column of the Python frame (its index as columns) is in R's, row for row, with
    the same values (numbers to CSV's 15 digits)."""
    python = python.reset_index() if python.index.name or python.index.nlevels > 1 else python
    # List columns (a histogram's edges and counts, intervals, notes) are not in a CSV.
    listed = {"edges", "counts", "clip", "notes"}
    columns = [c for c in python.columns if c not in listed and not c.endswith("_interval")]
    assert set(columns) <= set(r.columns), (name, sorted(set(columns) - set(r.columns)))
    assert len(r) == len(python), (name, len(r), len(python))
    for column in columns:
        for i, (ours, theirs) in enumerate(zip(r[column], python[column], strict=True)):
            if theirs is None or (isinstance(theirs, float) and math.isnan(theirs)):
                assert pd.isna(ours), (name, column, i, ours)
            elif isinstance(theirs, bool | np.bool_):
                assert bool(ours) == bool(theirs), (name, column, i, ours, theirs)
            elif isinstance(theirs, numbers.Real):
                assert math.isclose(float(ours), float(theirs), rel_tol=1e-12, abs_tol=1e-12), (
                    name, column, i, ours, theirs)
            else:
                assert str(ours) == str(theirs), (name, column, i, ours, theirs)


class _Refusing(http.server.BaseHTTPRequestHandler):
    """Answers every call as the coordinator answers an unknown token (401, its error body)."""

    def do_GET(self) -> None:
        body = json.dumps({"error": "unauthenticated", "detail": "unknown token"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # keep the test's output clean
        pass


def test_the_r_client_trusts_a_private_ca_only_when_given_it(
    r_library: Path, tmp_path: Path
) -> None:
    """HTTPS with a private CA's certificate: without ``ca_bundle`` the R client refuses the
    certificate and says to pass the CA; with it, the handshake succeeds and the answer's error
    body arrives as its condition."""
    ca = make_ca(tmp_path / "ca")
    server_cert = ca.issue("coordinator", hosts=["127.0.0.1"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(server_cert.cert), str(server_cert.key))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        shown = rscript(
            'library(fedstats); '
            'show <- function(e) cat(class(e)[1], e$code, conditionMessage(e), "\\n", sep = "|"); '
            f'tryCatch(fs_catalog(fs_connect("{url}", token = "t0ken-x")), error = show); '
            f'tryCatch(fs_catalog(fs_connect("{url}", token = "t0ken-x", '
            f'ca_bundle = "{ca.cert}")), error = show)',
            r_env(r_library))
    finally:
        server.shutdown()
        server.server_close()
    assert shown.returncode == 0, shown.stderr
    untrusted, trusted = shown.stdout.strip().splitlines()
    assert untrusted.startswith("fedstats_connection_failed|tls|"), untrusted
    assert url in untrusted and "ca_bundle" in untrusted
    assert trusted.startswith("fedstats_authentication_error|unauthenticated|"), trusted
    assert "t0ken-x" not in shown.stdout + shown.stderr
