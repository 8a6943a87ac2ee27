"""An embedder metered by the quota ledger, for the vector index.

A projection embeds off the command path, where nobody else reserves the call: this wrapper
reserves each batch call before it is sent and settles it after (``ok``, ``error``, or
``not_sent`` releases it), marks the day exhausted on a daily 429, and lets a refusal
(``QuotaRefused``) stop the catch-up. The vector index then trails the log, and search says so
in its ``embed`` stage while keyword search answers alone.
"""

from __future__ import annotations

from typing import Any

from canon_ledger.application.knowledge.ports import Embedder, ProviderError, ProviderExhausted
from canon_ledger.domain.quota import EMBED


class MeteredEmbedder(Embedder):
    uses_quota = False  # metered here; a query embed through HybridSearch meters the inner embedder

    def __init__(self, inner: Embedder, quota: Any, provider: str, purpose: str = "index") -> None:
        self.inner = inner
        self.quota = quota
        self.provider = provider
        self.purpose = purpose
        self.name = inner.name

    def embed(self, texts: list[str]) -> list[list[float]]:
        call_id = self.quota.reserve(self.provider, EMBED, self.purpose)
        try:
            vectors = self.inner.embed(texts)
        except ProviderError as e:
            self.quota.settle(self.provider, call_id, "error" if e.sent else "not_sent")
            if isinstance(e, ProviderExhausted):
                self.quota.exhaust(self.provider, str(e))
            raise
        except Exception:
            self.quota.settle(self.provider, call_id, "error")
            raise
        self.quota.settle(self.provider, call_id, "ok")
        return vectors
