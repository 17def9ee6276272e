"""The ``fedstats`` command: serve a center or the coordinator, run study files, the demo.

The services live in ``center_agent`` and ``coordinator``; this package only starts them, talks
to the coordinator's analyst API over HTTP and renders what it answers. It never computes a
release itself.
"""

from fedstats_cli.cli import main

__all__ = ["main"]
