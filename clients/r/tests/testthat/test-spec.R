# Specs as the coordinator reads them: the JSON body sent, study files, classed spec errors.
# Nothing here calls a coordinator.

body_of <- function(spec) jsonlite::parse_json(fedstats:::to_json(fedstats:::spec_body(spec)))

test_that("a built spec is the study file's JSON, one-element arrays kept as arrays", {
  spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |>
    fs_add_table(lower = 0) |>
    fs_add_mwu(tests = "sum") |>
    fs_add_dp_quantiles(0.5, epsilon = 0.25, bounds = c(0, 60), group = "treated") |>
    fs_add_describe(variables = "los_days")
  expect_identical(body_of(spec), list(
    dataset = "cohort", variable = "los_days", groups = list("control", "treated"),
    analyses = list(
      list(kind = "table", lower = 0L),
      list(kind = "mwu", tests = list("sum")),
      list(kind = "dp_quantiles", levels = list(0.5), epsilon = 0.25, bounds = list(0L, 60L),
           group = "treated"),
      list(kind = "describe", variables = list("los_days")))))
  expect_output(print(spec), "cohort.los_days: table, mwu, dp_quantiles, describe")
})

test_that("a list spec gets its array keys as arrays; a JSON string is sent as it is", {
  spec <- list(dataset = "cohort", variable = "los_days", centers = "hospital_a",
               analyses = list(list(kind = "quantiles", levels = 0.5)))
  body <- body_of(spec)
  expect_identical(body$centers, list("hospital_a"))
  expect_identical(body$analyses[[1]]$levels, list(0.5))
  json <- '{"dataset": "cohort", "variable": "los_days", "analyses": [{"kind": "table"}]}'
  expect_identical(body_of(json), jsonlite::parse_json(json))
})

test_that("describe bounds are per variable, each an array", {
  spec <- fs_study_spec("cohort", "los_days") |>
    fs_add_describe(c("los_days", "age"), epsilon = 1, bounds = list(los_days = c(0, 60)))
  expect_identical(body_of(spec)$analyses[[1]]$bounds, list(los_days = list(0L, 60L)))
})

test_that("the example study file reads as TOML and as JSON to the same body", {
  skip_if_not_installed("RcppTOML")
  example <- repo_file("examples", "study.toml")
  skip_if_not(file.exists(example), "not in the fedstats repository (set FEDSTATS_REPO)")
  from_toml <- fs_read_study(example)
  json <- tempfile(fileext = ".json")
  writeLines(fedstats:::to_json(fedstats:::spec_body(from_toml)), json)
  from_json <- fs_read_study(json)
  expect_identical(body_of(from_toml), body_of(from_json))
  expect_identical(from_toml$dataset, "cohort")
  kinds <- vapply(from_toml$analyses, function(a) a$kind, "")
  expect_identical(kinds, c("table", "mwu", "quantiles", "dp_quantiles", "dp_boxplot", "shift"))
  expect_identical(body_of(from_toml)$analyses[[4]]$levels, list(0.25, 0.5, 0.75))
})

test_that("a spec that cannot be sent is a classed condition naming the key", {
  expect_error(fedstats:::spec_body(list(dataset = "cohort", variable = "x")),
               class = "fedstats_spec_error", regexp = "analyses")
  expect_error(fedstats:::spec_body(list(dataset = "cohort", variable = "x",
                                         analyses = list(list(lower = 0)))),
               class = "fedstats_spec_error", regexp = "analyses.1.kind")
  expect_error(fedstats:::spec_body("{not json"), class = "fedstats_spec_error")
  expect_error(fs_add_table(list()), class = "fedstats_spec_error")
  expect_error(fs_read_study(tempfile(fileext = ".toml")), class = "fedstats_spec_error",
               regexp = "no such study file")
  # A typo in an option is R's own error: the functions take named options only.
  expect_error(fs_study_spec("cohort", "x") |> fs_add_mwu(tset = "sum"), "unused argument")
})

test_that("title, description and the primary test are sent; primary's analysis from 1", {
  spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated"),
                        title = "LOS by arm", description = "pre-registered",
                        primary = list(analysis = 2, test = "sum", alpha = 0.05)) |>
    fs_add_table() |>
    fs_add_mwu()
  body <- body_of(spec)
  expect_identical(body$title, "LOS by arm")
  expect_identical(body$description, "pre-registered")
  expect_identical(body$primary, list(analysis = 1L, test = "sum", alpha = 0.05))
  expect_error(fs_study_spec("cohort", "x", primary = list(test = "sum")),
               class = "fedstats_spec_error", regexp = "primary")
})

test_that("any registered analysis is added by its kind, its keys as the study file names them", {
  spec <- fs_study_spec("cohort", "los_days", groups = c("a", "b", "c")) |>
    fs_add_analysis("kruskal", ordered = TRUE, tests = NULL)
  expect_identical(body_of(spec)$analyses, list(list(kind = "kruskal", ordered = TRUE)))
  expect_error(fs_add_analysis(spec, ""), class = "fedstats_spec_error", regexp = "kind")
})

test_that("shift, kruskal and categorical have their builders, Python's Study's arguments", {
  spec <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |>
    fs_add_shift() |>
    fs_add_shift(level = 0.9) |>
    fs_add_kruskal() |>
    fs_add_kruskal(ordered = TRUE, alternative = "decreasing") |>
    fs_add_categorical("smoking") |>
    fs_add_categorical("smoking", mode = "dp", epsilon = 0.5, per_center = FALSE)
  expect_identical(body_of(spec)$analyses, list(
    list(kind = "shift"),
    list(kind = "shift", level = 0.9),
    list(kind = "kruskal"),
    list(kind = "kruskal", ordered = TRUE, alternative = "decreasing"),
    list(kind = "categorical", variable = "smoking"),
    list(kind = "categorical", variable = "smoking", mode = "dp", epsilon = 0.5,
         per_center = FALSE)))
  expect_output(print(spec), "shift, shift, kruskal, kruskal, categorical, categorical")
  # The same analysis as added by its kind.
  by_kind <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |>
    fs_add_analysis("kruskal", ordered = TRUE, alternative = "decreasing")
  expect_identical(body_of(by_kind)$analyses[[1]], body_of(spec)$analyses[[4]])
  # The variable is required, as in Python; a misspelt option is R's own error.
  expect_error(fs_add_categorical(spec), "variable")
  expect_error(fs_add_kruskal(spec, trend = TRUE), "unused argument")
})
