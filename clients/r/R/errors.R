# The coordinator's error answers as R conditions (docs/r-client.md, "Errors").
#
# Every error answer of the coordinator is the body {"error": code, "detail": text, ...extras}
# (docs/coordinator.md, "The analyst API"); it becomes a condition of class
# c("fedstats_<kind>", "fedstats_api_error", "fedstats_error", "error", "condition") holding
# the code, the HTTP status, the detail, the whole body, and the center and its failure kind
# when a center failed. The classes mirror fedstats_client.errors (the Python client's
# exceptions): AuthenticationError is fedstats_authentication_error, and so on. No condition
# ever holds the caller's token: the client never puts it in a message.

# The condition class of each API error code, then of each HTTP status (as BY_CODE and
# BY_STATUS in fedstats_client/errors.py).
.by_code <- c(unauthenticated = "fedstats_authentication_error",
              quota_exceeded = "fedstats_quota_exceeded",
              center_failure = "fedstats_center_failed")
.by_status <- c("401" = "fedstats_authentication_error",
                "403" = "fedstats_forbidden",
                "404" = "fedstats_not_found",
                "409" = "fedstats_conflict",
                "422" = "fedstats_invalid_request",
                "502" = "fedstats_center_failed",
                "503" = "fedstats_unavailable")

# A classed condition: `message` shown, the fields kept for handlers (cnd$code, cnd$center).
fedstats_condition <- function(classes, message, code = "error", status = NULL, detail = message,
                               body = NULL, call = NULL, ...) {
  if (is.null(body)) body <- list(error = code, detail = detail)
  structure(
    class = c(classes, "fedstats_error", "error", "condition"),
    list(message = message, call = call, code = code, status = status, detail = detail,
         body = body, center = body$center, kind = body$kind, ...)
  )
}

# The text of a condition: "<code> (<status>): <detail>", and the center when one is named.
error_text <- function(code, status, detail, body) {
  head <- if (is.null(status)) code else sprintf("%s (%s)", code, status)
  where <- if (!is.null(body$center)) sprintf(" [center %s%s]", body$center,
                                              if (!is.null(body$kind)) paste0(", ", body$kind)
                                              else "") else ""
  paste0(head, ": ", detail, where)
}

# The condition of an error answer: its JSON body when it is the error body, else the start of
# its text (a proxy's HTML page, say).
api_error <- function(status, body, text = "") {
  if (is.list(body) && is.character(body$error) && length(body$error) == 1) {
    code <- body$error
    detail <- if (is.null(body$detail)) "" else paste(unlist(body$detail), collapse = " ")
  } else {
    code <- paste0("http_", status)
    detail <- if (nzchar(text)) substr(text, 1, 500) else paste("HTTP", status)
    body <- NULL
  }
  specific <- if (code %in% names(.by_code)) .by_code[[code]]
              else if (as.character(status) %in% names(.by_status)) .by_status[[as.character(status)]]
              else character()
  extra <- if (identical(specific, "fedstats_quota_exceeded")) "fedstats_forbidden" else character()
  cnd <- fedstats_condition(c(specific, extra, "fedstats_api_error"),
                            error_text(code, status, detail, body), code = code,
                            status = status, detail = detail, body = body)
  # 422: the dotted keys to fix, when the coordinator names them.
  cnd$fields <- if (!is.null(body$fields)) unlist(body$fields) else character()
  cnd
}

configuration_error <- function(message, code) {
  fedstats_condition("fedstats_configuration_error", paste0(code, ": ", message), code = code,
                     detail = message)
}

connection_failed <- function(message, code) {
  fedstats_condition("fedstats_connection_failed", paste0(code, ": ", message), code = code,
                     detail = message)
}

spec_error <- function(message) {
  fedstats_condition("fedstats_spec_error", paste0("invalid study spec: ", message),
                     code = "invalid_spec", detail = message)
}

# A study that ended without a result (failed, failed_resumable, cancelled): the study's stored
# error, naming the center that failed it; `study` is the study as last read.
study_failed <- function(study) {
  body <- study$error
  if (is.null(body)) body <- list(error = study$status,
                                  detail = paste("the study is", study$status))
  detail <- sprintf("study %s %s: %s", study$id, study$status, body$detail %||% "")
  resumable <- identical(study$status, "failed_resumable") ||
    (identical(study$status, "failed") && isTRUE(body$kind %in% c("unreachable", "timeout")))
  fedstats_condition("fedstats_study_failed", error_text(body$error, NULL, detail, body),
                     code = body$error, detail = detail, body = body, study = study,
                     study_id = study$id, study_status = study$status, resumable = resumable)
}

# An analysis of a partially_failed study that gave no result, read as if it had one.
analysis_failed <- function(index, analysis_kind, body) {
  detail <- sprintf("analysis %d (%s) failed: %s", index, analysis_kind, body$detail %||% "")
  fedstats_condition("fedstats_analysis_failed", error_text(body$error, NULL, detail, body),
                     code = body$error, detail = detail, body = body, index = index,
                     analysis_kind = analysis_kind)
}

`%||%` <- function(a, b) if (is.null(a)) b else a
