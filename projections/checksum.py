"""A content checksum of read-model tables: equal checksums, equal rows (order-independent of
how they were written). Used to prove idempotency and identical rebuilds across stores."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from sqlalchemy import Table, select
from sqlalchemy.engine import Connection


def table_checksum(conn: Connection, tables: Iterable[Table]) -> str:
    digest = hashlib.sha256()
    for table in sorted(tables, key=lambda t: t.name.rsplit("_v", 1)[0]):
        # Versioned names differ between versions; compare contents, not names.
        digest.update(table.name.rsplit("_v", 1)[0].encode())
        keys = list(table.primary_key.columns)
        for row in conn.execute(select(table).order_by(*keys)).mappings():
            digest.update(json.dumps(dict(row), sort_keys=True, default=str).encode())
    return digest.hexdigest()
