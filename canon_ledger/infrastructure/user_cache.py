"""Files built once per install and machine, so that a process starts cheaply.

Two things live here: the tokenizer's rank table (``tokenizer.py``: parsed once instead of in
every process) and the embedding model's optimized ONNX graph (``providers/minilm.py``: built
once instead of on every session). Neither is canon, an event or a read model: each file is
derived from installed package files only, named by a key over what it was derived from (so a
new package version or model gets a new file), and any of them may be deleted at any time; a
missing, unreadable or damaged one is built again, and a cache directory that cannot be written
only means each process builds its own (as before).

Where: ``$CANON_CACHE_DIR`` if set (empty or ``off``: no cache), else
``$XDG_CACHE_HOME/canon-ledger``, else ``~/.cache/canon-ledger``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

CACHE_ENV = "CANON_CACHE_DIR"


def cache_dir() -> Path | None:
    """The cache directory (not created here), or None when caching is off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        chosen = chosen.strip()
        return Path(chosen).expanduser() if chosen and chosen.lower() != "off" else None
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if base:
        return Path(base) / "canon-ledger"
    try:
        return Path.home() / ".cache" / "canon-ledger"
    except (RuntimeError, KeyError):  # no home directory to be found: no cache
        return None


def key(*parts: object) -> str:
    """A short name for what a cached file was derived from."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


def stamp(path: Path) -> tuple[str, int, int]:
    """What identifies an installed file cheaply: its path, size and modification time."""
    st = path.stat()
    return str(path), st.st_size, st.st_mtime_ns


def cached_path(folder: str, name: str) -> Path | None:
    """Where ``folder/name`` lives in the cache, or None when caching is off."""
    root = cache_dir()
    return None if root is None else root / folder / name


@contextlib.contextmanager
def writing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` to write; it replaces ``target`` atomically when the
    block ends without an error (readers never see half a file), else it is removed. Raises
    OSError when the folder cannot be made or written: callers treat that as "no cache"."""
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
