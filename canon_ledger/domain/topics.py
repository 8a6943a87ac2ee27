"""Event topics across the package rename.

Before every module lived under ``canon_ledger``, the event store recorded topics such as
``domain.story:Story.Started``. Two rules keep those stores reading:

- ``register_legacy_packages`` registers each old top-level name with the library's topic
  registry (``eventsourcing.utils.register_topic``), so an old topic resolves to the class that
  now lives under ``canon_ledger``. ``canon_ledger/__init__.py`` calls it on first import.
- ``stored_topics`` is the one way to name event types in a log query: it gives both the topic
  new events are written under and the one older stores hold, so a read filtered by topic sees
  every event of the type whichever version wrote it.
"""

from __future__ import annotations

import importlib

from eventsourcing.utils import get_topic, register_topic

PACKAGE = "canon_ledger"
LEGACY_PACKAGES = ("domain", "application", "projections", "infrastructure")


def register_legacy_packages() -> None:
    """Map each old top-level package name to its module under ``canon_ledger`` (idempotent)."""
    for name in LEGACY_PACKAGES:
        register_topic(name, importlib.import_module(f"{PACKAGE}.{name}"))


def legacy_topic(topic: str) -> str | None:
    """The topic an event type had before the rename (None for a type that never had another)."""
    prefix = PACKAGE + "."
    if topic.startswith(prefix) and topic[len(prefix):].split(".", 1)[0].split(":", 1)[0] in LEGACY_PACKAGES:
        return topic[len(prefix):]
    return None


def stored_topics(*classes: type) -> list[str]:
    """Every topic under which events of ``classes`` may be stored: current first, then legacy."""
    topics = [get_topic(c) for c in classes]
    return topics + [old for t in topics if (old := legacy_topic(t)) is not None]
