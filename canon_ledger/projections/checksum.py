"""A content checksum of a build's tables: equal checksums, equal rows, whatever the build's
tag or the store. Used to prove idempotency and identical rebuilds across stores."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection


def table_checksum(conn: Connection, tables: Any) -> str:
    """``tables`` is a build's table set (``.tag`` and ``.all()``)."""
    digest = hashlib.sha256()
    for table in sorted(tables.all(), key=lambda t: t.name):
        digest.update(table.name.removesuffix(f"_{tables.tag}").encode())
        for row in conn.execute(select(table).order_by(*table.primary_key.columns)).mappings():
            digest.update(json.dumps(dict(row), sort_keys=True, default=str).encode())
    return digest.hexdigest()
