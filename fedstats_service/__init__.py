"""Plumbing both services share: the error base and its rendering, the request size limit,
bearer-token checks and the settings loader.

Not the statistical core (that is ``shared/``, which holds no I/O, config or HTTP): this is the
service side that ``center_agent`` and ``coordinator`` would otherwise each copy.
"""
