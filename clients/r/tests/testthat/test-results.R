# The frames of results as the coordinator answers them, read from hand-made study records
# (the shapes of coordinator.models' results): cases a live study does not show. Nothing here
# calls a coordinator; test-study.R reads real ones.

record <- function(...) {
  structure(list(id = "s1", status = "succeeded", result = list(analyses = list(...))),
            class = "fedstats_study")
}

test_that("fs_shift reads infinite ends, a point not estimable and a result made before", {
  shift <- list(kind = "shift", status = "succeeded", estimate_low = -1, estimate_high = 2,
                low_low = "-Infinity", low_high = -0.5, high_low = 1, high_high = "Infinity",
                interval = list("-Infinity", "Infinity"), estimate = NULL,
                binned_interval = list(-3, 4), level = 0.95)
  frame <- fs_shift(record(shift))
  expect_identical(frame$of, c("estimate", "low end", "high end", "interval",
                               "binned estimate", "binned interval"))
  expect_identical(frame$low, c(-1, -Inf, 1, -Inf, NaN, -3))
  expect_identical(frame$high, c(2, -0.5, Inf, Inf, NaN, 4))
  shift$binned_interval <- NULL  # stored before the printed figures existed
  expect_identical(fs_shift(record(shift))$of, c("estimate", "low end", "high end", "interval"))
})

test_that("fs_kruskal: the tests without a trend, the arms per center after the federated", {
  kruskal <- list(
    kind = "kruskal", status = "succeeded", groups = list("a", "b", "c"),
    arms = list(sizes = list(20, 30, 40), mean_ranks = list(30, 45, 50)),
    tests = list(table = list(method = "table", statistic = 5.5, df = 2L, pvalue = 0.06)),
    centers = list(list(center = "h1", sizes = list(10, 10, 20), mean_ranks = list(15, 18, 22),
                        statistic = 1.5, df = 2L, pvalue = 0.47, bins = 4L,
                        limits = list(0, 1, 2, 3, 4))),
    ordered = FALSE, alternative = NULL, trend = setNames(list(), character()))
  tests <- fs_kruskal(record(kruskal))
  expect_identical(tests$test, c("table", "center:h1"))
  expect_identical(tests$law, c("chi2(2)", "chi2(2)"))
  expect_identical(tests$df, c(2, 2))
  arms <- fs_kruskal(record(kruskal), part = "arms")
  expect_identical(names(arms), c("center", "arm", "n", "mean_rank"))
  expect_identical(arms$center, rep(c("federated", "h1"), each = 3))
  expect_identical(arms$arm, rep(c("a", "b", "c"), 2))
  expect_identical(arms$n, c(20, 30, 40, 10, 10, 20))
  expect_error(fs_kruskal(record(kruskal), part = "trend"), "should be one of")
})

cell <- function(label, count, interval = NULL) {
  list(label = label, categories = list(label), count = count, percent = NULL, low = NULL,
       high = NULL, count_interval = interval)
}

test_that("fs_categorical gathers the describes' categorical rows; a failure is signalled", {
  describe <- list(kind = "describe", status = "succeeded", mode = "dp", rows = list(),
                   categorical = list(list(variable = "smoking", center = "pooled", arm = "all",
                                           n = 50, missing = NULL,
                                           cells = list(cell("never", 30, list(25, 35)),
                                                        cell("ever", 20, list(15, 25))))))
  cells <- fs_categorical(record(describe))
  expect_identical(names(cells), c("variable", "center", "arm", "category", "count",
                                   "percent", "low", "high", "count_interval", "n", "missing",
                                   "source", "analysis"))
  expect_identical(cells$category, c("never", "ever"))
  expect_identical(cells$source, c("describe", "describe"))
  expect_identical(cells$analysis, c("dp", "dp"))
  expect_identical(cells$count_interval, I(list(c(25, 35), c(15, 25))))
  expect_true(all(is.na(cells$missing) & is.na(cells$percent)))
  # No categorical analysis: no test of association, the columns still there.
  tests <- fs_categorical(record(describe), "tests")
  expect_identical(nrow(tests), 0L)
  expect_identical(names(tests), c("variable", "test", "statistic", "df", "pvalue",
                                   "odds_ratio", "low", "high", "method"))

  failed <- list(kind = "categorical", status = "failed",
                 error = list(error = "center_failure", detail = "refused", center = "h2",
                              kind = "refused"))
  cnd <- tryCatch(fs_categorical(record(describe, failed)), error = function(e) e)
  expect_s3_class(cnd, "fedstats_analysis_failed")
  expect_identical(cnd$index, 2L)  # counted from 1

  plain <- list(kind = "describe", status = "succeeded", mode = "table", rows = list(),
                categorical = list())
  expect_error(fs_categorical(record(plain)), class = "fedstats_no_such_analysis",
               regexp = "no categorical variable")
  expect_error(fs_categorical(record(plain), "counts"), "should be one of")
})

test_that("fs_survival: curves with a band ending in none, the summary and the tests", {
  curve <- function(center, arm) list(
    center = center, arm = arm, times = list(0, 30, 60), survival = list(1, 0.8, 0),
    low = list(1, 0.7, NULL), high = list(1, 0.9, NULL), at_risk = list(100, 70, 0),
    events = list(20, 50), censored = list(10, 20), median = 45, median_low = 40,
    median_high = NULL, rmst = 50, rmst_low = 48, rmst_high = 52, rmst_se = 1,
    noisy_total = 100.4)
  survival <- list(
    kind = "survival", status = "succeeded", variable = "readmission", horizon = 60,
    curves = list(curve("pooled", "ctl"), curve("pooled", "trt"), curve("h1", "ctl")),
    rmst_difference = list(horizon = 60, estimate = 2, se = 1, low = 0, high = 4,
                           pvalue = 0.05, sampling_se = 0.9, noise_se = 0.4),
    tests = list(list(name = "stratified", weights = "logrank", statistic = 4, df = 1L,
                      pvalue = 0.045, hazard_ratio = 0.7, hazard_ratio_low = 0.5,
                      hazard_ratio_high = 0.99)))
  curves <- fs_survival(record(survival))
  expect_identical(nrow(curves), 9L)
  expect_identical(curves$center[1:3], rep("pooled", 3))
  expect_identical(curves$low, rep(c(1, 0.7, NA), 3))
  expect_identical(curves$events, rep(c(20, 50, NA), 3))  # the last limit starts no interval
  summary <- fs_survival(record(survival), part = "summary")
  expect_identical(summary$median_high, rep(NA_real_, 3))  # not reached
  expect_identical(summary$n, rep(100.4, 3))
  tests <- fs_survival(record(survival), part = "tests")
  expect_identical(tests$test, c("stratified", "rmst_difference"))
  expect_identical(tests$estimate, c(0.7, 2))
})

test_that("fs_table reads the open ends of a table closed by infinite limits", {
  table <- list(kind = "table", status = "succeeded", limits = list("-Infinity", 1, 2, "Infinity"),
                counts = list(list(10, 0, 20), list(0, 15, 10)))
  study <- record(table)
  study$spec <- list(groups = list("ctl", "trt"))
  frame <- fs_table(study)
  expect_identical(frame$lower, c(-Inf, 1, 2))
  expect_identical(frame$upper, c(1, 2, Inf))
  expect_identical(frame$trt, c(0, 15, 10))
})
