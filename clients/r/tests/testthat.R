# R CMD check's entry point; tests/client/test_client_r.py runs the same directory with the
# coordinator's URL and token in the environment.
library(testthat)
library(fedstats)
test_check("fedstats")
