"""Canon a book inherits from its series (``domain.series``), read through one snapshot.

``inherited(snap, story)`` is the snapshot a book's packet, check and view read: for each
(kind, key), the book's own canon in force at the chapter if it has one, else its series
bible's, else the canon in force at the end of the latest earlier book that has it (a
character who died in book 1 is dead in book 2). Every other read (chapters, scenes,
summaries, recent timeline) is the book's own.

The rules, each in one place here:
- Precedence: the homes in ``series.inherits_from`` order; the first with a step in force wins the
  (kind, key) (``_merged``). The bible and earlier books are read as they stand at their end
  (``END``: every step still in force), as of the snapshot's log position.
- Spoilers: an earlier book's ``hidden_until`` is resolved by its end (shown). A bible step's
  ``hidden_until`` counts in the book its ``fields.hidden_until_book`` names (default: the
  first book): before that book the step is not seen at all, in it the chapter hides it as a
  book's own would, after it it is shown.
- Where it comes from: an inherited entry's ``origin`` says so ("from the series bible ...",
  "from book 1 ..., as of its last chapter"); its sources are the other story's log positions.
- Steps: an inherited step's number is shifted by its home's place (``SPAN``), so a step of
  one home is never taken for the same-numbered step of another (lore rules, mentions).
- Position: the book's ``StoryView.position`` is the latest of its homes', so a packet moves
  when inherited canon does and its audit replays every home up to it.

A story outside a series, or a bible, reads its snapshot unchanged (``inherited`` returns it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from canon_ledger.application.packets.ports import (Call, CanonSnapshot, ChapterView, EntryView, Fact, Home,
                                                    Known, Lore, Mention, Mentions, NodeView, SceneView, StoryView)
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.domain.canon_rules import active
from canon_ledger.domain.continuity import Step
from canon_ledger.domain.series import BIBLE, bible_reveal, inherits_from

T = TypeVar("T")
END = MAX_CHAPTER  # a bible's and an earlier book's canon is read as in force at their end
SPAN = 1 << 32  # an inherited step's number: its own + SPAN x its home's place in precedence order


def inherited(snap: CanonSnapshot, story: StoryView) -> CanonSnapshot:
    """``snap`` as ``story`` sees it: with what it inherits when it is a book of a series."""
    if story.series is None or story.series_role == BIBLE:
        return snap
    members = snap.series_homes(story.series)
    homes = inherits_from(story.story_id, members, _place)
    if homes is None:  # the read model is between two saves of the series: read it as it stands
        return snap
    return InheritedCanon(snap, story, members, homes)


def _place(home: Home) -> tuple[str, str, int]:
    return home.story_id, home.role, home.ordinal


def homes_of(snap: CanonSnapshot) -> tuple[str, ...]:
    """The stories a snapshot ``inherited`` made reads inherited canon from (none for another)."""
    return tuple(at.home.story_id for at in snap.homes) if isinstance(snap, InheritedCanon) else ()


def story_view(snap: CanonSnapshot, story_id: str) -> StoryView | None:
    """The story as its packets see it: a book's ``position`` is the latest of its homes'."""
    story = snap.story(story_id)
    if story is None or story.series is None:
        return story
    return inherited(snap, story).story(story_id)


@dataclass(frozen=True)
class _Place:
    """A home other than the book itself: where, its place in precedence order, and what an
    entry inherited from it says."""

    home: Home
    place: int
    origin: str


def _origin(home: Home) -> str:
    if home.role == BIBLE:
        return f'from the series bible "{home.title}" ({home.story_id})'
    return f'from book {home.ordinal}, "{home.title}" ({home.story_id}), as of its last chapter'


class InheritedCanon:
    """The ``CanonSnapshot`` of a book of a series (see the module's rules). Reads of another
    story than the book go to the snapshot unchanged."""

    def __init__(self, snap: CanonSnapshot, story: StoryView, members: list[Home], homes: list[Home]) -> None:
        """``members``: the series' bible and books; ``homes``: those the book inherits from,
        in precedence order (``series.inherits_from``)."""
        self.snap = snap
        self.own = story.story_id
        self.books = {h.story_id: h.ordinal for h in members if h.role != BIBLE}  # story -> place in reading order
        self.reader = self.books[self.own]
        self.homes = [_Place(h, n, _origin(h)) for n, h in enumerate(homes, start=1)]
        self.position = snap.position
        self._own_position = story.position  # the book's own last change
        # What every answer about the homes depends on: each one's last change, and the books' places.
        self._signature = (tuple(sorted(self.books.items())), *((h.story_id, h.position) for h in homes))
        self._story = replace(story, position=max([story.position, *(h.position for h in homes)]))

    # -- reads that are the book's own ----------------------------------------------------------
    def settled(self, key: tuple[Any, ...], read: Callable[[], T]) -> T:
        return self.snap.settled(key, read)

    def prefetch(self, calls: Sequence[Call[Any]]) -> None:
        self.snap.prefetch(calls)

    def story(self, story_id: str) -> StoryView | None:
        return self._story if story_id == self.own else self.snap.story(story_id)

    def chapter(self, story_id: str, number: int) -> ChapterView | None:
        return self.snap.chapter(story_id, number)

    def scenes(self, story_id: str, chapter: int) -> list[SceneView]:
        return self.snap.scenes(story_id, chapter)

    def entries_since(self, story_id: str, chapter: int, kind: str, since: int) -> list[EntryView]:
        """Recency is a book's own: another book's chapters are not this one's."""
        return self.snap.entries_since(story_id, chapter, kind, since)

    def chapter_summaries(self, story_id: str, first: int, last: int) -> list[tuple[int, Fact]]:
        return self.snap.chapter_summaries(story_id, first, last)

    def volume_summaries(self, story_id: str) -> list[tuple[int, Fact]]:
        return self.snap.volume_summaries(story_id)

    def texts(self, refs: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], str]:
        return self.snap.texts(refs)  # a ref names its own story

    def knowledge(self, story_id: str, chapter: int, characters: tuple[str, ...] = ()) -> list[Known]:
        """What characters know is recorded per book (``record_knowledge`` on the book's own entries)."""
        return self.snap.knowledge(story_id, chapter, characters)

    def series_homes(self, series_id: str) -> list[Home]:
        return self.snap.series_homes(series_id)

    def hidden_books(self, story_id: str) -> dict[tuple[str, str, int], str]:
        return self.snap.hidden_books(story_id)

    # -- a home's reads, at its end: kept by the reader until the home's canon moves -------------
    def _home(self, at: _Place, read: str, *args: Any) -> Any:
        """The home's ``read`` (a port method reading as of a chapter) at ``END`` with ``args``."""
        home = at.home.story_id
        method = getattr(self.snap, read)
        return self.snap.settled((home, at.home.position, read, *args), lambda: method(home, END, *args))

    def _home_steps(self, at: _Place, entries: tuple[tuple[str, str], ...]) -> list[Step]:
        home = at.home.story_id
        return self.snap.settled((home, at.home.position, "steps", entries), lambda: self.snap.steps(home, entries))

    def _home_lore(self, at: _Place) -> Lore:
        home = at.home.story_id
        return self.snap.settled((home, at.home.position, "lore"), lambda: self.snap.lore(home))

    # -- the spoiler rule of a bible's steps ----------------------------------------------------
    def _bible_hidden(self, home: Home, kind: str, key: str, step: int,
                      hidden_until: int | None) -> int | None | Literal[False]:
        """A bible step's ``hidden_until`` in this book (``series.bible_reveal``): False when it
        is not seen at all, else the chapter it stays hidden until (None: shown)."""
        if hidden_until is None:
            return None
        books = self.snap.settled((home.story_id, home.position, "hidden_books"),
                                  lambda: self.snap.hidden_books(home.story_id))
        return bible_reveal(hidden_until, books.get((kind, key, step)), self.books, self.reader)

    def _seen(self, at: _Place, e: EntryView) -> EntryView | None:
        """``e`` of home ``at`` as this book sees it (None: not at all), its step shifted."""
        hidden_until: int | None = None
        if at.home.role == BIBLE:
            hidden = self._bible_hidden(at.home, e.kind, e.key, e.step, e.hidden_until)
            if hidden is False:
                return None
            hidden_until = hidden
        return replace(e, step=e.step + at.place * SPAN, hidden_until=hidden_until, origin=at.origin)

    # -- reads by (kind, key) precedence ----------------------------------------------------------
    def _inherited(self, keys: tuple[str, ...]) -> dict[tuple[str, str], EntryView]:
        """Of the entries named by ``keys``, each one's step from the first home that has one, as
        this book sees it (kept until a home's canon moves)."""
        def read() -> dict[tuple[str, str], EntryView]:
            found: dict[tuple[str, str], EntryView] = {}
            for at in self.homes:
                for e in self._home(at, "entries_by_key", keys):
                    if (e.kind, e.key) not in found and (seen := self._seen(at, e)) is not None:
                        found[(e.kind, e.key)] = seen
            return found
        return self.snap.settled(("inherited", *self._signature, keys), read)

    def _merged(self, chapter: int, keys: tuple[str, ...]) -> list[EntryView]:
        """The step in force of each entry named by ``keys``: the book's own at ``chapter``, else
        the first home's that has one."""
        found = {(e.kind, e.key): e for e in self.snap.entries_by_key(self.own, chapter, keys)}
        for k, e in self._inherited(keys).items():
            found.setdefault(k, e)
        return [found[k] for k in sorted(found)]

    def entries_by_key(self, story_id: str, chapter: int, keys: tuple[str, ...]) -> list[EntryView]:
        if story_id != self.own:
            return self.snap.entries_by_key(story_id, chapter, keys)
        return self._merged(chapter, keys)

    def active_entries(self, story_id: str, chapter: int, kind: str) -> list[EntryView]:
        own = self.snap.active_entries(story_id, chapter, kind)
        if story_id != self.own:
            return own
        mine = {e.key for e in own}
        elsewhere = self.snap.settled(("inherited active", *self._signature, kind), lambda: frozenset(
            e.key for at in self.homes for e in self._home(at, "active_entries", kind))) - mine
        more = [e for e in self._merged(chapter, tuple(sorted(elsewhere))) if e.kind == kind and e.origin is not None
                and active(e.retired, e.state)]
        return sorted([*own, *more], key=lambda e: (e.kind, e.key))

    def entries_page(self, story_id: str, chapter: int, kind: str, after: str, limit: int) -> list[EntryView]:
        own = self.snap.entries_page(story_id, chapter, kind, after, limit)
        if story_id != self.own:
            return own
        mine = {e.key for e in own}
        elsewhere = self.snap.settled(("inherited page", *self._signature, kind, after, limit), lambda: frozenset(
            e.key for at in self.homes for e in self._home(at, "entries_page", kind, after, limit))) - mine
        more = [e for e in self._merged(chapter, tuple(sorted(elsewhere))) if e.kind == kind and e.origin is not None]
        return sorted([*own, *more], key=lambda e: e.key)[:limit]

    def superseded_steps(self, story_id: str, chapter: int, kind: str, keys: tuple[str, ...],
                         limit: int) -> dict[str, list[EntryView]]:
        if story_id != self.own or not keys:
            return self.snap.superseded_steps(story_id, chapter, kind, keys, limit)
        owner = {e.key: e.step // SPAN for e in self._merged(chapter, keys) if e.kind == kind}
        out = self.snap.superseded_steps(story_id, chapter, kind, tuple(k for k in keys if owner.get(k, 0) == 0),
                                         limit)
        for at in self.homes:
            theirs = tuple(k for k in keys if owner.get(k) == at.place)
            if theirs:
                for key, steps in self._home(at, "superseded_steps", kind, theirs, limit).items():
                    out[key] = [s for e in steps if (s := self._seen(at, e)) is not None]
        return out

    def steps(self, story_id: str, entries: tuple[tuple[str, str], ...]) -> list[Step]:
        """The book's own timeline of each entry and, before its first own step (or for all
        chapters, when it has none), the first home's: its step in force at its end holds from
        chapter 1, its earlier steps never take effect here (their names still name it)."""
        own = self.snap.steps(story_id, entries)
        if story_id != self.own:
            return own
        first: dict[tuple[str, str], int] = {}
        for s in own:
            first[(s.kind, s.key)] = min(first.get((s.kind, s.key), s.valid_from), s.valid_from)
        wanted = tuple(sorted({(k, key) for k, key in entries if first.get((k, key), 2) > 1}))
        out = list(own)
        for at in self.homes:
            if not wanted:
                break
            timelines: dict[tuple[str, str], list[Step]] = {}
            for s in self._home_steps(at, wanted):
                timelines.setdefault((s.kind, s.key), []).append(s)
            for entry, timeline in timelines.items():
                last = next((s for s in timeline if s.valid_to is None), None)
                hidden: int | None | Literal[False] = None
                if last is not None and at.home.role == BIBLE:
                    hidden = self._bible_hidden(at.home, last.kind, last.key, last.step, last.hidden_until)
                if last is None or hidden is False:
                    continue
                shift = at.place * SPAN
                out.extend(replace(s, step=s.step + shift, valid_from=1, valid_to=1, hidden_until=None)
                           for s in timeline if s is not last)
                out.append(replace(last, step=last.step + shift, valid_from=1, valid_to=first.get(entry),
                                   hidden_until=hidden))
            wanted = tuple(e for e in wanted if e not in timelines)
        out.sort(key=lambda s: (s.kind, s.key, s.step))
        return out

    def chain_nodes(self, story_id: str, chapter: int) -> list[NodeView]:
        own = self.snap.chain_nodes(story_id, chapter)
        if story_id != self.own:
            return own
        theirs = {at.place: self._home(at, "chain_nodes") for at in self.homes}
        chains = tuple(sorted({n.chain for nodes in theirs.values() for n in nodes} - {n.chain for n in own}))
        owner = {e.key: divmod(e.step, SPAN) for e in self._merged(chapter, chains)  # chain -> (place, its step)
                 if e.kind == "development_chain" and e.origin is not None and not e.retired}
        out = list(own)
        for at in self.homes:
            for n in theirs[at.place]:
                if owner.get(n.chain, (None,))[0] != at.place:
                    continue
                hidden_until: int | None = None
                if at.home.role == BIBLE:
                    reveal = self._bible_hidden(at.home, "development_chain", n.chain, owner[n.chain][1],
                                                n.hidden_until)
                    if reveal is False:
                        continue
                    hidden_until = reveal
                out.append(replace(n, hidden_until=hidden_until, origin=at.origin))
        return out

    def lore(self, story_id: str) -> Lore:
        if story_id != self.own:
            return self.snap.lore(story_id)
        own = self.snap.lore(story_id)
        key = ("inherited lore", self.own, self._own_position, *((h.home.story_id, h.home.position) for h in self.homes))
        return self.snap.settled(key, lambda: InheritedLore([(0, own), *((at.place, self._home_lore(at))
                                                                      for at in self.homes)]))


class InheritedLore:
    """The activation rules of a book and of its homes, each home's steps shifted as its entries
    are (``SPAN``): a rule of a home applies to that home's steps only."""

    def __init__(self, parts: list[tuple[int, Lore]]) -> None:
        self.parts = parts
        self.constant = tuple(replace(a, step=a.step + place * SPAN) for place, lore in parts for a in lore.constant)
        self.never = frozenset((k, key, s + place * SPAN) for place, lore in parts for k, key, s in lore.never)
        self.gated = frozenset((k, key, s + place * SPAN) for place, lore in parts for k, key, s in lore.gated)

    def match(self, texts: list[tuple[str, str]], *, spaceless: bool = False) -> list[Mention]:
        return sorted(replace(m, step=m.step + place * SPAN)
                      for place, lore in self.parts for m in lore.match(texts, spaceless=spaceless))

    def mentions(self, texts: list[tuple[str, str]], *, spaceless: bool = False) -> Mentions:
        return InheritedMentions([(place, lore.mentions(texts, spaceless=spaceless)) for place, lore in self.parts])


class InheritedMentions:
    def __init__(self, parts: list[tuple[int, Mentions]]) -> None:
        self.parts = dict(parts)
        self.entries = frozenset().union(*(m.entries for m in self.parts.values()))

    def by(self, chapter: int) -> frozenset[tuple[str, str]]:
        """The book's own by ``chapter``; a home's, all it has (read at its end)."""
        return frozenset().union(*(m.by(chapter if place == 0 else END) for place, m in self.parts.items()))

    def of(self, kind: str, key: str, step: int) -> Mention | None:
        place = step // SPAN
        found = self.parts[place].of(kind, key, step - place * SPAN) if place in self.parts else None
        return replace(found, step=step) if found is not None else None

