"""Telling a fault of the store itself from a bug, and saying it without leaking secrets.

The store failed (unreachable, locked past the timeout, read-only, not a database,
truncated): the CLI exits 3 and the server answers 503, each with one line. An SQL error on a
healthy store is a bug, and is not a store fault.
"""

from __future__ import annotations

import sqlite3

from eventsourcing.persistence import PersistenceError
from sqlalchemy.exc import DatabaseError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from infrastructure.stores import password_of, resolve_url


def is_store_fault(error: BaseException) -> bool:
    if isinstance(error, (PersistenceError, OperationalError, InterfaceError, PoolTimeout)):
        return True
    # "file is not a database", "database disk image is malformed": the base class exactly
    # (its subclasses, such as an integrity error, are not faults of the store).
    return type(error) in (DatabaseError, sqlite3.DatabaseError) or type(getattr(error, "orig", None)) is sqlite3.DatabaseError


def first_line(error: BaseException) -> str:
    """The driver's own message, first line only: never the SQL or its parameters."""
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


def scrubbed(error: BaseException, url: str | None) -> str:
    """``first_line`` with the store's password, if the URL has one, masked."""
    message = first_line(error)
    password = password_of(resolve_url(url))
    return message.replace(password, "***") if password else message
