"""``python -m canon_ledger.infrastructure.cli``: the ``canon`` command."""

import sys

from canon_ledger.infrastructure.cli import main

sys.exit(main())
