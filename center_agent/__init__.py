"""Center agent: the hospital-side service that holds raw data and releases only what is safe.

Layout (FastAPI full-stack template):

* ``core/config.py`` — the one settings class (TOML file + ``FEDSTATS_CENTER_*`` environment);
* ``core/errors.py`` — the domain error hierarchy, rendered once as ``{"error", "detail"}``;
* ``data/`` — CSV, Parquet and SQL sources behind one ``Dataset.load(variable, group)``;
* ``db.py``, ``ledger.py``, ``auditor.py`` — the privacy ledger and the differencing auditor;
* ``main.py`` — the app factory; ``api/`` — dependencies, middleware and one router per resource.
"""
