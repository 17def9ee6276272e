from tests.coordinator.conftest import federation as federation  # the in-process centers
