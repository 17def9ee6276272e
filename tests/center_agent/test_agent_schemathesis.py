"""Property-based API test: no request the OpenAPI schema allows makes the center answer 500.

Schemathesis generates bodies, paths and parameters for every operation of the center's schema
(dev mode serves it) and sends them, with a valid token, through the ASGI app. Marked ``slow``
(13 s measured under load); schemathesis is imported by the fixture, not at collection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from center_agent.core.config import load_settings
from center_agent.main import create_app
from tests.helpers.center import AUTH
from tests.helpers.config import write_toml
from tests.helpers.fuzzing import aim_center, never_a_server_error, operations

pytestmark = pytest.mark.slow


@pytest.fixture
def center_schema(tmp_path: Path, base_config: dict[str, Any]) -> Any:
    import schemathesis

    config = {**base_config, "dev_mode": True}
    config["datasets"]["cohort"]["epsilon_total"] = 1e6  # room for every generated DP request
    app = create_app(load_settings(write_toml(tmp_path / "dev.toml", config)))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_no_request_makes_a_server_error(center_schema: Any) -> None:
    # Random names only meet 404s; half the cases are aimed at the real dataset so the generated
    # numbers (ε, bounds, levels, limits, grids) reach the statistics.
    found = operations(center_schema)
    assert len(found) >= 10
    never_a_server_error(found, AUTH, aim_center, max_examples=40)
