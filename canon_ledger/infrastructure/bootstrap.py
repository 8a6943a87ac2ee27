"""The composition root: every door opens a store here, from its URL.

- ``bootstrap``: every service at once, for what reads the store: ``wiring.wire`` builds the
  parts (``Wiring``: the ledger, its read models, the packet service, the auditor, the
  readers), ``services.Services.of`` puts the use cases the doors call over them.
- ``open_store``: the ledger alone (``Store``), for what only appends to the log or reads it
  (``canon apply``, ``canon events``, ``canon key``); the rest is wired around the same ledger
  the first time it is asked for (``Store.services``).

Both open the ledger one way (``stores.ledger_of``, under the store's schema lock). Importing
this module loads no read model, SQL toolkit or embedder: ``wiring`` and ``services`` are
imported by the first call that wires the read side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.infrastructure.stores import StoreConfig, ledger_of, resolve_url, schema_lock, store_config

if TYPE_CHECKING:
    from canon_ledger.application.knowledge.ports import Embedder
    from canon_ledger.application.knowledge.quota import QuotaPolicy
    from canon_ledger.infrastructure.services import Services


def bootstrap(url: str | None = None, *, page_size: int | None = None, quota_policy: QuotaPolicy | None = None,
              embedder: str | Embedder | None = None, indexed_by_worker: bool = False) -> Services:
    """Every service of the store at ``url`` (default ``$CANON_DATABASE_URL`` or
    ``sqlite:///canon.db``), its tables created if new. ``embedder``: a name for
    ``wiring.choose_embedder`` or an embedder object (default: $CANON_EMBEDDER, else auto).
    ``indexed_by_worker``: a worker keeps the knowledge, keyword and vector models current
    (``Services.indexed_by_worker``)."""
    from canon_ledger.infrastructure.services import Services
    from canon_ledger.infrastructure.wiring import chosen_embedder, wire

    config = store_config(resolve_url(url))
    found, note = chosen_embedder(embedder)  # a name it does not know is refused before the store is touched
    return Services.of(wire(config, found, note, page_size=page_size, quota_policy=quota_policy),
                       indexed_by_worker=indexed_by_worker)


@dataclass
class Store:
    """A store as ``open_store`` opened it: its ``config`` and ``ledger`` now; its other
    services, wired around the same ledger, on the first call of ``services``. ``close``
    closes whatever was opened."""

    config: StoreConfig
    ledger: CanonLedger
    _services: Services | None = None

    def services(self) -> Services:
        """Every service of this store (as ``bootstrap`` wires them, with the default
        embedder), wired the first time it is asked for."""
        if self._services is None:
            from canon_ledger.infrastructure.services import Services
            from canon_ledger.infrastructure.wiring import chosen_embedder, wire

            found, note = chosen_embedder(None)
            self._services = Services.of(wire(self.config, found, note, ledger=self.ledger))
        return self._services

    def close(self) -> None:
        if self._services is not None:
            self._services.close()  # the ledger with the rest
        else:
            self.ledger.close()


def open_store(url: str | None = None) -> Store:
    """The store at ``url`` (as ``bootstrap``'s), with its ledger open and nothing else yet."""
    config = store_config(resolve_url(url))
    with schema_lock(config):
        return Store(config, ledger_of(config))
