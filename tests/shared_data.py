"""Where the tests find their real sample files.

War and Peace is committed (public domain, ``tests/fixtures``). The lorebook samples are test
data only and may not be copied into the project (their README): they are read from the
team's shared data folder, ``$CANON_SHARED_DATA`` if set, else ``../shared/data`` beside the
checkout, else ``/work/shared/data`` (a checkout cloned elsewhere on this machine kind).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAR_AND_PEACE = ROOT / "tests" / "fixtures" / "war_and_peace.txt"
MOBY_DICK = ROOT / "tests" / "fixtures" / "moby_dick.txt.gz"  # CRLF, a BOM, an `Epilogue`, a wrapped `BOOK I. ...`
PRIDE_AND_PREJUDICE = ROOT / "tests" / "fixtures" / "pride_and_prejudice.txt.gz"


def read_book(path: Path) -> str:
    """A committed book's text as a user's file gives it (a ``.gz`` one decompressed; a BOM dropped)."""
    import gzip

    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8-sig")


def _shared() -> Path:
    for candidate in (os.environ.get("CANON_SHARED_DATA"), ROOT.parent / "shared" / "data", "/work/shared/data"):
        if candidate and Path(candidate, "lorebooks").is_dir():
            return Path(candidate)
    raise FileNotFoundError("the shared sample data (lorebooks/) is not at $CANON_SHARED_DATA, "
                            f"{ROOT.parent / 'shared' / 'data'} or /work/shared/data")


LOREBOOKS = _shared() / "lorebooks"
