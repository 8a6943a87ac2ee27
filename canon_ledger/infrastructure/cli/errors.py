"""The CLI's exit statuses and its one failure type, shared by every module of verbs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

OK, REJECTED, USAGE, UNAVAILABLE = 0, 1, 2, 3
USAGE_CODES = ("invalid_database_url", "position_beyond_log")  # refusals of the invocation itself: exit 2
UNAVAILABLE_CODES = ("store_not_found",)  # no store where the invocation points: exit 3


class Failure(Exception):
    """A verb's failure: exit ``status`` with one line on stderr (and, with ``--format json``,
    an error object on stdout unless the verb ``reported`` its results there already)."""

    def __init__(self, status: int, reason: str, code: str = "failed", *, reported: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.code = code
        self.reported = reported


@contextmanager
def unavailable_provider_as_usage() -> Iterator[None]:
    """A provider that cannot be used (no key, no package, a call that failed) refused as bad
    usage, its message said without the key (``ProviderError``'s never holds it)."""
    from canon_ledger.application.knowledge.ports import ProviderError  # not imported to build the parser

    try:
        yield
    except ProviderError as e:
        raise Failure(USAGE, str(e), "provider_unavailable") from None
