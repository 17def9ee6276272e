"""HTTP layer: dependencies, middleware, error rendering and one router per resource."""
