"""How long a service waits for a request's head and body (the settings' defaults, the server's
and the middleware's), apart from the server so that reading settings imports no web stack."""

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
