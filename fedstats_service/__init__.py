"""Plumbing both services share, so that ``center_agent`` and ``coordinator`` copy none of it:

* ``settings.py`` — ``ServiceSettings``, the base of both settings classes (a TOML file under
  environment overrides; host, port and connection limits; the callers' bearer tokens);
* ``errors.py`` — the error base ``ServiceError`` and ``error_body``, the one JSON shape of
  every error answer; ``handlers.py`` renders every error in it;
* ``middleware.py`` — the bearer gate (before a body is read) and the body's size and time;
* ``auth.py`` — constant-time token checks and the routes' bearer dependency;
* ``db.py`` — a service's own database: the engine (SQLite pragmas, PostgreSQL pool) and tables;
* ``app.py`` — the app factory around a service's router (handlers, guards, lifespan);
* ``serving.py`` — uvicorn with the connection limits; ``entry.py`` — ``python -m <service>``.

Not the statistical core (that is ``shared/``, which holds no I/O, config or HTTP).
"""
