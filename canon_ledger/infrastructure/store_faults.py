"""Telling a fault of the store itself from a bug, and saying it without leaking secrets.

The store failed (unreachable, locked past the timeout, read-only, not a database,
truncated): the CLI exits 3 and the server answers 503, each with one line. An SQL error on a
healthy store is a bug, and is not a store fault.
"""

from __future__ import annotations

import sqlite3
import sys

from eventsourcing.persistence import PersistenceError

from canon_ledger.infrastructure.stores import resolve_url, secrets_of


def is_store_fault(error: BaseException) -> bool:
    # SQLAlchemy's errors count only once it is imported: a verb that never imported it (apply,
    # events) cannot have raised one, and does not pay ~0.1 s to import it for this check.
    sa = sys.modules.get("sqlalchemy.exc")
    faults: tuple[type[BaseException], ...] = (PersistenceError,)
    bases: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,)
    if sa is not None:
        faults += (sa.OperationalError, sa.InterfaceError, sa.TimeoutError)
        bases += (sa.DatabaseError,)
    if isinstance(error, faults):
        return True
    # "file is not a database", "database disk image is malformed": the base class exactly
    # (its subclasses, such as an integrity error, are not faults of the store).
    return type(error) in bases or type(getattr(error, "orig", None)) is sqlite3.DatabaseError


def first_line(error: BaseException) -> str:
    """The driver's own message, first line only: never the SQL or its parameters."""
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


def scrubbed(error: BaseException, url: str | None) -> str:
    """``first_line`` with the store's password and secret parameters (``sslpassword``), if
    the URL has them, masked."""
    message = first_line(error)
    for secret in sorted(secrets_of(resolve_url(url)), key=len, reverse=True):
        message = message.replace(secret, "***")
    return message
