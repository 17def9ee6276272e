# An analyst's study from R against the live coordinator: the catalog, the dry run, the study
# run with progress, its results as frames holding exactly what the coordinator answered, plots
# and the coordinator's figure. FEDSTATS_R_OUT (set by tests/client/test_client_r.py) receives
# the frames as CSV, which the Python client's frames of the same study are compared with.

test_that("the catalog lists the demo's dataset at its three centers", {
  fs <- live_client()
  catalog <- fs_catalog(fs)
  frame <- as.data.frame(catalog)
  expect_setequal(frame$center, c("hospital_a", "hospital_b", "hospital_c"))
  expect_true(all(frame$dataset == "cohort"))
  expect_true(all(frame$n_records %% frame$k == 0))  # sizes rounded down to K
  expect_true(all(is.na(fs_catalog_problems(catalog)$problem)))
  centers <- fs_centers(fs)
  expect_true(all(centers$healthy))
  expect_true("remaining_epsilon.cohort" %in% names(centers))
})

test_that("the dry run gives the epsilon of each analysis at each center and spends nothing", {
  fs <- live_client()
  before <- fs_centers(fs)$remaining_epsilon.cohort
  plan <- fs_plan(fs, small_study())
  expect_s3_class(plan, "fedstats_plan")
  expect_true(plan$would_run)
  frame <- as.data.frame(plan)
  expect_setequal(unique(frame$center), c("hospital_a", "hospital_b", "hospital_c"))
  dp <- frame[frame$kind %in% c("dp_quantiles", "dp_boxplot"), ]
  # 0.25 for the quantiles, 0.25 per box (the center's and the pooled one) for the boxplot.
  expect_equal(vapply(split(dp$epsilon, dp$center), sum, 0), c(hospital_a = 0.75, hospital_b = 0.75,
                                                     hospital_c = 0.75))
  expect_identical(sort(unique(dp$analysis)), c(4L, 5L))  # positions in the spec, from 1
  now <- fs_centers(fs)
  expect_equal(now$remaining_epsilon.cohort, before)
  left <- stats::setNames(now$remaining_epsilon.cohort, now$id)
  expect_equal(frame$remaining_after, unname(left[frame$center]) - frame$center_epsilon)
  expect_identical(nrow(fs_refusals(plan)), 0L)
  # What each DP analysis' epsilon buys: one row per part and center, as the plan answered.
  utility <- fs_utility(plan)
  errors <- unlist(lapply(plan$utility, function(u) vapply(u$errors, function(e) e$error, 0)))
  expect_true(length(errors) > 0)
  expect_equal(utility$error, errors)
  expect_setequal(unique(utility$analysis), c(4L, 5L))
  expect_true(all(utility$unit %in% c("records", "value")))
  # The example study file, read as `fedstats study run` reads it, plans the same way.
  example <- fs_plan(fs, fs_read_study(repo_file("examples", "study.toml")))
  expect_true(example$would_run)
  spends <- as.data.frame(example)
  expect_equal(vapply(split(spends$epsilon, spends$center), sum, 0),
               c(hospital_a = 0.75, hospital_b = 0.75, hospital_c = 0.75))
})

test_that("a study runs with progress and its frames hold what the coordinator answered", {
  fs <- live_client()
  lines <- character()
  study <- fs_run(fs, small_study(), progress = function(line) lines <<- c(lines, line))
  expect_s3_class(study, "fedstats_study")
  expect_identical(study$status, "succeeded")
  expect_match(lines[length(lines)], sprintf("study %s: succeeded, \\d+ releases received",
                                             study$id))
  expect_identical(length(unique(lines)), length(lines))  # a line per change only
  raw <- study$result$analyses

  mwu <- fs_mwu(study)
  expect_identical(mwu$test, c("sum", "weighted", "fisher", "table"))
  expect_equal(mwu$pvalue, vapply(raw[[2]]$tests, function(t) t$pvalue, 0), ignore_attr = TRUE)
  expect_identical(mwu$law[mwu$test == "fisher"], "chi2(6)")  # 2 x 3 centers
  effects <- fs_effects(study)
  expect_identical(effects$center, c("hospital_a", "hospital_b", "hospital_c", "stratified"))
  expect_true(all(effects$low < effects$estimate & effects$estimate < effects$high))
  parts <- fs_parts(study)
  expect_identical(nrow(parts), sum(vapply(raw[[2]]$tests, function(t) length(t$parts), 0L)))
  expect_identical(unique(parts$test[parts$center == "hospital_b"]),
                   c("sum", "weighted", "fisher"))

  table <- fs_table(study)
  expect_identical(names(table), c("lower", "upper", "control", "treated"))
  expect_identical(table$lower[1], 0)
  expect_equal(colSums(table[c("control", "treated")]), unlist(raw[[1]]$totals),
               ignore_attr = TRUE)
  counts <- unlist(table[c("control", "treated")])
  expect_true(all(counts == 0 | counts >= 10 - 1e-9))  # K-anonymous: no count in 1..K-1

  quantiles <- fs_quantiles(study)
  expect_identical(names(quantiles), c("estimator", "group", "q0.25", "q0.5", "q0.75", "error"))
  expect_true(all(quantiles$q0.25 <= quantiles$q0.5 & quantiles$q0.5 <= quantiles$q0.75))

  dpq <- fs_dp_quantiles(study)
  expect_identical(dpq$center, c("hospital_a", "hospital_b", "hospital_c"))
  expect_true(all(dpq$group == "treated" & dpq$epsilon == 0.25))
  expect_true(all(dpq$q0.5 >= 0 & dpq$q0.5 <= 60))

  boxes <- fs_boxplots(study)
  expect_identical(boxes$center, c("hospital_a", "hospital_b", "hospital_c", "pooled"))
  with(boxes, expect_true(all(lower_whisker <= q1 & q1 <= median & median <= q3 &
                              q3 <= upper_whisker)))
  expect_true(all(c("q0.05", "q0.95") %in% names(boxes)))
  expect_true(all(is.na(boxes$q0.05[1:3])) && !is.na(boxes$q0.05[4]))

  describe <- fs_describe(study)
  expect_true(all(describe$variable == "los_days"))
  expect_setequal(unique(describe$center), c("hospital_a", "hospital_b", "hospital_c",
                                             "pooled"))
  expect_setequal(unique(describe$arm), c("control", "treated", "all"))
  expect_identical(nrow(describe), length(raw[[6]]$rows))
  # A mean the bins cannot pin is null in the record (not estimable) and NA in the frame.
  expect_equal(describe$mean, vapply(raw[[6]]$rows,
                                     function(r) if (is.null(r$mean)) NA_real_ else r$mean, 0))

  used <- fs_centers_used(study)
  expect_identical(used$status, rep("included", 3))
  expect_identical(used$used_in[[1]], 1:6)
  expect_identical(fs_failed(study), list())
  expect_error(fs_dp_quantiles(structure(list(id = "x", status = "succeeded",
                                              result = list(analyses = list())),
                                         class = "fedstats_study")),
               class = "fedstats_no_such_analysis")

  # Base-R plots draw without error and return their frames.
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  expect_identical(fs_plot_boxplots(study), boxes)
  expect_identical(fs_plot_effects(study), effects)
  svg <- rawToChar(fs_figure(fs, study$id, 5))
  expect_match(svg, "<svg")
  # The tables as CSV: the same numbers as the frames, and all of them unpacked with Methods.
  tests <- fs_export(fs, study$id, part = "tests")
  expect_identical(tests$test, mwu$test)
  expect_equal(tests$pvalue, mwu$pvalue)
  expect_identical(tests$primary, rep(FALSE, nrow(tests)))  # read as logicals
  written <- fs_export(fs, study$id, dir = file.path(tempdir(), "fedstats-export"))
  expect_true(all(c("tests.csv", "effects.csv", "methods.txt") %in% basename(written)))
  expect_match(paste(readLines(file.path(tempdir(), "fedstats-export", "methods.txt"),
                               encoding = "UTF-8"), collapse = " "), "Mann-Whitney")

  out <- Sys.getenv("FEDSTATS_R_OUT")
  if (nzchar(out)) {  # for the Python side of tests/client/test_client_r.py
    writeLines(study$id, file.path(out, "study_id"))
    frames <- list(mwu = mwu, effects = effects, table = table, quantiles = quantiles,
                   dp_quantiles = dpq, boxplots = boxes,
                   describe = describe[!vapply(describe, is.list, TRUE)])  # no list columns
    for (name in names(frames)) {
      utils::write.csv(frames[[name]], file.path(out, paste0(name, ".csv")), row.names = FALSE)
    }
  }
})

test_that("a finished study is found again, listed, and cannot be cancelled", {
  fs <- live_client()
  studies <- fs_studies(fs, status = "succeeded")
  expect_true(nrow(studies) >= 1)
  expect_true(all(studies$status == "succeeded"))
  again <- fs_study(fs, studies$id[1])
  expect_identical(again$id, studies$id[1])
  expect_false(is.null(again$provenance))
  path <- fs_write_json(again, tempfile(fileext = ".json"))
  expect_identical(jsonlite::read_json(path)$id, again$id)
  expect_error(fs_cancel(fs, again$id), class = "fedstats_conflict")
})

test_that("waiting past a timeout signals fedstats_timeout; the study goes on", {
  fs <- live_client()
  created <- fs_submit(fs, fs_study_spec("cohort", "los_days",
                                         groups = c("control", "treated")) |> fs_add_mwu())
  cnd <- tryCatch(fs_wait(fs, created$id, progress = FALSE, timeout = -1),
                  error = function(e) e)
  # Signalled when the study had not ended at the first look (it has not, most often); a
  # study already ended is returned: the timeout is checked only while it runs.
  if (inherits(cnd, "condition")) {
    expect_s3_class(cnd, "fedstats_timeout")
    expect_match(conditionMessage(cnd), "keeps running")
  } else {
    expect_identical(cnd$status, "succeeded")
  }
  study <- fs_wait(fs, created$id, progress = FALSE)
  expect_identical(study$status, "succeeded")
})

test_that("a study a center refuses ends failed, the condition naming the center", {
  fs <- live_client()
  # Above every demo center's cap per request (a quarter of its budget): refused, nothing paid.
  spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |>
    fs_add_dp_boxplot(epsilon = 5, bounds = c(0, 60), group = "treated", pooled = FALSE)
  cnd <- tryCatch(fs_run(fs, spec, progress = FALSE), error = function(e) e)
  expect_s3_class(cnd, "fedstats_study_failed")
  expect_identical(cnd$code, "center_failure")
  expect_true(cnd$center %in% c("hospital_a", "hospital_b", "hospital_c"))
  expect_identical(cnd$kind, "refused")
  expect_match(conditionMessage(cnd), sprintf("\\[center %s, refused\\]", cnd$center))
  expect_identical(cnd$study$status, "failed")
  expect_false(cnd$resumable)
  failed <- fs_run(fs, spec, progress = FALSE, raise_on_failure = FALSE)
  expect_identical(failed$status, "failed")
})

test_that("a DP study (dp_mwu) is built, run and read: its tests, effects, releases, guarantees", {
  fs <- live_client()
  spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated"), k = 10,
                        primary = list(analysis = 1, test = "weighted")) |>
    fs_add_dp_mwu(epsilon = 0.5, tests = c("sum", "weighted", "fisher"))
  body <- spec_body(spec)
  expect_identical(body$analyses[[1]]$kind, "dp_mwu")
  expect_identical(unclass(body$analyses[[1]]$tests), c("sum", "weighted", "fisher"))
  expect_identical(body$primary$analysis, 0L)  # counted from 0 on the wire
  study <- fs_run(fs, spec, progress = FALSE)
  expect_identical(study$status, "succeeded")
  raw <- study$result$analyses[[1]]

  tests <- fs_dp_mwu(study)
  expect_identical(tests$test, c("sum", "weighted", "fisher"))
  expect_equal(tests$pvalue, vapply(raw$tests, function(t) t$pvalue, 0), ignore_attr = TRUE)
  expect_true(all(tests$pvalue > 0 & tests$pvalue <= 1))
  expect_identical(tests, fs_mwu(study, "dp_mwu"))
  effects <- fs_dp_mwu(study, "effects")
  expect_identical(effects$center, c("hospital_a", "hospital_b", "hospital_c", "stratified"))
  expect_true(all(effects$low <= effects$estimate & effects$estimate <= effects$high))
  releases <- fs_dp_mwu(study, "releases")
  expect_identical(releases$center, c("hospital_a", "hospital_b", "hospital_c"))
  expect_equal(releases$epsilon, rep(0.5, 3))
  expect_equal(releases$size_epsilon + releases$u_epsilon, releases$epsilon)
  expect_equal(releases$noise_scale, 2 * releases$cap / releases$u_epsilon)
  # The study asked no mwu analysis: reading one says so.
  expect_error(fs_mwu(study), class = "fedstats_no_such_analysis")

  guarantees <- fs_guarantees(study)
  expect_identical(guarantees$center, c("hospital_a", "hospital_b", "hospital_c"))
  expect_true(all(guarantees$release_mode == "k_anonymous"))  # these centers' mode
  expect_true(all(guarantees$epsilon_pure >= 0.5 & guarantees$epsilon <= guarantees$epsilon_pure
                  + 1e-9))
  expect_true(all(startsWith(guarantees$line, "each patient at center ")))
  expect_identical(guarantees$line, vapply(study$result$guarantees, function(g) g$line, ""))
  expect_error(fs_guarantees(list()), class = "fedstats_spec_error")

  out <- Sys.getenv("FEDSTATS_R_OUT")
  if (nzchar(out)) {  # for the Python side of tests/client/test_client_r.py
    writeLines(study$id, file.path(out, "dp_study_id"))
    frames <- list(dp_mwu = tests, dp_effects = effects, guarantees = guarantees)
    for (name in names(frames)) {
      utils::write.csv(frames[[name]], file.path(out, paste0(name, ".csv")), row.names = FALSE)
    }
  }
})

test_that("a study of the shift, Kruskal-Wallis and a categorical variable is run and read", {
  fs <- live_client()
  # From the K-anonymous tables and counts: no epsilon spent.
  spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated"), k = 10) |>
    fs_add_table(lower = 0) |>
    fs_add_shift(level = 0.9) |>
    fs_add_kruskal(ordered = TRUE, alternative = "two-sided") |>
    fs_add_categorical("smoking") |>
    fs_add_describe(categorical = "smoking")
  study <- fs_run(fs, spec, progress = FALSE)
  expect_identical(study$status, "succeeded")
  raw <- study$result$analyses
  expect_identical(raw[[2]]$level, 0.9)

  shift <- fs_shift(study)
  expect_identical(names(shift), c("of", "low", "high"))
  expect_identical(shift$of, c("estimate", "low end", "high end", "interval",
                               "binned estimate", "binned interval"))
  expect_equal(unlist(shift[1, c("low", "high")]),
               c(low = raw[[2]]$estimate_low, high = raw[[2]]$estimate_high))
  interval <- unlist(shift[shift$of == "interval", c("low", "high")])
  expect_equal(interval, unlist(raw[[2]]$interval), ignore_attr = TRUE)
  expect_true(interval[[1]] <= shift$low[1] && shift$high[1] <= interval[[2]])
  expect_true(all(shift$low <= shift$high, na.rm = TRUE))

  kruskal <- fs_kruskal(study)
  centers <- c("hospital_a", "hospital_b", "hospital_c")
  expect_identical(kruskal$test, c("table", "sum", "weighted", paste0("center:", centers),
                                   "trend:table", "trend:sum"))
  expect_identical(kruskal$law, c(rep("chi2(1)", 6), "z", "z"))  # two arms: one df
  expect_identical(kruskal$df, c(rep(1, 6), NA, NA))
  expect_equal(kruskal$pvalue[1:3], vapply(raw[[3]]$tests, function(t) t$pvalue, 0),
               ignore_attr = TRUE)
  expect_equal(kruskal$statistic[7], raw[[3]]$trend$table$zstatistic)
  expect_true(all(kruskal$pvalue > 0 & kruskal$pvalue <= 1))
  arms <- fs_kruskal(study, "arms")
  expect_identical(arms$center, rep(c("federated", centers), each = 2))
  expect_identical(arms$arm, rep(c("control", "treated"), 4))
  by_center <- arms[arms$center != "federated", ]
  expect_equal(arms$n[1:2], as.numeric(tapply(by_center$n, by_center$arm, sum)),
               ignore_attr = TRUE)

  cells <- fs_categorical(study)
  expect_identical(names(cells), c("variable", "center", "arm", "category", "count",
                                   "percent", "low", "high", "count_interval", "n", "missing",
                                   "source", "analysis"))
  n_cells <- function(arms) sum(vapply(arms, function(a) length(a$cells), 0L))
  expect_identical(nrow(cells), n_cells(raw[[4]]$arms) + n_cells(raw[[5]]$categorical))
  expect_identical(unique(cells$source), c("categorical", "describe"))
  expect_true(all(cells$variable == "smoking" & cells$analysis == "table"))
  expect_true(all(cells$count == 0 | cells$count >= 10))  # K-anonymous counts
  expect_true(all(cells$low <= cells$percent & cells$percent <= cells$high))
  totals <- tapply(cells$count, paste(cells$source, cells$center, cells$arm), sum)
  expect_equal(as.numeric(totals),
               as.numeric(tapply(cells$n, paste(cells$source, cells$center, cells$arm), max)))
  # The describe's rows are the same K-anonymous counts as the categorical analysis'.
  of <- function(source) cells[cells$source == source, c("center", "arm", "category", "count")]
  expect_equal(of("describe"), of("categorical"), ignore_attr = TRUE)
  tests <- fs_categorical(study, "tests")
  expect_identical(tests$test, vapply(raw[[4]]$tests, function(t) t$name, ""))
  expect_true(all(tests$variable == "smoking" & tests$pvalue > 0 & tests$pvalue <= 1))
  expect_error(fs_categorical(record_of(study, 1:3)), class = "fedstats_no_such_analysis")

  out <- Sys.getenv("FEDSTATS_R_OUT")
  if (nzchar(out)) {  # for the Python side of tests/client/test_client_r.py
    writeLines(study$id, file.path(out, "arms_study_id"))
    frames <- list(shift = shift, kruskal = kruskal, kruskal_arms = arms,
                   categorical = cells[!vapply(cells, is.list, TRUE)],  # no list columns
                   categorical_tests = tests)
    for (name in names(frames)) {
      utils::write.csv(frames[[name]], file.path(out, paste0(name, ".csv")), row.names = FALSE)
    }
  }
})
