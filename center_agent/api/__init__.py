"""HTTP layer: dependencies and one router per resource (the guards and the rendering of
errors are ``fedstats_service``'s, installed by its app factory)."""
