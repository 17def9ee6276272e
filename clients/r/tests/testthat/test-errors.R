# Error answers as classed R conditions: first the mapping, offline; then against the live
# coordinator.

test_that("each error body becomes its class, keeping code, status, detail and center", {
  cnd <- fedstats:::api_error(502L, list(error = "center_failure", detail = "no answer",
                                         center = "hospital_b", kind = "timeout"))
  expect_s3_class(cnd, c("fedstats_center_failed", "fedstats_api_error", "fedstats_error",
                         "error"))
  expect_identical(cnd$code, "center_failure")
  expect_identical(cnd$status, 502L)
  expect_identical(cnd$center, "hospital_b")
  expect_identical(cnd$kind, "timeout")
  expect_match(conditionMessage(cnd), "center_failure \\(502\\): no answer \\[center hospital_b, timeout\\]")

  quota <- fedstats:::api_error(403L, list(error = "quota_exceeded", detail = "over",
                                           center = "a", dataset = "cohort", quota = 1))
  expect_s3_class(quota, "fedstats_quota_exceeded")
  expect_s3_class(quota, "fedstats_forbidden")
  expect_identical(quota$body$quota, 1)

  invalid <- fedstats:::api_error(422L, list(error = "invalid_request", detail = "bad",
                                             fields = list("analyses.0.epsilon")))
  expect_s3_class(invalid, "fedstats_invalid_request")
  expect_identical(invalid$fields, "analyses.0.epsilon")

  html <- fedstats:::api_error(504L, NULL, "<html>gateway timeout</html>")
  expect_s3_class(html, "fedstats_api_error")
  expect_identical(html$code, "http_504")
  expect_match(html$detail, "gateway timeout")
})

test_that("no URL or no token is a configuration error naming the variable", {
  expect_error(fs_connect(base_url = "", token = "t"), class = "fedstats_configuration_error",
               regexp = "FEDSTATS_COORDINATOR_URL")
  expect_error(fs_connect(base_url = "http://127.0.0.1:1", token = ""),
               class = "fedstats_configuration_error", regexp = "FEDSTATS_ANALYST_TOKEN")
  expect_error(fs_connect(base_url = "ftp://x", token = "t"),
               class = "fedstats_configuration_error", regexp = "http")
  missing_ca <- tempfile(fileext = ".pem")
  writeLines("not a certificate", missing_ca)
  expect_error(fs_connect(base_url = "https://x", token = "t", ca_bundle = missing_ca),
               class = "fedstats_configuration_error", regexp = "ca_bundle")
})

test_that("the token appears in no printed client nor in any condition", {
  fs <- fs_connect(base_url = "http://127.0.0.1:9", token = "s3cret-token-value")
  expect_false(grepl("s3cret", paste(capture.output(print(fs), str(fs)), collapse = "\n")))
  cnd <- tryCatch(fs_catalog(fs), error = function(e) e)
  expect_s3_class(cnd, "fedstats_connection_failed")
  expect_false(grepl("s3cret", conditionMessage(cnd)))
})

test_that("an unreachable coordinator names its URL and what to check", {
  fs <- fs_connect(base_url = "http://127.0.0.1:9", token = "t", timeout = 5)
  cnd <- tryCatch(fs_centers(fs), error = function(e) e)
  expect_s3_class(cnd, "fedstats_connection_failed")
  expect_identical(cnd$code, "unreachable")
  expect_match(conditionMessage(cnd), "http://127.0.0.1:9: cannot reach the coordinator")
})

test_that("the live coordinator's refusals arrive as classed conditions", {
  fs <- live_client()
  stranger <- fs_connect(token = "not-a-token-of-this-coordinator")
  expect_error(fs_catalog(stranger), class = "fedstats_authentication_error")
  cnd <- tryCatch(fs_study(fs, "0123456789abcdef0123456789abcdef"), error = function(e) e)
  expect_s3_class(cnd, "fedstats_not_found")
  expect_identical(cnd$status, 404L)
  # A bad parameter: the coordinator's 422 names the key; nothing was asked of a center.
  bad <- fs_study_spec("cohort", "los_days", groups = c("control", "treated")) |>
    fs_add_dp_boxplot(epsilon = -1, bounds = c(0, 60), group = "treated")
  cnd <- tryCatch(fs_plan(fs, bad), error = function(e) e)
  expect_s3_class(cnd, "fedstats_invalid_request")
  expect_identical(cnd$status, 422L)
  expect_true(any(grepl("epsilon", c(cnd$fields, cnd$detail))))
  # An unknown key in a list spec is the coordinator's 422 too, naming it.
  typo <- list(dataset = "cohort", variable = "los_days",
               analyses = list(list(kind = "table", lowr = 0)))
  cnd <- tryCatch(fs_submit(fs, typo), error = function(e) e)
  expect_s3_class(cnd, "fedstats_invalid_request")
  expect_true(any(grepl("lowr", c(cnd$fields, cnd$detail))))
})
