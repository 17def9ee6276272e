# The coordinator the live tests use: FEDSTATS_COORDINATOR_URL and FEDSTATS_ANALYST_TOKEN (set
# by tests/client/test_client_r.py, which starts the demo's three centers and a coordinator).
live_client <- function() {
  if (!nzchar(Sys.getenv("FEDSTATS_COORDINATOR_URL")) ||
      !nzchar(Sys.getenv("FEDSTATS_ANALYST_TOKEN"))) {
    skip("no coordinator: set FEDSTATS_COORDINATOR_URL and FEDSTATS_ANALYST_TOKEN")
  }
  fs_connect(poll_interval = 0.1)
}

# The repository's root (clients/r/tests/testthat -> ../../../..), for examples/.
repo_file <- function(...) {
  root <- Sys.getenv("FEDSTATS_REPO")
  if (!nzchar(root)) root <- normalizePath(file.path(testthat::test_path(), "..", "..", "..", ".."))
  file.path(root, ...)
}

# The small study of the live tests: the table, the tests, table quantiles, DP quantiles and
# DP boxplots of one arm (0.25 + 2 x 0.25 = 0.75 of each demo center's 3), a Table 1.
small_study <- function() {
  fs_study_spec("cohort", "los_days", groups = c("control", "treated"), k = 10) |>
    fs_add_table(lower = 0) |>
    fs_add_mwu() |>
    fs_add_quantiles(c(0.25, 0.5, 0.75)) |>
    fs_add_dp_quantiles(0.5, epsilon = 0.25, bounds = c(0, 60), group = "treated") |>
    fs_add_dp_boxplot(epsilon = 0.25, bounds = c(0, 60), group = "treated") |>
    fs_add_describe()
}

# A study record holding only some of its analyses' results (`which`, counted from 1).
record_of <- function(study, which) {
  study$result$analyses <- study$result$analyses[which]
  study
}
