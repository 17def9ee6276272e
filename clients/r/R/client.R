# The connection to one coordinator, as one analyst (its bearer token), and the HTTP calls
# (docs/r-client.md, "Connecting"). As fedstats_client.Client: the URL and token from the
# arguments or the environment, a private CA's bundle for an HTTPS coordinator, no proxy read
# from the environment, the token in no printed object or condition.

TOKEN_ENV <- "FEDSTATS_ANALYST_TOKEN"
URL_ENV <- "FEDSTATS_COORDINATOR_URL"
USER_AGENT <- "fedstats-r-client/0.1"

#' Connect to a coordinator
#'
#' @param base_url the coordinator's base URL (default: `FEDSTATS_COORDINATOR_URL`).
#' @param token your analyst token (default: `FEDSTATS_ANALYST_TOKEN`).
#' @param ca_bundle a PEM file of the CA that signed an HTTPS coordinator's certificate (a
#'   private CA; default: `SSL_CERT_FILE`, else the system's store).
#' @param cert a client certificate and key (two PEM files), for a coordinator behind mutual TLS.
#' @param timeout seconds per HTTP call.
#' @param poll_interval seconds between two looks while waiting for a study.
#' @return a `fedstats_client`, to pass to every other function.
#' @export
fs_connect <- function(base_url = Sys.getenv(URL_ENV), token = Sys.getenv(TOKEN_ENV),
                       ca_bundle = NULL, cert = NULL, timeout = 30, poll_interval = 0.5) {
  if (is.null(base_url) || !nzchar(base_url)) {
    stop(configuration_error(paste0("no coordinator URL: pass base_url or set ", URL_ENV),
                             "no_url"))
  }
  if (!grepl("^https?://", base_url)) {
    stop(configuration_error(sprintf("base_url must start with http:// or https://, not '%s'",
                                     substr(base_url, 1, 40)), "bad_url"))
  }
  if (is.null(token) || !nzchar(token)) {
    stop(configuration_error(paste0("no analyst token: pass token or set ", TOKEN_ENV),
                             "no_token"))
  }
  if (is.null(ca_bundle) && nzchar(Sys.getenv("SSL_CERT_FILE"))) {
    ca_bundle <- Sys.getenv("SSL_CERT_FILE")  # what OpenSSL reads; curl may not
  }
  if (!is.null(ca_bundle) && !pem_file(ca_bundle, "CERTIFICATE")) {
    stop(configuration_error(sprintf(
      "ca_bundle %s: not a readable PEM file of CA certificates", ca_bundle), "bad_ca_bundle"))
  }
  if (!is.null(cert) && (length(cert) != 2 || !pem_file(cert[[1]], "CERTIFICATE") ||
                         !pem_file(cert[[2]], "PRIVATE KEY"))) {
    stop(configuration_error(sprintf("cert %s: not a readable PEM certificate and key",
                                     paste(cert, collapse = ", ")), "bad_cert"))
  }
  # The token lives in a closure: printing, str() or a condition never shows it.
  secret <- token
  structure(list(base_url = sub("/+$", "", base_url), ca_bundle = ca_bundle, cert = cert,
                 timeout = timeout, poll_interval = poll_interval,
                 auth = function(req) httr2::req_headers(req, Authorization =
                                                           paste("Bearer", secret))),
            class = "fedstats_client")
}

#' @export
print.fedstats_client <- function(x, ...) {
  cat(sprintf("<fedstats_client %s>\n", x$base_url))
  invisible(x)
}

#' @export
format.fedstats_client <- function(x, ...) sprintf("<fedstats_client %s>", x$base_url)

pem_file <- function(path, what) {
  lines <- tryCatch(readLines(path, warn = FALSE), error = function(e) NULL,
                    warning = function(w) NULL)
  !is.null(lines) && any(grepl(paste0("-----BEGIN .*", what, "-----"), lines))
}

# One call: the answer (status, parsed JSON body, raw bytes), or the condition of its error
# body when its status is not `expected`.
fs_call <- function(fs, method, path, query = list(), body = NULL, headers = list(),
                    expected = 200L, raw = FALSE) {
  stopifnot(inherits(fs, "fedstats_client"))
  req <- httr2::request(paste0(fs$base_url, path))
  req <- httr2::req_method(req, method)
  if (length(query)) req <- do.call(httr2::req_url_query, c(list(req), query))
  req <- fs$auth(req)
  req <- httr2::req_headers(req, `User-Agent` = USER_AGENT, Accept = "application/json")
  if (length(headers)) req <- do.call(httr2::req_headers, c(list(req), headers))
  if (!is.null(body)) {
    req <- httr2::req_body_raw(req, to_json(body), type = "application/json")
  }
  # No proxy from the environment (as the Python client); the CA and client certificate given.
  options <- list(proxy = "", timeout_ms = as.integer(fs$timeout * 1000))
  if (!is.null(fs$ca_bundle)) options$cainfo <- normalizePath(fs$ca_bundle)
  if (!is.null(fs$cert)) {
    options$sslcert <- normalizePath(fs$cert[[1]])
    options$sslkey <- normalizePath(fs$cert[[2]])
  }
  req <- do.call(httr2::req_options, c(list(req), options))
  req <- httr2::req_error(req, is_error = function(resp) FALSE)
  resp <- tryCatch(httr2::req_perform(req), error = function(e) {
    stop(connection_error(conditionMessage(e), fs$base_url))
  })
  status <- httr2::resp_status(resp)
  bytes <- httr2::resp_body_raw(resp)
  # A raw answer (a PNG, a zip) may hold NUL bytes: read as text only when it is an error body.
  text <- if (length(bytes) && (!raw || !status %in% expected)) rawToChar(bytes) else ""
  parsed <- if (raw) NULL else tryCatch(jsonlite::parse_json(text, simplifyVector = FALSE),
                                        error = function(e) NULL)
  if (!status %in% expected) {
    if (raw) parsed <- tryCatch(jsonlite::parse_json(text), error = function(e) NULL)
    stop(api_error(status, parsed, text))
  }
  list(status = status, body = parsed, bytes = bytes)
}

# Why the coordinator could not be reached, with the fix for an untrusted certificate.
connection_error <- function(message, base_url) {
  message <- gsub("[\r\n]+", " ", message)
  if (grepl("SSL certificate|certificate verify|self.signed|unable to get local issuer",
            message, ignore.case = TRUE)) {
    connection_failed(sprintf(paste0(
      "%s: TLS certificate verify failed (%s); pass the CA that signed the coordinator's ",
      "certificate as ca_bundle (or set SSL_CERT_FILE)"), base_url, message), "tls")
  } else if (grepl("SSL|TLS", message)) {
    connection_failed(sprintf("%s: TLS handshake failed (%s)", base_url, message), "tls")
  } else if (grepl("[Tt]imeout|timed out", message)) {
    connection_failed(sprintf("%s: timed out (%s)", base_url, message), "timeout")
  } else {
    connection_failed(sprintf(paste0("%s: cannot reach the coordinator (%s); is it running, ",
                                     "and is the URL right?"), base_url, message), "unreachable")
  }
}

to_json <- function(x) {
  jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", na = "null", digits = NA)
}

study_path <- function(study_id, ...) {
  parts <- vapply(c(study_id, ...), function(p) utils::URLencode(as.character(p), reserved = TRUE),
                  character(1))
  paste0("/v1/studies/", paste(parts, collapse = "/"))
}
