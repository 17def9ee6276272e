"""Where the tests' PostgreSQL server is: 127.0.0.1:5432, database ``test``, trust auth, user
``postgres`` or ``root``. The fixtures (``pg_base_url``, ``pg_url``) are in
``tests/conftest.py``; without a server the PostgreSQL tests are skipped."""

from __future__ import annotations

import sqlalchemy as sa

USERS = ("postgres", "root")
UNREACHABLE = ("PostgreSQL not reachable at 127.0.0.1:5432 (database 'test', user postgres or "
               "root, trust auth); PostgreSQL tests skipped")


def base_url() -> str | None:
    """The URL of the first user the server lets in, or None when there is no server."""
    for user in USERS:
        url = f"postgresql+psycopg://{user}@127.0.0.1:5432/test"
        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("select 1"))
            return url
        except Exception:
            continue
        finally:
            engine.dispose()
    return None
