"""What the tests share, imported as ``tests.helpers.<module>`` (never through ``sys.path``):

* :mod:`~tests.helpers.processes`: real ``python -m center_agent`` / ``python -m coordinator`` /
  ``fedstats`` processes (start, wait for health, always stop) and their environment;
* :mod:`~tests.helpers.config`: the TOML files those processes read;
* :mod:`~tests.helpers.center`: the center's tokens, a small dataset in every source format, a
  peer that signs tables, and a center process over a known CSV;
* :mod:`~tests.helpers.coordinator`: the coordinator's tokens and settings, in-process
  federations, ports that count, keep or alter what centers answer, and independent checks of
  releases against the raw data;
* :mod:`~tests.helpers.attacks`: the checks every attack ends with (no count in 1..K-1, the
  ledger's spend);
* :mod:`~tests.helpers.fuzzing`: schemathesis driven by hand over an OpenAPI schema;
* :mod:`~tests.helpers.faults`: a TCP proxy that kills or delays a center mid-step;
* :mod:`~tests.helpers.tls`: a private CA issuing server and client certificates (mutual TLS),
  and a self-signed certificate for 127.0.0.1;
* :mod:`~tests.helpers.postgres`: where the test PostgreSQL server is (the fixtures are in
  ``tests/conftest.py``);
* references computed independently of the code under test: :mod:`~tests.helpers.kanon`,
  :mod:`~tests.helpers.noisy_reference`, :mod:`~tests.helpers.brute`;
* :mod:`~tests.helpers.ledger_worker`: a separate process hitting a ledger (run as a script);
* :mod:`~tests.helpers.collection`: how many tests the run collected (the README states it).

Tests that start a process are marked ``process`` (``tests/conftest.py`` fails any that is not).
"""
