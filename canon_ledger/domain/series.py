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

from typing import Any, Literal
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

    def earlier(self, story_id: str) -> list[str]:
        """The books before ``story_id`` in reading order (all of them for one not in the series)."""
        return self.books[:self.books.index(story_id)] if story_id in self.books else list(self.books)


def canon_homes(story_id: str, series: Series | None) -> list[str]:
    """Where ``story_id``'s canon is looked up, in precedence order: the story itself, then its
    series' bible, then the earlier books, the latest first. The story alone outside a series
    and for a bible."""
    if series is None or story_id == series.series_id:
        return [story_id]
    return [story_id, series.series_id, *reversed(series.earlier(story_id))]


def bible_reveal(hidden_until: int | None, book: int, reader: int) -> int | None | Literal[False]:
    """A series bible step's spoiler rule, as a book sees it: ``hidden_until`` counts in the
    ``book`` (a reading-order place; the first unless ``fields.hidden_until_book`` names
    another) and ``reader`` is the place of the book reading it. False: not seen at all (its
    book comes later); else the chapter of the reader it stays hidden until (None: shown)."""
    if hidden_until is None or book < reader:
        return None
    if book > reader:
        return False
    return hidden_until


def homes_of(story_id: str, joined: dict[str, tuple[str, str, int]]) -> list[str]:
    """``canon_homes`` read from the stories' ``Story.JoinedSeries`` facts (story -> (series,
    role, ordinal)), as a replay of the log up to a position knows them."""
    mine = joined.get(story_id)
    if mine is None or mine[1] == BIBLE:
        return [story_id]
    series, _, ordinal = mine
    earlier = sorted((o, s) for s, (of, role, o) in joined.items() if of == series and role == BOOK and o < ordinal)
    return [story_id, series, *(s for _, s in reversed(earlier))]
