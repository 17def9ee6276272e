# A study's result as data frames (docs/r-client.md, "Results"), the frames of
# fedstats_client.results in Python:
#
#   fs_mwu(study)          one row per test: statistic, law, df, pvalue, pvalue_from (result.mwu.to_frame())
#   fs_effects(study)      theta per center and stratified, 95 % interval   (result.mwu.effects())
#   fs_parts(study)        each center's part of each test                  (result.mwu.parts())
#   fs_table(study)        the federated K-anonymous table, one row per bin (result.table)
#   fs_quantiles(study)    (estimator, group) x levels                      (result.quantiles)
#   fs_dp_quantiles(study) (group, center) x levels, n, rank error, epsilon (result.dp_quantiles)
#   fs_boxplots(study)     (group, center) x the seven numbers, ...         (result.boxplots)
#   fs_describe(study)     one tidy row per (variable, center, arm)         (result.describe)
#   fs_centers_used(study) each center included or excluded, and why       (result.centers)
#   fs_dp_mwu(study)       the DP Mann-Whitney tests (part = "tests"), effects ("effects") or
#                          each center's release ("releases")    (result.dp_mwu.to_frame(), ...)
#   fs_survival(study)     the curves per (center, arm, time); part = "summary": medians and
#                          RMST; "tests": log-rank, hazard ratio, RMST difference (result.survival)
#   fs_guarantees(study)   each center's lifetime privacy guarantee, its line (result.guarantees)
#   fs_shift(study)        the Hodges-Lehmann shift: what the bins allow (result.shift.to_frame())
#   fs_kruskal(study)      one row per Kruskal-Wallis (and trend) test (part = "tests"), or
#                          per (center, arm) n and mean rank ("arms")
#                                                     (result.kruskal.to_frame(), .arms())
#   fs_categorical(study)  one row per (variable, center, arm, category) (part = "cells"), or
#                          each test of association ("tests")
#                                                     (result.categorical.to_frame(), .tests())
#
# fs_mwu, fs_table, fs_quantiles, fs_shift and fs_kruskal read the study's first analysis of
# that kind; the others gather every analysis of their kind (a study asks one per group level;
# fs_categorical also gathers the describe analyses' categorical rows). An analysis that
# failed in a partially_failed study signals fedstats_analysis_failed naming the center; one
# the study did not ask signals fedstats_no_such_analysis. Where Python has an index
# (test, center), the frame has the columns. Analysis indexes are positions in the spec
# counted from 1, as R counts.

BOX_COLUMNS <- c("n", "lower_outliers", "lower_whisker", "q1", "median", "q3", "upper_whisker",
                 "upper_outliers", "outlier_halfwidth", "epsilon", "lower_branch",
                 "upper_branch", "quartile_rank_halfwidth", "extreme_rank_halfwidth",
                 "n_halfwidth")
DESCRIBE_COLUMNS <- c("n", "missing", "mean", "sd", "median", "q1", "q3", "minimum", "maximum",
                      "epsilon", "method", "rank_halfwidth", "uncertainty")
DESCRIBE_INTERVALS <- c("n_interval", "mean_interval", "sd_interval", "q1_interval",
                        "median_interval", "q3_interval", "clip")

level_name <- function(level) paste0("q", format(level, digits = 15, scientific = FALSE,
                                                  drop0trailing = TRUE, trim = TRUE))

# Every result of `kind` (a study record's), the first failed one signalled.
outcomes <- function(study, kind) {
  if (!inherits(study, "fedstats_study")) {
    stop(spec_error("read results from a study (fs_run(), fs_wait() or fs_study())"))
  }
  if (is.null(study$result)) {
    stop(fedstats_condition("fedstats_no_result", sprintf(
      "no_result: study %s is %s and has no result yet", study$id, study$status),
      code = "no_result"))
  }
  analyses <- study$result$analyses
  found <- which(vapply(analyses, function(a) identical(a$kind, kind), logical(1)))
  if (!length(found)) {
    stop(fedstats_condition("fedstats_no_such_analysis", sprintf(
      "no_such_analysis: the study asked for no %s analysis", kind), code = "no_such_analysis"))
  }
  for (i in found) {
    if (identical(analyses[[i]]$status, "failed")) {
      stop(analysis_failed(i, kind, analyses[[i]]$error))
    }
  }
  analyses[found]
}

#' Results of a study as data frames
#'
#' @param study a `fedstats_study` ([fs_run()], [fs_wait()], [fs_study()]).
#' @return a data frame (see docs/r-client.md, "Results").
#' @name fs_results
NULL

#' @rdname fs_results
#' @export
fs_mwu <- function(study, kind = c("mwu", "dp_mwu")) {
  raw <- outcomes(study, match.arg(kind))[[1]]
  rows <- lapply(names(raw$tests), function(name) {
    t <- raw$tests[[name]]
    data.frame(test = name, statistic = t$statistic,
               law = if (name == "fisher" && !is.null(t$df)) sprintf("chi2(%d)", t$df) else "z",
               df = num(t$df), pvalue = t$pvalue,
               pvalue_from = if (is.null(t$null)) NA_character_ else t$null,
               alternative = raw$alternative, stringsAsFactors = FALSE)
  })
  bind_rows(rows, c("test", "statistic", "law", "df", "pvalue", "pvalue_from", "alternative"))
}

#' @rdname fs_results
#' @export
fs_effects <- function(study, kind = c("mwu", "dp_mwu")) {
  raw <- outcomes(study, match.arg(kind))[[1]]
  cols <- c("center", "estimate", "low", "high", "level", "n_x", "n_y", "method")
  bind_rows(lapply(raw$effects, function(e) as.data.frame(
    lapply(stats::setNames(cols, cols), function(k) na_if_null(e[[k]])),
    stringsAsFactors = FALSE)), cols)
}

#' @rdname fs_results
#' @export
fs_parts <- function(study, kind = c("mwu", "dp_mwu")) {
  raw <- outcomes(study, match.arg(kind))[[1]]
  rows <- list()
  for (name in names(raw$tests)) for (p in raw$tests[[name]]$parts) {
    rows[[length(rows) + 1]] <- data.frame(test = name, center = p$center,
                                           statistic = num(p$statistic),
                                           variance = num(p$variance),
                                           zstatistic = num(p$zstatistic),
                                           pvalue = num(p$pvalue), weight = num(p$weight),
                                           stringsAsFactors = FALSE)
  }
  bind_rows(rows, c("test", "center", "statistic", "variance", "zstatistic", "pvalue",
                    "weight"))
}

#' @rdname fs_results
#' @param part fs_dp_mwu: `"tests"` (as [fs_mwu()]), `"effects"` (as [fs_effects()]) or
#'   `"releases"` (what each center released: noisy sizes, cap M, epsilon and its split, the
#'   Laplace scale on U, the sizes used). fs_kruskal: `"tests"` (one row per test: the
#'   federated table's, the stratified `sum` and `weighted`, each center's `center:<id>`, then
#'   with `ordered` Jonckheere-Terpstra's `trend:table`, `trend:sum`) or `"arms"` (per center,
#'   `"federated"` first, and arm: `n` and `mean_rank`). fs_categorical: `"cells"` (one row
#'   per variable, center, arm and category: `count`, `percent` with its 95 % interval `low`,
#'   `high`, `count_interval` (DP), the arm's `n` and `missing`, `source` the analysis kind and
#'   `analysis` its mode) or `"tests"` (each categorical analysis' tests of association).
#' @export
fs_dp_mwu <- function(study, part = c("tests", "effects", "releases")) {
  part <- match.arg(part)
  if (part == "tests") return(fs_mwu(study, "dp_mwu"))
  if (part == "effects") return(fs_effects(study, "dp_mwu"))
  raw <- outcomes(study, "dp_mwu")[[1]]
  cols <- c("center", "n_x_hat", "n_y_hat", "cap", "epsilon", "size_epsilon", "u_epsilon",
            "noise_scale", "n_x", "n_y")
  bind_rows(lapply(raw$releases, function(r) as.data.frame(
    lapply(stats::setNames(cols, cols), function(k) na_if_null(r[[k]])),
    stringsAsFactors = FALSE)), cols)
}

#' @rdname fs_results
#' @export
fs_guarantees <- function(study) {
  if (!inherits(study, "fedstats_study") || is.null(study$result)) {
    stop(spec_error("read the guarantees from a finished study (fs_run(), fs_wait(), fs_study())"))
  }
  cols <- c("center", "release_mode", "epsilon", "delta", "epsilon_pure", "releases", "method",
            "line")
  bind_rows(lapply(study$result$guarantees, function(g) as.data.frame(
    lapply(stats::setNames(cols, cols), function(k) na_if_null(g[[k]])),
    stringsAsFactors = FALSE)), cols)
}

#' @rdname fs_results
#' @export
fs_table <- function(study) {
  raw <- outcomes(study, "table")[[1]]
  limits <- vapply(raw$limits, real, 0)  # open ends arrive as "-Infinity" / "Infinity"
  groups <- unlist(study$spec$groups) %||% "all"
  out <- data.frame(lower = limits[-length(limits)], upper = limits[-1])
  for (g in seq_along(groups)) out[[groups[[g]]]] <- as.numeric(unlist(raw$counts[[g]]))
  out
}

#' @rdname fs_results
#' @export
fs_quantiles <- function(study) {
  raw <- outcomes(study, "quantiles")[[1]]
  levels <- vapply(unlist(raw$levels), level_name, character(1))
  rows <- list()
  for (estimator in names(raw$estimates)) for (group in names(raw$estimates[[estimator]])) {
    est <- raw$estimates[[estimator]][[group]]
    values <- if (is.null(est$quantiles)) rep(NA_real_, length(levels))
              else as.numeric(unlist(est$quantiles))
    row <- data.frame(estimator = estimator, group = group, stringsAsFactors = FALSE)
    row[levels] <- as.list(values)
    row$error <- if (is.null(est$error)) NA_character_ else est$error
    rows[[length(rows) + 1]] <- row
  }
  bind_rows(rows, c("estimator", "group", levels, "error"))
}

#' @rdname fs_results
#' @export
fs_dp_quantiles <- function(study) {
  rows <- list()
  for (raw in outcomes(study, "dp_quantiles")) {
    levels <- vapply(unlist(raw$levels), level_name, character(1))
    for (center in names(raw$per_center)) {
      row <- data.frame(group = raw$group %||% "all", center = center, stringsAsFactors = FALSE)
      row[levels] <- as.list(as.numeric(unlist(raw$per_center[[center]])))
      row$n <- num(raw$n[[center]])
      row$rank_halfwidth <- num(raw$rank_halfwidth[[center]])
      row$epsilon <- num(raw$spent[[center]])
      row$algorithm <- raw$algorithm %||% NA_character_
      rows[[length(rows) + 1]] <- row
    }
  }
  bind_rows(rows, c("group", "center"))
}

#' @rdname fs_results
#' @export
fs_boxplots <- function(study) {
  rows <- list()
  for (raw in outcomes(study, "dp_boxplot")) {
    boxes <- raw$per_center
    if (!is.null(raw$pooled)) boxes$pooled <- raw$pooled  # the pooled box after the centers'
    for (center in names(boxes)) {
      b <- boxes[[center]]
      row <- data.frame(group = raw$group %||% "all", center = center, stringsAsFactors = FALSE)
      for (k in BOX_COLUMNS) row[[k]] <- na_if_null(b[[k]])
      for (lv in b$levels) row[[level_name(lv$level)]] <- num(lv$value)
      rows[[length(rows) + 1]] <- row
    }
  }
  bind_rows(rows, c("group", "center", BOX_COLUMNS))
}

#' @rdname fs_results
#' @export
fs_describe <- function(study) {
  rows <- list()
  for (raw in outcomes(study, "describe")) for (r in raw$rows) {
    row <- data.frame(variable = r$variable, center = r$center, arm = r$arm, mode = raw$mode,
                      unit = na_if_null(raw$units[[r$variable]]), stringsAsFactors = FALSE)
    for (k in DESCRIBE_COLUMNS) row[[k]] <- na_if_null(r[[k]])
    # Each number's 95 % interval (and a center's clip range) as a list column of (low, high).
    for (k in DESCRIBE_INTERVALS) row[[k]] <- I(list(as.numeric(unlist(r[[k]]))))
    row$notes <- I(list(as.character(unlist(r$notes))))
    # The histogram as list columns, one vector per row.
    row$edges <- I(list(as.numeric(unlist(r$edges))))
    row$counts <- I(list(as.numeric(unlist(r$counts))))
    rows[[length(rows) + 1]] <- row
  }
  bind_rows(rows, c("variable", "center", "arm", "mode", "unit", DESCRIBE_COLUMNS, "edges",
                    "counts", DESCRIBE_INTERVALS, "notes"))
}

# A number of a result: JSON's null as NA, infinite limits (sent as the strings "Infinity",
# "-Infinity") as Inf, -Inf.
real <- function(x) {
  if (is.null(x)) return(NA_real_)
  if (is.character(x)) {
    return(unname(c(Infinity = Inf, `-Infinity` = -Inf, `NaN` = NaN)[x]))
  }
  as.numeric(x)
}

#' @rdname fs_results
#' @export
fs_shift <- function(study) {
  raw <- outcomes(study, "shift")[[1]]
  rows <- list(c("estimate", "estimate_low", "estimate_high"),
               c("low end", "low_low", "low_high"), c("high end", "high_low", "high_high"))
  out <- data.frame(of = vapply(rows, `[`, "", 1),
                    low = vapply(rows, function(r) real(raw[[r[2]]]), 0),
                    high = vapply(rows, function(r) real(raw[[r[3]]]), 0),
                    stringsAsFactors = FALSE)
  out <- rbind(out, data.frame(of = "interval", low = real(raw$interval[[1]]),
                               high = real(raw$interval[[2]])))
  if (!is.null(raw$binned_interval)) {
    point <- if (is.null(raw$estimate)) NaN else real(raw$estimate)  # NaN: not estimable
    out <- rbind(out, data.frame(of = c("binned estimate", "binned interval"),
                                 low = c(point, real(raw$binned_interval[[1]])),
                                 high = c(point, real(raw$binned_interval[[2]]))))
  }
  out
}

#' @rdname fs_results
#' @export
fs_kruskal <- function(study, part = c("tests", "arms")) {
  part <- match.arg(part)
  raw <- outcomes(study, "kruskal")[[1]]
  if (part == "arms") {
    parts <- c(list(federated = raw$arms),
               stats::setNames(raw$centers, vapply(raw$centers, function(c) c$center, "")))
    groups <- as.character(unlist(raw$groups))
    rows <- lapply(names(parts), function(center) data.frame(
      center = center, arm = groups, n = as.numeric(unlist(parts[[center]]$sizes)),
      mean_rank = as.numeric(unlist(parts[[center]]$mean_ranks)), stringsAsFactors = FALSE))
    return(bind_rows(rows, c("center", "arm", "n", "mean_rank")))
  }
  test <- function(name, statistic, df, pvalue, law = sprintf("chi2(%d)", df)) {
    data.frame(test = name, statistic = real(statistic), law = law, df = num(df),
               pvalue = real(pvalue), stringsAsFactors = FALSE)
  }
  rows <- c(
    lapply(names(raw$tests), function(name) {
      t <- raw$tests[[name]]
      test(name, t$statistic, t$df, t$pvalue)
    }),
    lapply(raw$centers, function(c) test(paste0("center:", c$center), c$statistic, c$df,
                                         c$pvalue)),
    lapply(names(raw$trend), function(name) {
      t <- raw$trend[[name]]
      test(paste0("trend:", name), t$zstatistic, NULL, t$pvalue, law = "z")
    }))
  bind_rows(rows, c("test", "statistic", "law", "df", "pvalue"))
}

#' @rdname fs_results
#' @export
fs_survival <- function(study, part = c("curves", "summary", "tests")) {
  part <- match.arg(part)
  raw <- outcomes(study, "survival")[[1]]
  if (part == "curves") {
    rows <- lapply(raw$curves, function(c) {
      n <- length(c$times)
      pad <- function(x) c(vapply(x, real, 0), rep(NA_real_, n - length(x)))
      data.frame(center = c$center, arm = c$arm, time = vapply(c$times, real, 0),
                 survival = vapply(c$survival, real, 0), low = vapply(c$low, real, 0),
                 high = vapply(c$high, real, 0), at_risk = vapply(c$at_risk, real, 0),
                 events = pad(c$events), censored = pad(c$censored), stringsAsFactors = FALSE)
    })
    return(bind_rows(rows, c("center", "arm", "time", "survival", "low", "high", "at_risk",
                             "events", "censored")))
  }
  if (part == "summary") {
    rows <- lapply(raw$curves, function(c) data.frame(
      center = c$center, arm = c$arm, n = real(c$noisy_total), median = real(c$median),
      median_low = real(c$median_low), median_high = real(c$median_high),
      rmst = real(c$rmst), rmst_low = real(c$rmst_low), rmst_high = real(c$rmst_high),
      stringsAsFactors = FALSE))
    return(bind_rows(rows, c("center", "arm", "n", "median", "median_low", "median_high",
                             "rmst", "rmst_low", "rmst_high")))
  }
  d <- raw$rmst_difference
  rows <- c(lapply(raw$tests, function(t) data.frame(
    test = t$name, weights = t$weights, statistic = real(t$statistic), df = num(t$df),
    pvalue = real(t$pvalue), estimate = real(t$hazard_ratio), low = real(t$hazard_ratio_low),
    high = real(t$hazard_ratio_high), of = "hazard ratio", stringsAsFactors = FALSE)),
    list(data.frame(test = "rmst_difference", weights = NA_character_, statistic = NA_real_,
                    df = NA_real_, pvalue = real(d$pvalue), estimate = real(d$estimate),
                    low = real(d$low), high = real(d$high),
                    of = sprintf("RMST to %s, second arm - first", format(real(d$horizon))),
                    stringsAsFactors = FALSE)))
  bind_rows(rows, c("test", "weights", "statistic", "df", "pvalue", "estimate", "low", "high",
                    "of"))
}

CATEGORY_COLUMNS <- c("variable", "center", "arm", "category", "count", "percent", "low",
                      "high", "count_interval", "n", "missing", "source", "analysis")

#' @rdname fs_results
#' @export
fs_categorical <- function(study, part = c("cells", "tests")) {
  part <- match.arg(part)
  if (!inherits(study, "fedstats_study")) {
    stop(spec_error("read results from a study (fs_run(), fs_wait() or fs_study())"))
  }
  if (is.null(study$result)) {
    stop(fedstats_condition("fedstats_no_result", sprintf(
      "no_result: study %s is %s and has no result yet", study$id, study$status),
      code = "no_result"))
  }
  analyses <- study$result$analyses
  # The categorical analyses and the describes with categorical rows (a failed describe has
  # none); a failed categorical analysis is signalled.
  wanted <- vapply(analyses, function(a) identical(a$kind, "categorical") ||
                     (identical(a$kind, "describe") && length(a$categorical) > 0), logical(1))
  if (!any(wanted)) {
    stop(fedstats_condition("fedstats_no_such_analysis",
                            "no_such_analysis: the study asked for no categorical variable",
                            code = "no_such_analysis"))
  }
  for (i in seq_along(analyses)) {
    if (identical(analyses[[i]]$kind, "categorical") &&
        identical(analyses[[i]]$status, "failed")) {
      stop(analysis_failed(i, "categorical", analyses[[i]]$error))
    }
  }
  raws <- Filter(function(a) !identical(a$status, "failed"), analyses[wanted])
  rows <- list()
  if (part == "tests") {
    cols <- c("variable", "test", "statistic", "df", "pvalue", "odds_ratio", "low", "high",
              "method")
    for (raw in raws) if (identical(raw$kind, "categorical")) for (t in raw$tests) {
      rows[[length(rows) + 1]] <- data.frame(
        variable = raw$variable, test = t$name, statistic = real(t$statistic), df = num(t$df),
        pvalue = real(t$pvalue), odds_ratio = real(t$odds_ratio), low = real(t$low),
        high = real(t$high), method = t$method, stringsAsFactors = FALSE)
    }
    return(bind_rows(rows, cols))
  }
  for (raw in raws) {
    arms <- if (identical(raw$kind, "categorical")) raw$arms else raw$categorical
    for (arm in arms) for (cell in arm$cells) {
      row <- data.frame(variable = arm$variable, center = arm$center, arm = arm$arm,
                        category = cell$label, count = real(cell$count),
                        percent = real(cell$percent), low = real(cell$low),
                        high = real(cell$high), stringsAsFactors = FALSE)
      # DP: the true count's 95 % interval, a list column of (low, high) (empty: exact).
      row$count_interval <- I(list(as.numeric(unlist(cell$count_interval))))
      row$n <- real(arm$n)
      row$missing <- real(arm$missing)
      row$source <- raw$kind
      row$analysis <- raw$mode
      rows[[length(rows) + 1]] <- row
    }
  }
  bind_rows(rows, CATEGORY_COLUMNS)
}

#' @rdname fs_results
#' @export
fs_centers_used <- function(study) {
  result <- study$result
  if (is.null(result)) stop(fedstats_condition("fedstats_no_result", sprintf(
    "no_result: study %s is %s and has no result yet", study$id, study$status),
    code = "no_result"))
  by_center <- stats::setNames(result$center_status,
                               vapply(result$center_status, function(c) c$center, ""))
  surveyed_out <- stats::setNames(result$excluded,
                                  vapply(result$excluded, function(e) e$center, ""))
  rows <- lapply(unlist(result$centers), function(center) {
    s <- by_center[[center]]
    reason <- if (!is.null(s)) s$reason else surveyed_out[[center]]
    data.frame(
      center = center,
      status = if (!is.null(s)) s$status
               else if (center %in% names(surveyed_out)) "excluded" else "included",
      used_in = I(list(as.integer(unlist(s$used_in)) + 1L)),
      left_out_of = I(list(as.integer(unlist(s$left_out_of)) + 1L)),
      kind = if (is.null(reason)) NA_character_ else reason$kind,
      reason = if (is.null(reason)) NA_character_ else reason$detail,
      stringsAsFactors = FALSE)
  })
  bind_rows(rows, c("center", "status", "used_in", "left_out_of", "kind", "reason"))
}

#' @rdname fs_results
#' @return `fs_failed()`: the conditions reading each failed analysis would signal.
#' @export
fs_failed <- function(study) {
  analyses <- study$result$analyses
  failed <- which(vapply(analyses, function(a) identical(a$status, "failed"), logical(1)))
  lapply(failed, function(i) analysis_failed(i, analyses[[i]]$kind, analyses[[i]]$error))
}

#' Write a study as the coordinator answered it
#'
#' What `fedstats study run` writes as `study.json`.
#' @param study a `fedstats_study`.
#' @param path the file.
#' @export
fs_write_json <- function(study, path) {
  jsonlite::write_json(unclass(study), path, auto_unbox = TRUE, null = "null", digits = NA,
                       pretty = TRUE)
  invisible(path)
}
