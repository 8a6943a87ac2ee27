"""What the packet compiler reads: confirmed canon, as of a chapter, from read models.

The compiler sees only this interface. Its implementation reads the canon tables and no
others; drafts and proposals are not reachable through it.

The views are slotted dataclasses, not frozen ones: one is built for every candidate of every
packet, where a frozen ``__init__`` costs more. Treat them as values all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from canon_ledger.domain.continuity import Step

R = TypeVar("R")


@dataclass(slots=True)
class Fact:
    """One packable piece of canon: its rendered text, token count and source event positions.

    A reader may leave the text out (``text`` None, ``ref`` set: earlier steps, chain nodes);
    the compiler then fetches it only if it is packed (``CanonSnapshot.texts``).
    """

    text: str | None
    tokens: int
    sources: tuple[int, ...]
    ref: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class StoryView:
    story_id: str
    title: str
    guardrails: Fact
    contract: Fact
    budgets: dict[str, int]
    position: int
    # (count, first position, last position) of the story's events the read model quarantined
    quarantined: tuple[int, int, int] | None = None
    lore_share: int | None = None  # percent of a packet's budget its lore may take (set_lore_cap); None: no cap
    series: str | None = None  # the series it is the bible or a book of (``domain.series``); None: none
    series_role: str | None = None  # "bible" or "book"


@dataclass(frozen=True)
class Home:
    """A story of a series as a book reads it (``CanonSnapshot.series_homes``): its role
    ("bible" or "book"), its place in reading order (0: the bible), its title and the last log
    position that changed its canon."""

    story_id: str
    role: str
    ordinal: int
    title: str
    position: int


@dataclass(frozen=True)
class ChapterView:
    number: int
    volume: int
    goals: Fact
    summary: Fact | None
    text: Fact | None
    goal_items: tuple[str, ...] = ()  # the goals as the author listed them


@dataclass(frozen=True)
class SceneView:
    scene_id: str
    card: Fact
    tags: tuple[tuple[str, str], ...]  # (tag type, key) in card order
    summary: str = ""  # the card's summary as written
    pov: str | None = None  # the point-of-view character's key; None: none


@dataclass(slots=True)
class EntryView:
    kind: str
    key: str
    step: int
    valid_from: int
    retired: bool
    name: str
    state: str | None
    hidden_until: int | None
    fact: Fact
    secret: bool = False  # the step's fields.secret is true: known only to those recorded as knowing it
    origin: str | None = None  # where an inherited step comes from (``inherited``); None: the story's own


@dataclass(slots=True)
class Known:
    """A character knows an entry from ``chapter`` on, ``how`` (``CanonEntry.KnowledgeRecorded``:
    the latest record of that character and entry; ``source``, its log position)."""

    character: str
    kind: str
    key: str
    chapter: int
    how: str
    source: int


@dataclass(frozen=True, order=True)
class Mention:
    """A step whose keys ``match`` found: where first, and as which key (``domain.recall``);
    its rule's ``order`` and ``ignore_budget``, and ``at``: (text, offset) of that first find."""

    kind: str
    key: str
    step: int
    where: str
    said: str
    order: float = 100.0
    ignore_budget: bool = False
    at: tuple[int, int] = (0, 0)


@dataclass(frozen=True, order=True)
class Always:
    """A step its rule includes in every packet of its story, at ``tier``; its rule's ``order``
    and ``ignore_budget``."""

    kind: str
    key: str
    step: int
    tier: str
    order: float = 100.0
    ignore_budget: bool = False


class Mentions(Protocol):
    """What one search of texts found (``Lore.mentions``)."""

    entries: frozenset[tuple[str, str]]  # (kind, key) of every entry with a step mentioned

    def by(self, chapter: int) -> frozenset[tuple[str, str]]:
        """Of ``entries``, those with a mentioned step in effect by ``chapter`` (valid_from not
        after it): the only ones that can have a mentioned step in force then."""
        ...

    def of(self, kind: str, key: str, step: int) -> Mention | None:
        """The mention of the step (as ``Lore.match`` gives it), or None when it is not mentioned."""
        ...


class Lore(Protocol):
    """One story's activation rules, matched in the read model (``projections.lore_index``)."""

    constant: tuple[Always, ...]
    never: frozenset[tuple[str, str, int]]  # (kind, key, step) no packet may hold
    gated: frozenset[tuple[str, str, int]]  # (kind, key, step) only its rule or a tag brings in

    def match(self, texts: list[tuple[str, str]], *, spaceless: bool = False) -> list[Mention]:
        """The steps mentioned in ``texts`` (``(where, text)``), whatever chapter they are in force
        at. ``spaceless``: SillyTavern's rule across scripts (``domain.recall.found``); False:
        whole words only, the rule compilers 5 and 6 matched with."""
        ...

    def mentions(self, texts: list[tuple[str, str]], *, spaceless: bool = False) -> Mentions:
        """What ``match`` finds, as the entries mentioned and each step's mention when asked for
        (a caller that needs only the steps in force builds no other)."""
        ...


@dataclass(slots=True)
class NodeView:
    chain: str
    node_id: str
    node_kind: str
    hidden_until: int | None
    fact: Fact
    origin: str | None = None  # where an inherited chain's node comes from (``inherited``); None: the story's own


@dataclass(frozen=True)
class Call(Generic[R]):
    """One read of a ``CanonSnapshot``, as data: the port's method itself (``read``, e.g.
    ``CanonSnapshot.chapter``: its definition is a click away, and a store's own a click from
    there) and its arguments. A store finds its own method by the port method's name, as any
    call of it does; one that fetches reads together (``prefetch``) finds their statements so."""

    read: Callable[..., R]
    args: tuple[Any, ...]

    def of(self, snap: CanonSnapshot) -> R:
        """Make the read on ``snap``."""
        method: Callable[..., R] = getattr(snap, self.read.__name__)
        return method(*self.args)


class CanonSnapshot(Protocol):
    """Reads from one consistent snapshot of the canon read model."""

    position: int  # the log position the snapshot reflects

    def prefetch(self, calls: Sequence[Call[Any]]) -> None:
        """A hint: the caller makes ``calls`` next, with these arguments; a store may fetch
        them together now (nothing is answered here)."""
        ...
    def story(self, story_id: str) -> StoryView | None: ...
    def chapter(self, story_id: str, number: int) -> ChapterView | None: ...
    def scenes(self, story_id: str, chapter: int) -> list[SceneView]: ...
    def entries_by_key(self, story_id: str, chapter: int, keys: tuple[str, ...]) -> list[EntryView]:
        """The step in force at ``chapter`` of each entry named by one of ``keys`` (any kind), in
        (kind, key) order."""
        ...
    def active_entries(self, story_id: str, chapter: int, kind: str) -> list[EntryView]:
        """The step in force at ``chapter`` of each entry of ``kind`` that is neither retired nor
        resolved, in key order."""
        ...
    def entries_since(self, story_id: str, chapter: int, kind: str, since: int) -> list[EntryView]:
        """The step in force at ``chapter`` of each entry of ``kind`` whose step took effect
        after chapter ``since``, in key order."""
        ...
    def entries_page(self, story_id: str, chapter: int, kind: str, after: str, limit: int) -> list[EntryView]:
        """A page of the entries of ``kind`` in force at ``chapter``: the first ``limit`` keys
        after ``after`` (code-point order), each at its step in force."""
        ...
    def superseded_steps(self, story_id: str, chapter: int, kind: str, keys: tuple[str, ...],
                         limit: int) -> dict[str, list[EntryView]]:
        """Per key, up to ``limit`` earlier steps that ``chapter``'s step replaced, most recent first."""
        ...
    def steps(self, story_id: str, entries: tuple[tuple[str, str], ...]) -> list[Step]:
        """Every step of the (kind, key) ``entries``' timelines (versions and retirements, at
        any chapter), in (kind, key, step) order: what the continuity check reads."""
        ...
    def texts(self, refs: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], str]: ...
    def chapter_summaries(self, story_id: str, first: int, last: int) -> list[tuple[int, Fact]]: ...
    def volume_summaries(self, story_id: str) -> list[tuple[int, Fact]]: ...
    def chain_nodes(self, story_id: str, chapter: int) -> list[NodeView]: ...
    def knowledge(self, story_id: str, chapter: int, characters: tuple[str, ...] = ()) -> list[Known]:
        """What ``characters`` (every character when empty) know as of ``chapter``: each one's
        latest record of an entry whose chapter is ``chapter`` or before, in (character, kind,
        key) order."""
        ...
    def lore(self, story_id: str) -> Lore:
        """The story's activation rules as its canon stands in this snapshot."""
        ...
    def settled(self, key: tuple[Any, ...], read: Callable[[], R]) -> R:
        """``read()``, or its answer the reader kept under ``key``: the caller's key must
        determine the answer (another story's canon as of its ``Home.position`` does)."""
        ...
    def series_homes(self, series_id: str) -> list[Home]:
        """The bible and the books of ``series_id``, in reading order (the bible first)."""
        ...
    def hidden_books(self, story_id: str) -> dict[tuple[str, str, int], str]:
        """The steps of ``story_id`` (a series bible) whose ``hidden_until`` counts in a book
        other than the first, by (kind, key, step): that book's story id."""
        ...


@dataclass(frozen=True)
class DraftView:
    """A chapter draft as the authoring read model holds it: never canon. ``position``: the
    log position of its submission (the source its text is read from again by an audit)."""

    draft_id: str
    chapter: int
    status: str  # submitted | accepted | rejected
    text: str
    position: int
    reason: str | None = None
    # Continuity findings a person dismissed as intentional: (finding_id, reason, log position
    # of the ``Draft.FindingDismissed``), sorted by finding_id.
    dismissed: tuple[tuple[str, str, int], ...] = ()


class Drafts(Protocol):
    """Drafts by id, for the one packet that may show one: the QA packet checking it."""

    def draft(self, story_id: str, draft_id: str, target: int) -> DraftView | None:
        """The draft as it stands once the read model reflects the log up to ``target``."""
        ...


class CanonReader(Protocol):
    def snapshot(self, story: str | None = None) -> AbstractContextManager[CanonSnapshot]:
        """One consistent read; ``story``: the only story read (its ``position`` is that story's)."""
        ...


class Freshness(Protocol):
    """How far the canon read model reflects the log (read-your-writes)."""

    def ensure_reflects(self, target: int, partition: str | None = None) -> int:
        """Bring it up to ``target`` (a log position); instant when already known to be there.
        ``partition``: the one story the caller will read (the rest may stay behind)."""
        ...

    def known_to_reflect(self, target: int) -> bool:
        """Does this process already know the whole build reflects ``target`` (no read)?"""
        ...

    def catch_up_serving(self, target: int) -> int:
        """Bring it up to ``target``, reading where it stands."""
        ...

    def snapshot_reflects(self, position: int, target: int) -> bool:
        """Does a snapshot tracked at ``position`` reflect the log up to ``target``? (The log
        may hold only other models' events in between.)"""
        ...


# -- L1 retrieval ---------------------------------------------------------------------------------
@dataclass(slots=True)
class Recalled:
    """One L1 hit, as a packet candidate: canon text from the story's own accepted chapters
    (``kind`` "chunk") or a wiki page's TLDR (``kind`` "wiki_page")."""

    id: str
    kind: str
    text: str
    sources: tuple[int, ...]


@dataclass
class Recall:
    """What L1 retrieval gave one packet request: hits best first, and a stage per step."""

    query: str
    hits: list[Recalled]
    stages: list[Any]  # application.packets.packet.Stage

    def record(self) -> dict[str, Any]:
        """What PacketIssued keeps: enough to rebuild the same items from the log."""
        return {"query": self.query, "hits": [{"id": h.id, "kind": h.kind, "sources": list(h.sources)} for h in self.hits],
                "stages": [s.as_dict() for s in self.stages]}


class Retriever(Protocol):
    def recall(self, story_id: str, chapter: int, query: str, top_k: int | None = None) -> Recall:
        """L1 candidates from canon that precedes ``chapter``, at most ``top_k`` passages (None:
        the retriever's own default); never raises (errors are stages)."""
        ...
