# The coordinator's analyst API, one function per route (docs/r-client.md, "Functions"); the
# names of fedstats_client.Client's methods with an fs_ prefix.

FINAL <- c("succeeded", "partially_failed", "failed", "failed_resumable", "cancelled")
# Final statuses without a result to read: waiting on one signals fedstats_study_failed.
UNFINISHED <- c("failed", "failed_resumable", "cancelled")

#' Registered centers
#'
#' @param fs a client made by [fs_connect()].
#' @return one row per center: `id`, `url`, `healthy`, `problem`, and one `remaining_epsilon.*`
#'   column per dataset (`GET /v1/centers`).
#' @export
fs_centers <- function(fs) {
  centers <- fs_call(fs, "GET", "/v1/centers")$body
  rows <- lapply(centers, function(c) {
    eps <- c$remaining_epsilon
    row <- data.frame(id = c$id, url = na_if_null(c$url), healthy = isTRUE(c$healthy),
                      problem = if (is.null(c$problem)) NA_character_
                                else paste0(c$problem$kind, ": ", c$problem$detail),
                      stringsAsFactors = FALSE)
    for (d in names(eps)) row[[paste0("remaining_epsilon.", d)]] <- num(eps[[d]])
    row
  })
  bind_rows(rows, c("id", "url", "healthy", "problem"))
}

#' The catalog: what the centers hold
#'
#' @inheritParams fs_centers
#' @return a `fedstats_catalog`: `$datasets`, `$centers` as the coordinator answered
#'   (`GET /v1/catalog`); `as.data.frame()` gives one row per (dataset, center): K, variables,
#'   levels, sizes rounded down to K, remaining epsilon, paused; [fs_catalog_problems()] why a
#'   center could not be asked.
#' @export
fs_catalog <- function(fs) {
  structure(fs_call(fs, "GET", "/v1/catalog")$body, class = "fedstats_catalog")
}

#' @export
as.data.frame.fedstats_catalog <- function(x, ...) {
  rows <- list()
  for (d in x$datasets) for (e in d$centers) {
    rows[[length(rows) + 1]] <- data.frame(
      dataset = d$name, center = e$center, k = e$k,
      variables = paste(unlist(e$variables), collapse = ", "),
      group_column = na_if_null(e$group_column),
      levels = paste(unlist(e$levels), collapse = ", "),
      n_records = e$n_records,
      n_by_group = paste(sprintf("%s=%s", names(e$n_by_group), unlist(e$n_by_group)),
                         collapse = ", "),
      epoch = e$epoch, paused = isTRUE(e$paused),
      remaining_epsilon = num(e$remaining_epsilon), stringsAsFactors = FALSE)
  }
  bind_rows(rows, c("dataset", "center", "k", "variables", "group_column", "levels",
                    "n_records", "n_by_group", "epoch", "paused", "remaining_epsilon"))
}

#' @rdname fs_catalog
#' @param catalog a `fedstats_catalog`.
#' @export
fs_catalog_problems <- function(catalog) {
  rows <- lapply(catalog$centers, function(c) data.frame(
    center = c$id, k = num(c$k),
    problem = if (is.null(c$problem)) NA_character_
              else paste0(c$problem$kind, ": ", c$problem$detail), stringsAsFactors = FALSE))
  bind_rows(rows, c("center", "k", "problem"))
}

#' @export
print.fedstats_catalog <- function(x, ...) {
  cat(sprintf("<fedstats_catalog: %d dataset(s), %d center(s)>\n", length(x$datasets),
              length(x$centers)))
  print(as.data.frame(x), ...)
  invisible(x)
}

#' A dry run: what a study would spend and what would be refused
#'
#' Nothing is created, released or spent (`POST /v1/studies?dry_run=true`).
#' @inheritParams fs_centers
#' @param spec a [fs_study_spec()], a list (a study file's content, [fs_read_study()]) or a
#'   JSON string.
#' @return a `fedstats_plan`: `$would_run`, `$refusals`, `$centers`, `$table`; `as.data.frame()`
#'   one row per (center, analysis) with the epsilon it would spend and the budget and quota
#'   left after; [fs_refusals()] what would be refused.
#' @export
fs_plan <- function(fs, spec) {
  answer <- fs_call(fs, "POST", "/v1/studies", query = list(dry_run = "true"),
                    body = spec_body(spec), expected = c(200L, 202L))
  if (answer$status == 202L) {  # a coordinator without dry runs created the study
    stop(fedstats_condition("fedstats_unsupported", sprintf(paste0(
      "no_dry_run: this coordinator has no dry run: it created study %s (cancel it if it ",
      "was not meant to run)"), answer$body$id), code = "no_dry_run", status = 202L))
  }
  structure(answer$body, class = "fedstats_plan")
}

#' @export
as.data.frame.fedstats_plan <- function(x, ...) {
  rows <- list()
  for (c in x$centers) for (s in c$spends) {
    rows[[length(rows) + 1]] <- data.frame(
      center = c$center, analysis = s$analysis + 1L, kind = s$kind, epsilon = s$epsilon,
      exact = isTRUE(s$exact), center_epsilon = c$epsilon,
      remaining_after = num(c$remaining_after), quota_left_after = num(c$quota_left_after),
      stringsAsFactors = FALSE)
  }
  bind_rows(rows, c("center", "analysis", "kind", "epsilon", "exact", "center_epsilon",
                    "remaining_after", "quota_left_after"))
}

#' @rdname fs_plan
#' @param plan a `fedstats_plan`.
#' @export
fs_refusals <- function(plan) {
  rows <- lapply(plan$refusals, function(r) data.frame(
    reason = r$reason, center = na_if_null(r$center), detail = r$detail,
    blocking = isTRUE(r$blocking), stringsAsFactors = FALSE))
  bind_rows(rows, c("reason", "center", "detail", "blocking"))
}

#' @rdname fs_plan
#' @return fs_utility: one row per DP analysis' part at a center (or `"pooled"`): its 95 %
#'   error at the centers' sizes and the asked epsilon (`unit`: records or values), its `share`
#'   of n or of the bounds, and whether that leaves it `uninformative` (docs/methods.md §9.6);
#'   `analysis` counted from 1.
#' @export
fs_utility <- function(plan) {
  rows <- list()
  for (u in plan$utility) for (e in u$errors) {
    rows[[length(rows) + 1]] <- data.frame(
      analysis = u$analysis + 1L, kind = u$kind, epsilon = u$epsilon, center = e$center,
      variable = na_if_null(e$variable), arm = na_if_null(e$arm), part = e$part, n = e$n,
      error = e$error, unit = e$unit, share = e$share, uninformative = isTRUE(e$uninformative),
      stringsAsFactors = FALSE)
  }
  bind_rows(rows, c("analysis", "kind", "epsilon", "center", "variable", "arm", "part", "n",
                    "error", "unit", "share", "uninformative"))
}

#' @export
print.fedstats_plan <- function(x, ...) {
  cat(sprintf("<fedstats_plan %s.%s: %s>\n", x$dataset, x$variable,
              if (isTRUE(x$would_run)) "would run" else "would be refused"))
  print(as.data.frame(x), ...)
  refusals <- fs_refusals(x)
  if (nrow(refusals)) {
    cat("Refusals:\n")
    print(refusals, ...)
  }
  invisible(x)
}

#' Submit a study
#'
#' It runs in the background; [fs_wait()] follows it. A repeat with the same
#' `idempotency_key` returns the same study instead of starting (and paying for) another.
#' @inheritParams fs_plan
#' @param idempotency_key any string (a date, say) naming this submission.
#' @return a list: `id`, `status`, `status_url`.
#' @export
fs_submit <- function(fs, spec, idempotency_key = NULL) {
  headers <- if (is.null(idempotency_key)) list() else list(`Idempotency-Key` = idempotency_key)
  fs_call(fs, "POST", "/v1/studies", body = spec_body(spec), headers = headers,
          expected = c(200L, 201L, 202L))$body
}

#' A study as the coordinator holds it
#'
#' @inheritParams fs_centers
#' @param study_id the study's id.
#' @param provenance include every answer the centers gave it.
#' @return a `fedstats_study`: `$id`, `$status`, `$spec`, `$result`, `$error`, ... (the
#'   coordinator's answer); read its results with [fs_mwu()], [fs_effects()], [fs_table()],
#'   [fs_quantiles()], [fs_dp_quantiles()], [fs_boxplots()], [fs_describe()].
#' @export
fs_study <- function(fs, study_id, provenance = TRUE) {
  body <- fs_call(fs, "GET", study_path(study_id),
                  query = list(provenance = tolower(as.character(provenance))))$body
  structure(body, class = "fedstats_study")
}

#' @export
print.fedstats_study <- function(x, ...) {
  cat(sprintf("<fedstats_study %s: %s, %s.%s, %s releases>\n", x$id, x$status, x$spec$dataset,
              x$spec$variable, x$releases_received %||% 0))
  invisible(x)
}

#' Your studies and those shared with you, newest first
#'
#' @inheritParams fs_centers
#' @param status only studies in this status (or these statuses).
#' @param limit,offset a page of them.
#' @return one row per study.
#' @export
fs_studies <- function(fs, status = NULL, limit = 100, offset = 0) {
  query <- list(limit = limit, offset = offset)
  if (!is.null(status)) query <- c(query, stats::setNames(as.list(status),
                                                          rep("status", length(status))))
  cols <- c("id", "status", "dataset", "variable", "created_by", "created_at", "updated_at")
  rows <- lapply(fs_call(fs, "GET", "/v1/studies", query = query)$body, function(s) {
    as.data.frame(lapply(stats::setNames(cols, cols), function(k) na_if_null(s[[k]])),
                  stringsAsFactors = FALSE)
  })
  bind_rows(rows, cols)
}

#' Wait for a study to end
#'
#' Polls the study (without provenance) until it ends, showing its progress, then reads it in
#' full. A study that ended without a result (`failed`, `failed_resumable`, `cancelled`)
#' signals a `fedstats_study_failed` condition naming the center that failed it, unless
#' `raise_on_failure = FALSE`; a `partially_failed` one is returned (its failed analyses
#' signal `fedstats_analysis_failed` when read).
#' @inheritParams fs_study
#' @param progress `TRUE`: a line on stderr per change (rewritten in place in an interactive
#'   terminal); `FALSE`: nothing; a function: called with each line.
#' @param timeout seconds; past it a `fedstats_timeout` condition (the study keeps running:
#'   wait again or cancel it). `NULL`: no limit.
#' @param raise_on_failure signal on a study that ended without a result.
#' @return the `fedstats_study`.
#' @export
fs_wait <- function(fs, study_id, progress = TRUE, timeout = NULL, raise_on_failure = TRUE) {
  show <- progress_for(progress)
  started <- Sys.time()
  last <- NULL
  on.exit(show(NULL), add = TRUE)
  repeat {
    view <- fs_study(fs, study_id, provenance = FALSE)
    elapsed <- as.numeric(difftime(Sys.time(), started, units = "secs"))
    state <- list(view$status, view$releases_received)
    if (!identical(state, last)) {  # a line per change: a log of the wait stays short
      last <- state
      show(sprintf("study %s: %s, %s releases received (%.0f s)", study_id, view$status,
                   view$releases_received %||% 0, elapsed))
    }
    if (view$status %in% FINAL) break
    if (!is.null(timeout) && elapsed > timeout) {
      stop(fedstats_condition("fedstats_timeout", sprintf(paste0(
        "timeout: study %s still %s after %g s (it keeps running: wait again or cancel ",
        "it)"), study_id, view$status, timeout), code = "timeout", study_id = study_id))
    }
    Sys.sleep(fs$poll_interval)
  }
  finished(fs_study(fs, study_id), raise_on_failure)
}

finished <- function(study, raise_on_failure) {
  if (raise_on_failure && study$status %in% UNFINISHED) stop(study_failed(study))
  study
}

# How a wait shows its lines: a function of one line (NULL: the wait ended).
progress_for <- function(progress) {
  if (isFALSE(progress)) return(function(line) invisible(NULL))
  if (is.function(progress)) return(function(line) if (!is.null(line)) progress(line))
  in_place <- interactive() && isatty(stderr())
  width <- 0
  function(line) {
    if (is.null(line)) {
      if (in_place && width > 0) cat("\n", file = stderr())
    } else if (in_place) {
      cat("\r", formatC(line, width = -width), file = stderr(), sep = "")
      width <<- nchar(line)
    } else {
      message(line)
    }
  }
}

#' Submit a study and wait for it
#'
#' [fs_submit()] then [fs_wait()].
#' @inheritParams fs_plan
#' @inheritParams fs_wait
#' @inheritParams fs_submit
#' @export
fs_run <- function(fs, spec, progress = TRUE, timeout = NULL, idempotency_key = NULL,
                   raise_on_failure = TRUE) {
  created <- fs_submit(fs, spec, idempotency_key = idempotency_key)
  fs_wait(fs, created$id, progress = progress, timeout = timeout,
          raise_on_failure = raise_on_failure)
}

#' Run again what a study did not finish, and wait
#'
#' Nothing is asked or paid twice (`POST /v1/studies/{id}/resume`).
#' @inheritParams fs_wait
#' @export
fs_resume <- function(fs, study_id, progress = TRUE, timeout = NULL, raise_on_failure = TRUE) {
  fs_call(fs, "POST", study_path(study_id, "resume"), expected = c(200L, 202L))
  fs_wait(fs, study_id, progress = progress, timeout = timeout,
          raise_on_failure = raise_on_failure)
}

#' Stop a pending or running study
#'
#' @inheritParams fs_study
#' @return the study as it is then.
#' @export
fs_cancel <- function(fs, study_id) {
  fs_call(fs, "POST", study_path(study_id, "cancel"), expected = c(200L, 202L, 204L))
  fs_study(fs, study_id, provenance = FALSE)
}

#' Share a study with another analyst, or stop sharing it
#'
#' @inheritParams fs_study
#' @param analyst_id the other analyst's id.
#' @export
fs_share <- function(fs, study_id, analyst_id) {
  fs_call(fs, "POST", study_path(study_id, "shares"), body = list(analyst_id = analyst_id),
          expected = c(200L, 201L))$body
}

#' @rdname fs_share
#' @export
fs_unshare <- function(fs, study_id, analyst_id) {
  fs_call(fs, "DELETE", study_path(study_id, "shares", analyst_id), expected = 204L, raw = TRUE)
  invisible(NULL)
}

#' @rdname fs_share
#' @export
fs_shares <- function(fs, study_id) {
  fs_call(fs, "GET", study_path(study_id, "shares"))$body
}

#' The coordinator's figure of an analysis
#'
#' The boxplots of a finished `dp_boxplot` analysis, drawn by the coordinator.
#' @inheritParams fs_study
#' @param index the analysis's position in the spec (1 for the first, as R counts).
#' @param format `"svg"` or `"png"`.
#' @param file write the bytes there (and return the path) instead of returning them.
#' @return a raw vector, or `file`.
#' @export
fs_figure <- function(fs, study_id, index, format = c("svg", "png"), file = NULL) {
  format <- match.arg(format)
  bytes <- fs_call(fs, "GET", study_path(study_id, "analyses", index - 1L, "figure"),
                   query = list(format = format), raw = TRUE)$bytes
  if (is.null(file)) return(bytes)
  writeBin(bytes, file)
  invisible(file)
}

#' A finished study's tables as CSV
#'
#' With `part` (`"table1"`, `"tests"`, `"effects"`, `"boxplots"`, ...), that table as a data
#' frame, read from the coordinator's tidy CSV (`GET /v1/studies/{id}/export.csv`). Without it,
#' every table the study has, its Methods paragraph (`methods.txt`), spec and reproducibility
#' record, unpacked into `dir` (`GET /v1/studies/{id}/export.zip`).
#' @inheritParams fs_study
#' @param dir the folder to write into (made if missing); used without `part`.
#' @param part one table's name.
#' @return the table as a data frame, or the paths written.
#' @export
fs_export <- function(fs, study_id, dir = NULL, part = NULL) {
  if (!is.null(part)) {
    answer <- fs_call(fs, "GET", study_path(study_id, "export.csv"), query = list(part = part),
                      raw = TRUE)
    text <- rawToChar(answer$bytes)
    Encoding(text) <- "UTF-8"
    return(utils::read.csv(text = text, stringsAsFactors = FALSE, check.names = FALSE,
                           encoding = "UTF-8"))
  }
  if (is.null(dir)) stop("give `dir` (the folder to unpack into) or `part` (one table)")
  bytes <- fs_call(fs, "GET", study_path(study_id, "export.zip"), raw = TRUE)$bytes
  dir.create(dir, showWarnings = FALSE, recursive = TRUE)
  zip <- tempfile(fileext = ".zip")
  on.exit(unlink(zip), add = TRUE)
  writeBin(bytes, zip)
  # junkpaths: every file lands in `dir` itself, whatever the archive's folders.
  invisible(utils::unzip(zip, exdir = dir, junkpaths = TRUE))
}

# -- helpers shared by the frames ---------------------------------------------------------------

na_if_null <- function(x) if (is.null(x)) NA else x
num <- function(x) if (is.null(x)) NA_real_ else as.numeric(x)

# Rows (one-row data frames) bound into one frame; with no rows, the named empty columns.
bind_rows <- function(rows, columns) {
  if (!length(rows)) {
    return(as.data.frame(stats::setNames(replicate(length(columns), logical(), simplify = FALSE),
                                         columns)))
  }
  all_cols <- unique(c(columns, unlist(lapply(rows, names))))
  rows <- lapply(rows, function(r) {
    for (col in setdiff(all_cols, names(r))) r[[col]] <- NA
    r[all_cols]
  })
  out <- do.call(rbind, rows)
  rownames(out) <- NULL
  out
}
