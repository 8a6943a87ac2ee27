"""The committed event-log fixtures (``tests/fixtures/*-events.jsonl``, described in its
README): rows as an older release's store wrote them, loaded into a store as they are."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_rows(name: str) -> list[dict[str, Any]]:
    """The rows of ``tests/fixtures/<name>``: position, originator, version, topic, state (base64)."""
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def insert_rows(ledger: Any, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` into ``ledger``'s store byte for byte, as the release that made them did."""
    ledger.recorder.insert_events([
        StoredEvent(originator_id=UUID(r["originator_id"]), originator_version=r["originator_version"],
                    topic=r["topic"], state=base64.b64decode(r["state"])) for r in rows])


def load_fixture(ledger: Any, name: str) -> list[dict[str, Any]]:
    """Load the whole fixture ``name`` into an empty store; its rows, once the log ends where they do."""
    rows = fixture_rows(name)
    insert_rows(ledger, rows)
    assert ledger.event_log.position() == rows[-1]["position"]
    return rows
