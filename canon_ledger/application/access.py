"""What a key may do, for every door that serves callers by key: the HTTP API's routes, the MCP
tools and the viewer's pages authenticate a caller into a ``Principal`` and then call here, so
each rule has one home and every door answers it the same way.

- Scope: ``require`` (``Forbidden``, 403 at the HTTP door).
- Stories: a story a key may not see is answered exactly as one never started (``visible``,
  ``unknown_story``: ``NotFound``, 404), and so are its packets (``issued_record``) and its
  collection (``may_read``).
- Commands: ``apply_for`` applies what the key may issue; a command it may not (``refusal``)
  is ``rejected`` in its place, as a rule's refusal would be.
- Reads: ``story_views`` and ``search_collection`` read through the door's ``Served`` hold
  on the store, after the checks (the spoiler rule itself is ``canon_reads``).

Every refusal is a ``CanonError`` (its status at the HTTP door: ``http.problems.status_of``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from canon_ledger.application import canon_reads
from canon_ledger.application.ports import StoryReads
from canon_ledger.application.results import CommandResult
from canon_ledger.application.retrieval.earlier_chapters import EarlierChapters
from canon_ledger.domain.api_key import Principal
from canon_ledger.domain.bounds import MAX_ID
from canon_ledger.domain.chunking import collection_story
from canon_ledger.domain.errors import CanonError, Forbidden, InvalidCommand, NotFound, unknown_series, unknown_story

if TYPE_CHECKING:
    from canon_ledger.application.ledger import CanonLedger, CommandOrError
    from canon_ledger.application.retrieval.search import SearchResult, SearchService
    from canon_ledger.domain.commands import Command
    from canon_ledger.domain.packet_log import PacketRecord

SCAN_LIMIT = 10_000  # log entries one page of the log may pass over looking for ones its reader may see

P = ParamSpec("P")
T = TypeVar("T")
Views = TypeVar("Views", bound=StoryReads, covariant=True)


class StoreReads(Protocol[Views]):
    """The read side a door serves from (``infrastructure.services.Services``)."""

    def views(self, after: int | None = None) -> Views: ...

    def collections(self) -> set[str]: ...


class Served(Protocol[Views]):
    """A door's hold on the store (``infrastructure.http.context.ServerContext``): its read
    side, its search service, and ``reading``, which runs one read once the door's bound on
    concurrent readers lets it (it blocks: call it in a worker thread)."""

    @property
    def services(self) -> StoreReads[Views]: ...

    @property
    def search(self) -> SearchService: ...

    def reading(self, read: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T: ...


# -- scope and stories -----------------------------------------------------------------------------

def require(principal: Principal, scope: str, *, every_story: bool = False) -> Principal:
    """``principal``, if it is of ``scope`` or above (and, with ``every_story``, not limited to
    stories); else ``Forbidden``."""
    if not principal.has(scope):
        raise Forbidden("forbidden", f"this needs a key of scope {scope} or above; this key is {principal.scope}")
    if every_story and not principal.unrestricted:
        raise Forbidden("forbidden", "this concerns every story: a key limited to stories may not use it")
    return principal


def visible(principal: Principal, story_id: str) -> None:
    """A story this key may not see is refused as one that does not exist (``unknown_story``)."""
    if not principal.sees(story_id):
        raise unknown_story(story_id)


def no_documents(collection: str) -> NotFound:
    return NotFound("unknown_collection", f"no documents in collection {collection!r}", "collection")


def may_read(principal: Principal, collection: str) -> None:
    """Another story's collection is refused as one that holds nothing (``no_documents``); a
    shared collection (any name but ``story:<id>``) every key may read."""
    if not principal.sees_collection(collection):
        raise no_documents(collection)


def issued_record(ledger: CanonLedger, principal: Principal, packet_id: str) -> PacketRecord:
    """The packet's record in the log; ``unknown_packet`` for none, for one of a story this key
    may not see, and for an id too long to be one."""
    record = ledger.packet_records.get(packet_id) if len(packet_id) <= MAX_ID else None
    if record is None or not principal.sees(record.story_id):
        raise NotFound("unknown_packet", f"no packet {packet_id[:MAX_ID]!r} was recorded (one a worker key asked "
                                         "past its recording budget is answered, not recorded)", "packet_id")
    return record


# -- commands --------------------------------------------------------------------------------------

def refusal(command: Command, principal: Principal) -> CanonError | None:
    """Why this key may not issue ``command``, if it may not: a story it may not see is refused
    as the ledger refuses a story never started; a story key may not change shared collections."""
    story = getattr(command, "story_id", None)
    if story is not None and not principal.sees(story):
        return unknown_story(story)
    series = getattr(command, "series_id", None)  # add_book: the series changes too
    if series is not None and not principal.sees(series):
        return unknown_series(series)
    collection = getattr(command, "collection_id", None)
    if story is None and not principal.unrestricted and not (
            collection and collection.startswith("story:") and principal.sees(collection[len("story:"):])):
        return Forbidden("forbidden", "a key limited to stories changes only its stories' collections (story:<id>), "
                                      "never a shared collection or another story's", "collection_id")
    return None


def apply_for(ledger: CanonLedger, items: Sequence[CommandOrError], principal: Principal, *,
              atomic: bool) -> list[CommandResult]:
    """Apply what this key may apply (``items`` as ``command_reader`` reads them). A batch with
    an unreadable command applies nothing (that item ``rejected``, every other ``not_applied``);
    a command the key may not issue is ``rejected`` in its place as a rule's refusal would be
    (and with ``atomic``, rolls the batch back)."""
    commands = [item for item in items if not isinstance(item, CanonError)]
    if len(commands) < len(items):
        return [CommandResult(n, "rejected", error=item) if isinstance(item, CanonError)
                else CommandResult(n, "not_applied", item.command_id, item.type) for n, item in enumerate(items, start=1)]
    refused = {n: e for n, command in enumerate(commands, start=1) if (e := refusal(command, principal)) is not None}
    results = ledger.apply([refused.get(n, command) for n, command in enumerate(commands, start=1)], atomic=atomic)
    return [CommandResult(r.index, r.status, commands[r.index - 1].command_id, commands[r.index - 1].type, r.position,
                          r.error) if r.index in refused else r for r in results]


# -- reads -----------------------------------------------------------------------------------------

def story_views(served: Served[Views], principal: Principal, story: str, after: int | None) -> Views:
    """The views, reflecting ``after``, once ``story`` is known to exist and be visible to this
    key (else ``unknown_story``, before anything is read)."""
    visible(principal, story)
    views = served.reading(served.services.views, after)
    if views.story_head(story) is None:
        raise unknown_story(story)
    return views


def search_collection(served: Served[Views], principal: Principal, collection: str, query: str, top: int,
                      feedback: str | None = None, field: str = "q", as_of: int | None = None) -> SearchResult:
    """The search's result, once the collection is known to hold documents and be visible to
    this key (else ``unknown_collection``) and the query is not blank (else ``invalid_field``,
    naming ``field``). A story's collection is searched only up to the chapter
    ``canon_reads.search_through`` allows this key (filtered in the indexes, before ranking).
    Blocks: call it in a worker thread."""
    may_read(principal, collection)
    if not query.strip():
        raise InvalidCommand("invalid_field", "the query is empty", field)

    def run() -> SearchResult:
        if collection not in served.services.collections():
            raise no_documents(collection)
        through = None  # a story's collection only: no other reads the story views
        if collection_story(collection) is not None:
            through = canon_reads.search_through(principal, served.services.views(), collection, as_of)
        if through is None:
            return served.search.search([collection], query, top, feedback=feedback)
        before = through + 1
        return served.search.search([collection], query, top, feedback=feedback,
                                    within=lambda snap: EarlierChapters(snap, before))

    return served.reading(run)
