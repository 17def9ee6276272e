"""``python -m fedstats_cli`` is the ``fedstats`` command."""

import sys

from fedstats_cli.cli import main

sys.exit(main())
