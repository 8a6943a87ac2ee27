"""What the CLI's verbs print beside their own lines: one JSON object per line on stdout
(``--format json``), and the bar of a read's own catch-up on a terminal."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from canon_ledger.infrastructure.jsonout import dumps


def emit(obj: Any) -> None:
    """One line of strict JSON (never NaN or Infinity) on stdout."""
    sys.stdout.write(dumps(obj) + "\n")


def catch_up_watch(args: argparse.Namespace) -> Any:
    """What a read's own catch-up of the indexes costs (``indexing.CatchUpWatch``): a bar on a terminal."""
    from canon_ledger.infrastructure.indexing import CatchUpWatch
    from canon_ledger.infrastructure.progress import quiet

    return CatchUpWatch(shown=not quiet(args.format))
