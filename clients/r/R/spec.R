# Study specs built in R: the spec a study file holds (docs/coordinator.md, "A study"), one
# analysis at a time, as fedstats_client.Study in Python:
#
#   spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |>
#     fs_add_table(lower = 0) |>
#     fs_add_mwu() |>
#     fs_add_dp_boxplot(group = "treated", epsilon = 0.5, bounds = c(0, 60))
#
# Options left NULL take the coordinator's defaults. The coordinator validates the spec (a dry
# run or a submission answers 422 naming each key to fix, before anything is asked of a
# center); this file checks only the shape it needs to send it, so the rules live in one place.

# Keys whose value is a JSON array even with one element (R has no scalars).
ARRAY_KEYS <- c("groups", "centers", "tests", "levels", "bounds", "estimators", "variables",
                "categorical")

#' Start a study spec
#'
#' @param dataset a dataset every center declares (see [fs_catalog()]).
#' @param variable one of its variables.
#' @param groups the two group levels, X then Y (NULL: one group).
#' @param k no center releases a count in 1..k-1.
#' @param centers the registry ids of the centers to ask (NULL: all).
#' @param allow_partial leave out a failing center (recorded) instead of failing.
#' @param title,description shown in study lists, the report and the exports.
#' @param primary the pre-registered primary test: `list(analysis = i, test = "sum",
#'   alpha = 0.05)`, `analysis` counted from 1 as R counts (sent counted from 0).
#' @param ... further top-level keys of the spec, passed as given.
#' @return a `fedstats_spec`; add analyses with the `fs_add_*()` functions.
#' @export
fs_study_spec <- function(dataset, variable, groups = NULL, k = NULL, centers = NULL,
                          allow_partial = NULL, title = NULL, description = NULL,
                          primary = NULL, ...) {
  if (!is.null(primary)) {
    if (!is.list(primary) || !is.numeric(primary$analysis) || length(primary$analysis) != 1 ||
        primary$analysis < 1) {
      stop(spec_error("primary: give list(analysis = i, test = ...), i counted from 1"))
    }
    primary$analysis <- as.integer(primary$analysis) - 1L
  }
  base <- given(dataset = dataset, variable = variable, groups = groups, k = k,
                centers = centers, allow_partial = allow_partial, title = title,
                description = description, primary = primary, ...)
  structure(c(base, list(analyses = list())), class = "fedstats_spec")
}

add_analysis <- function(spec, kind, ...) {
  if (!inherits(spec, "fedstats_spec")) {
    stop(spec_error("add analyses to a spec made by fs_study_spec()"))
  }
  spec$analyses <- c(spec$analyses, list(c(list(kind = kind), given(...))))
  spec
}

#' Analyses of a study
#'
#' Each adds one analysis to a spec and returns the new spec (nothing is sent).
#' `fs_add_table()`: the federated K-anonymous bin table (`lower`/`upper`: a natural limit,
#' `"buffer"` or `"infinite"`). `fs_add_mwu()`: the federated Mann-Whitney tests of X against Y.
#' `fs_add_quantiles()`: quantiles from the federated table. `fs_add_dp_quantiles()`: each
#' center's epsilon-DP quantiles. `fs_add_dp_boxplot()`: epsilon-DP boxplots, per center and
#' pooled (each center spends `epsilon` per box). `fs_add_describe()`: a "Table 1" (no epsilon
#' from the tables, or epsilon-DP with `epsilon`). `fs_add_dp_mwu()`: the DP twin of the
#' Mann-Whitney tests (each center's noisy sizes and noisy U, epsilon-DP under add/remove),
#' which centers in DP mode answer (they refuse `fs_add_mwu()`). `fs_add_shift()`: the
#' Hodges-Lehmann shift of Y against X with its Moses interval, as far as the federated
#' table's bins allow (no epsilon). `fs_add_kruskal()`: Kruskal-Wallis across the study's
#' groups (2 to 32 arms) from the K-anonymous tables, no epsilon; with `ordered` also
#' Jonckheere-Terpstra. `fs_add_categorical()`: a categorical variable by arm, n (%) with
#' Wilson intervals, Pearson's chi-squared (Fisher's exact test for a small 2 x 2 table) and
#' the CMH test stratified by center, from the centers' K-anonymous counts (no epsilon) or,
#' with `epsilon` (spent per arm at each center), their epsilon-DP counts.
#' @param spec a `fedstats_spec`.
#' @param lower,upper table: how the end bins close (a number, `"buffer"`, `"infinite"`).
#' @param tests mwu: of `"sum"`, `"weighted"`, `"fisher"`, `"table"` (default: all four);
#'   dp_mwu: of `"sum"`, `"weighted"`, `"fisher"` (default: all three).
#' @param size_share dp_mwu: the share of `epsilon` spent on the two noisy sizes (default 0.2).
#' @param alternative mwu, dp_mwu: `"two-sided"`, `"less"` or `"greater"`; kruskal (with
#'   `ordered`): `"increasing"` (default), `"decreasing"` or `"two-sided"`.
#' @param epsilon the epsilon each center spends (mwu: noise on its U; dp_mwu: its sizes and U; dp_quantiles: once for
#'   all levels; dp_boxplot: per box; quantiles: yj_data's fit; describe: per variable and arm;
#'   categorical: per arm).
#' @param levels quantile levels in (0, 1), increasing (dp_boxplot: the pooled box's further
#'   levels, default 0.05 and 0.95).
#' @param estimators quantiles: of `"yj_table"`, `"interpolation"`, `"extrapolation"`,
#'   `"yj_shaped"`, `"yj_data"`.
#' @param bounds public bounds `c(low, high)` the values are clipped to (describe: a named
#'   list of them per variable).
#' @param algorithm dp_quantiles: `"joint_exp"` (default), `"private_quantile"`,
#'   `"approx_quantile"`, `"unbounded"`.
#' @param group one declared group level (NULL: every record).
#' @param per_center,pooled the centers' own boxes / rows, the pooled one, or both
#'   (categorical: `per_center` shows each center's own counts too, default TRUE).
#' @param depth,branching dp_boxplot: the pooled box's grid (branching^depth leaves).
#' @param variables describe: the variables (default: the study's).
#' @param mode describe, categorical: `"table"` (no epsilon) or `"dp"` (default: dp when
#'   `epsilon` is given, else table).
#' @param categorical describe: categorical variables shown as n (%) rows per category.
#' @param bins describe (dp): equal-width histogram bins.
#' @param level shift: the Moses interval's confidence level (default 0.95).
#' @param ordered kruskal: the groups are named in their hypothesised order; also test a trend
#'   (Jonckheere-Terpstra; default FALSE).
#' @param variable categorical: a categorical variable the centers declare.
#' @name fs_add
NULL

#' @rdname fs_add
#' @export
fs_add_table <- function(spec, lower = NULL, upper = NULL) {
  add_analysis(spec, "table", lower = lower, upper = upper)
}

#' @rdname fs_add
#' @export
fs_add_mwu <- function(spec, tests = NULL, alternative = NULL, epsilon = NULL) {
  add_analysis(spec, "mwu", tests = tests, alternative = alternative, epsilon = epsilon)
}

#' @rdname fs_add
#' @export
fs_add_dp_mwu <- function(spec, epsilon, tests = NULL, alternative = NULL, size_share = NULL) {
  add_analysis(spec, "dp_mwu", epsilon = epsilon, tests = tests, alternative = alternative,
               size_share = size_share)
}

#' @rdname fs_add
#' @export
fs_add_quantiles <- function(spec, levels, estimators = NULL, epsilon = NULL, bounds = NULL) {
  add_analysis(spec, "quantiles", levels = levels, estimators = estimators, epsilon = epsilon,
               bounds = bounds)
}

#' @rdname fs_add
#' @export
fs_add_dp_quantiles <- function(spec, levels, epsilon, bounds, algorithm = NULL, group = NULL) {
  add_analysis(spec, "dp_quantiles", levels = levels, epsilon = epsilon, bounds = bounds,
               algorithm = algorithm, group = group)
}

#' @rdname fs_add
#' @export
fs_add_dp_boxplot <- function(spec, epsilon, bounds, group = NULL, per_center = NULL,
                              pooled = NULL, depth = NULL, branching = NULL, levels = NULL) {
  add_analysis(spec, "dp_boxplot", epsilon = epsilon, bounds = bounds, group = group,
               per_center = per_center, pooled = pooled, depth = depth, branching = branching,
               levels = levels)
}

#' @rdname fs_add
#' @export
fs_add_describe <- function(spec, variables = NULL, mode = NULL, epsilon = NULL, bounds = NULL,
                            bins = NULL, per_center = NULL, pooled = NULL, categorical = NULL) {
  if (!is.null(bounds)) bounds <- lapply(as.list(bounds), function(b) I(as.numeric(b)))
  add_analysis(spec, "describe", variables = variables, mode = mode, epsilon = epsilon,
               bounds = bounds, bins = bins, per_center = per_center, pooled = pooled,
               categorical = categorical)
}

#' @rdname fs_add
#' @export
fs_add_shift <- function(spec, level = NULL) {
  add_analysis(spec, "shift", level = level)
}

#' @rdname fs_add
#' @export
fs_add_kruskal <- function(spec, ordered = NULL, alternative = NULL) {
  add_analysis(spec, "kruskal", ordered = ordered, alternative = alternative)
}

#' @rdname fs_add
#' @export
fs_add_categorical <- function(spec, variable, mode = NULL, epsilon = NULL, per_center = NULL) {
  add_analysis(spec, "categorical", variable = variable, mode = mode, epsilon = epsilon,
               per_center = per_center)
}

#' @rdname fs_add
#' @export
fs_add_survival <- function(spec, variable, epsilon, horizon, intervals = NULL, weights = NULL,
                            censoring = NULL, per_center = NULL) {
  add_analysis(spec, "survival", variable = variable, epsilon = epsilon, horizon = horizon,
               intervals = intervals, weights = weights, censoring = censoring,
               per_center = per_center)
}

#' @rdname fs_add
#' @param kind any analysis the coordinator registers (`GET /v1/info`'s or the docs' list;
#'   e.g. one newer than this client's functions), its keys given in `...` as the study file
#'   names them.
#' @param ... fs_add_analysis: the analysis' keys (NULL ones left out).
#' @export
fs_add_analysis <- function(spec, kind, ...) {
  if (!is.character(kind) || length(kind) != 1 || !nzchar(kind)) {
    stop(spec_error("kind: give one analysis kind, e.g. \"mwu\""))
  }
  add_analysis(spec, kind, ...)
}

#' @export
print.fedstats_spec <- function(x, ...) {
  kinds <- vapply(x$analyses, function(a) as.character(a$kind), character(1))
  cat(sprintf("<fedstats_spec %s.%s: %s>\n", x$dataset, x$variable,
              if (length(kinds)) paste(kinds, collapse = ", ") else "no analysis yet"))
  invisible(x)
}

#' Read a study file
#'
#' A study file as `fedstats study run` reads it: TOML (needs the RcppTOML package) or JSON,
#' chosen by its extension (`.toml`, `.json`).
#' @param path the file.
#' @return the spec as a list, to pass to [fs_plan()], [fs_submit()] or [fs_run()].
#' @export
fs_read_study <- function(path) {
  if (!file.exists(path)) stop(spec_error(sprintf("%s: no such study file", path)))
  if (grepl("\\.json$", path, ignore.case = TRUE)) {
    spec <- tryCatch(jsonlite::read_json(path, simplifyVector = FALSE), error = function(e) {
      stop(spec_error(sprintf("%s: not JSON (%s)", path, conditionMessage(e))))
    })
  } else {
    if (!requireNamespace("RcppTOML", quietly = TRUE)) {
      stop(spec_error(paste0(path, ": reading TOML needs the RcppTOML package ",
                             "(Debian: r-cran-rcpptoml); or write the study as JSON")))
    }
    spec <- tryCatch(RcppTOML::parseTOML(path, escape = FALSE), error = function(e) {
      stop(spec_error(sprintf("%s: not TOML (%s)", path, conditionMessage(e))))
    })
    spec <- from_toml(spec)
  }
  if (!is.list(spec) || is.null(names(spec))) {
    stop(spec_error(sprintf("%s: a study file holds a table of keys", path)))
  }
  spec
}

# RcppTOML's values as plain lists: arrays of tables (analyses) become lists of lists;
# vectors stay vectors (ARRAY_KEYS are sent as arrays whatever their length).
from_toml <- function(x) {
  if (is.list(x)) {
    x <- lapply(unclass(x), from_toml)
    attributes(x) <- attributes(x)[intersect(names(attributes(x)), "names")]
  }
  x
}

# The JSON body of a spec: a fedstats_spec, a list (a study file's content) or a JSON string;
# the keys that are arrays sent as arrays even with one element.
spec_body <- function(spec) {
  if (is.character(spec) && length(spec) == 1) {
    spec <- tryCatch(jsonlite::parse_json(spec, simplifyVector = FALSE), error = function(e) {
      stop(spec_error(paste("not a JSON study spec:", conditionMessage(e))))
    })
  }
  if (!is.list(spec) || is.null(names(spec))) {
    stop(spec_error("a spec is a fs_study_spec(), a named list or a JSON object"))
  }
  spec <- unclass(spec)
  for (key in c("dataset", "variable")) {
    if (!is.character(spec[[key]]) || length(spec[[key]]) != 1) {
      stop(spec_error(sprintf("%s: give one name", key)))
    }
  }
  if (!is.list(spec$analyses) || !length(spec$analyses)) {
    stop(spec_error("analyses: add at least one analysis (fs_add_table(), fs_add_mwu(), ...)"))
  }
  for (i in seq_along(spec$analyses)) {
    a <- spec$analyses[[i]]
    if (!is.list(a) || !is.character(a$kind) || length(a$kind) != 1) {
      stop(spec_error(sprintf("analyses.%d.kind: each analysis names its kind", i)))
    }
  }
  spec$analyses <- lapply(spec$analyses, as_arrays)
  as_arrays(spec)
}

as_arrays <- function(x) {
  for (key in intersect(names(x), ARRAY_KEYS)) {
    value <- x[[key]]
    if (is.atomic(value) && !is.null(value)) x[[key]] <- I(unclass(value))
    else if (key == "bounds" && is.list(value) && !is.null(names(value))) {
      x[[key]] <- lapply(value, function(b) I(unlist(b)))  # describe: per variable
    }
  }
  x
}

# The options given (NULL: the coordinator's default).
given <- function(...) {
  options <- list(...)
  options[!vapply(options, is.null, logical(1))]
}
