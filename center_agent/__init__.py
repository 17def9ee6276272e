"""Center agent: the hospital-side service that holds raw data and releases only what is safe.

Layout (FastAPI full-stack template):

* ``core/config.py`` — the one settings class (TOML file + ``FEDSTATS_CENTER_*`` environment);
* ``core/errors.py`` — the center's errors and their codes (the base and the JSON body are
  ``fedstats_service.errors``');
* ``data/`` — CSV, Parquet and SQL sources behind one ``Dataset.population()``;
* ``gate/`` — the release gate every answer leaves through: the release kinds, disclosure
  control, data epochs, the center's keys (``docs/privacy.md``);
* ``db.py``, ``ledger.py`` — the center's database and its privacy ledger;
* ``audit.py`` — the audit trail: who asked what, when, for which study and analyst;
* ``operator.py`` — what the operator runs beside the service (keys, epochs, audit);
* ``main.py`` — the app factory; ``api/`` — dependencies and one router per resource (the
  release routes made from the gate's kinds).
"""
