# The vignette's chunks run, in order, against the live coordinator (knitr is not needed to
# run them: the chunks are read out of the .Rmd).

vignette_chunks <- function(path) {
  lines <- readLines(path)
  starts <- grep("^```\\{r", lines)
  ends <- grep("^```\\s*$", lines)
  vapply(starts, function(s) {
    e <- min(ends[ends > s])
    paste(lines[(s + 1):(e - 1)], collapse = "\n")
  }, character(1))
}

test_that("every chunk of the vignette runs against the coordinator", {
  live_client()  # skips without one
  path <- file.path(testthat::test_path(), "..", "..", "vignettes", "fedstats.Rmd")
  if (!file.exists(path)) path <- system.file("doc", "fedstats.Rmd", package = "fedstats")
  chunks <- vignette_chunks(path)
  expect_identical(length(chunks), 6L)
  env <- new.env()
  grDevices::pdf(NULL)
  on.exit(grDevices::dev.off(), add = TRUE)
  for (chunk in chunks) {
    expect_no_error(capture.output(eval(parse(text = chunk), envir = env)))
  }
  expect_identical(env$study$status, "succeeded")
  expect_true(env$plan$would_run)
  expect_match(env$result, "unknown_name \\(422\\).*length_of_stay")
})
