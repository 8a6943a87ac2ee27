"""Series: books that share canon.

A series is named by its bible: the story that holds the canon every book shares (world rules,
characters who span books), started with the series by ``start_series`` and written to with
the ordinary canon commands. Books join it in reading order (``add_book``); a story joins one
series at most, as a book or as its bible, and a bible is never a book (of its own series: a
cycle; of another: a series is not nested).

What a book sees (``canon_homes``, the read side's ``application.packets.inherited``): for each
(kind, key), its own canon in force at the chapter if it has one, else the bible's, else the
canon in force at the end of the latest earlier book that has it.

Events -> evolve -> decide, as ``Story``: ``Series.Started`` and ``Series.BookAdded`` here, and
``Story.JoinedSeries`` on the story that joins, in the same save.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.errors import RuleViolated

MAX_BOOKS = 1_000  # books in one series

BIBLE = "bible"  # Story.JoinedSeries.role of a series' bible
BOOK = "book"  # ... and of its books


class Series(Aggregate):
    class Started(Aggregate.Created):
        series_id: str  # the bible's story id
        title: str

    class BookAdded(Aggregate.Event):
        series_id: str
        story_id: str
        ordinal: int  # 1 for the first book, in reading order

    @staticmethod
    def create_id(series_id: str, **_: Any) -> UUID:
        return ids.series_id(series_id)

    @event(Started)
    def __init__(self, series_id: str, title: str) -> None:
        self.series_id = series_id
        self.title = title
        self.books: list[str] = []

    def add_book(self, story_id: str) -> int:
        """Append ``story_id`` to the reading order; its ordinal (1 for the first book)."""
        self.require_addable(story_id)
        self._add_book(series_id=self.series_id, story_id=story_id, ordinal=len(self.books) + 1)
        return len(self.books)

    def require_addable(self, story_id: str) -> None:
        """Refuse ``story_id`` as a new book of this series, by the rule it breaks."""
        if story_id == self.series_id:
            raise RuleViolated("series_must_not_contain_its_bible",
                               f"story {story_id!r} is the bible of series {self.series_id!r}: a book of its own "
                               "series would inherit from itself", "story_id")
        if len(self.books) >= MAX_BOOKS:
            raise RuleViolated("series_book_limit", f"series {self.series_id!r} holds {MAX_BOOKS:,} books, the most "
                               "one series may hold", "series_id")

    @event(BookAdded)
    def _add_book(self, series_id: str, story_id: str, ordinal: int) -> None:
        self.books.append(story_id)



Member = TypeVar("Member")


def inherits_from(story_id: str, members: Iterable[Member],
                  place: Callable[[Member], tuple[str, str, int]]) -> list[Member] | None:
    """The one precedence rule: of a series' ``members`` (``place`` gives each one's story id,
    role and ordinal), those the book ``story_id`` inherits from, in precedence order: the
    bible, then the earlier books, the latest first. None when ``story_id`` is not a book
    among them (outside a series, or a bible: its own canon only)."""
    members = list(members)
    mine = next((place(m)[2] for m in members if place(m)[:2] == (story_id, BOOK)), None)
    if mine is None:
        return None
    bible = [m for m in members if place(m)[1] == BIBLE]
    earlier = sorted((m for m in members if place(m)[1] == BOOK and place(m)[2] < mine), key=lambda m: -place(m)[2])
    return [*bible, *earlier]


def canon_homes(story_id: str, series: Series | None) -> list[str]:
    """Where ``story_id``'s canon is looked up, in precedence order (``inherits_from``): the
    story itself, then its series' bible, then the earlier books, the latest first."""
    members = [] if series is None else [(series.series_id, BIBLE, 0),
                                         *((b, BOOK, n) for n, b in enumerate(series.books, start=1))]
    return [story_id, *(m[0] for m in inherits_from(story_id, members, lambda m: m) or [])]


def homes_of(story_id: str, joined: dict[str, tuple[str, str, int]]) -> list[str]:
    """``canon_homes`` read from the stories' ``Story.JoinedSeries`` facts (story -> (series,
    role, ordinal)), as a replay of the log up to a position knows them."""
    series = joined.get(story_id, (None,))[0]
    members = [(s, role, n) for s, (of, role, n) in joined.items() if of == series]
    return [story_id, *(m[0] for m in inherits_from(story_id, members, lambda m: m) or [])]


def bible_reveal(hidden_until: int | None, hidden_book: str | None, books: Mapping[str, int],
                 reader: int) -> int | None | Literal[False]:
    """A series bible step's spoiler rule, as the book at reading-order place ``reader`` sees
    it: ``hidden_until`` counts in the book ``hidden_book`` names (``fields.hidden_until_book``;
    absent or not a book of ``books``, story id -> place: the first). False: not seen at all
    (its book comes later); else the chapter of the reader it stays hidden until (None: shown)."""
    if hidden_until is None:
        return None
    book = books.get(hidden_book or "", min(books.values(), default=reader))
    if book < reader:
        return None
    if book > reader:
        return False
    return hidden_until
