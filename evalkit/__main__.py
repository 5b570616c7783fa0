"""``python -m evalkit`` = the ``evalkit`` command."""

import sys

from evalkit.cli.main import main

sys.exit(main())
