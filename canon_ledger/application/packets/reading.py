"""One packet's reads: a recipe's read (``Read``), what it reads (``Source``), the candidates
it gives (``Candidate``), and the ``Reading`` that makes a packet's reads on one snapshot.

A recipe line names its source, a function (``sources``); the source names the port reads it
makes (``fetches``, and ``CanonSnapshot`` methods), each a click away from the store's
statements. The compiler asks the ``Reading`` for a read's candidates (``pages``, ``whole``);
the ``Reading`` makes each port read once, fetches together what a store may fetch together,
and applies the rules every read applies: entries' recall rules (``_allowed``) and the
point-of-view rule for secrets (``_secrets``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from canon_ledger.application.packets import fetches, render
from canon_ledger.application.packets.fetches import Fetch
from canon_ledger.application.packets.ports import (CanonSnapshot, ChapterView, DraftView, EntryView, Fact, Known,
                                                    SceneView, StoryView)
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.canon_rules import hidden_at
from canon_ledger.domain.errors import NotFound
from canon_ledger.domain.tiers import Tier
from canon_ledger.domain.tokens import TokenCounter

T = TypeVar("T")


# slots, not frozen: built for every candidate of every packet, and a frozen init is slower.
@dataclass(slots=True)
class Candidate:
    tier: Tier
    kind: str
    key: str
    fact: Fact
    reason: str
    blocked: str | None = None  # a reason it may not be packed at all (hidden, not yet canon)
    step: int | None = None  # an entry's step (a rule may keep it out of every packet)
    lore: bool = False  # brought in by its rule and counted against the story's lore cap (compiler 7)
    secret: bool = False  # the step is a secret (``fields.secret``): known only to those recorded knowing it

    @property
    def identity(self) -> tuple[str, str]:
        return (self.kind, self.key)


Candidates = Callable[["Reading", "Read"], list[Candidate]]
Keys = Callable[["Reading", "Read"], tuple[str, ...]]


# Compared and hashed as itself: one is made per source function, and a recipe (its reads and
# their sources) is hashed for every packet (``recipes.staged``).
@dataclass(frozen=True, eq=False)
class Source:
    """What one read of a recipe reads (``source`` makes one of a function). ``candidates``: the
    read's candidates, from the packet's ``Reading``. ``needs``: the port reads it makes whose
    arguments come from the request alone (``fetches``): a store may fetch them together before
    anything is read (``recipes.first_reads``). ``keys``: for a read of entries by key, the keys
    it reads, known once the reads before it are made (``Reading.whole`` fetches the reads by key
    together). ``rules``: it brings entries in by their recall rule, so the packet also keeps out
    every entry whose rule says never (``Reading._allowed``)."""

    candidates: Candidates
    needs: tuple[Fetch[Any], ...] = ()
    keys: Keys | None = None
    rules: bool = False


def source(*needs: Fetch[Any], keys: Keys | None = None, rules: bool = False) -> Callable[[Candidates], Source]:
    """The decorated function as a read's ``Source``, making the port reads ``needs``."""
    def made(candidates: Candidates) -> Source:
        return Source(candidates, needs, keys, rules)
    return made


@source()
def l1_retrieval(r: Reading, read: Read) -> list[Candidate]:
    """L1 retrieval, last in a recipe: the compiler reads it through its ``Retriever``
    (``compiler._l1``), never through this source."""
    raise ValueError(f"{read.read!r} is read by the compiler's retriever, not by a source")


@dataclass(frozen=True)
class Read:
    """One read of a recipe. ``read`` names what is read, and is the name a packet gives it when
    it was not read; ``kind`` is the candidates' kind ("canon": each entry's own); ``reason``
    starts every candidate's reason. ``source``: what it reads (``sources``; ``l1_retrieval`` for
    L1); None for a paged read. ``while_room``: read only after every other read, and only
    while the budget has room. ``page``: entries of ``kind`` read this many at a time, in key
    order (``fetches.entries_page``). ``hides``: an entry hidden until a later chapter is listed
    without its text (the role lists leave it out). ``spaceless``: a key is found as SillyTavern
    finds it across scripts (``domain.recall``: a key with no ASCII letter or digit as a
    substring); False, whole words only (compilers 5, 6). ``gate``: an entry its rule gates (an
    imported lorebook entry: ``Lore.gated``) is left out of this read; False for the reads that
    bring entries in by their rule or a tag, and for every read of compilers 1-6. ``pov``: a
    secret (``EntryView.secret``) the packet's point-of-view character does not know as of the
    chapter is labelled so, one it knows says since when and how (``Reading.point_of_view``);
    False for every read of compilers 1-7."""

    tier: Tier
    kind: str
    read: str
    reason: str
    source: Source | None = None
    while_room: bool = False
    page: int = 0
    hides: bool = True
    spaceless: bool = True
    gate: bool = True
    pov: bool = True


Recipe = tuple[Read, ...]


def by_key(read: Read) -> Keys | None:
    """The keys ``read`` reads entries by (``Source.keys``), or None if it reads none by key."""
    return read.source.keys if read.source is not None else None


class Reading:
    """One packet's reads: a port result several reads use is read once (``get``); what one
    read finds for a later one (the tagged characters, the scene-keys detail) is kept here."""

    def __init__(self, snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter,
                 recipe: Recipe = (), draft: DraftView | None = None) -> None:
        self.snap, self.req, self.story, self.tokens, self.chapter = snap, req, story, tokens, req.chapter
        self.draft = draft  # the draft under review (checked by ``compiler.reviewed``), or None
        self.detail = f"{req.role} reads no scene keys"
        self.characters: list[EntryView] = []
        self.tagged: set[tuple[str, str]] = set()  # the entries a tag brought in (a mention never repeats one)
        # Do entries' recall rules apply (a read brings entries in by their rule)?
        self.rules = any(read.source is not None and read.source.rules for read in recipe)
        self.pov_used = False  # did the point-of-view rule change a candidate (compiler 8)?
        self._got: dict[Fetch[Any], Any] = {}
        self._pov: tuple[tuple[str, str] | None] | None = None  # (the point of view,) once read
        self._known: dict[tuple[str, str], Known] | None = None

    def get(self, fetch: Fetch[T]) -> T:
        """The port read ``fetch`` gives for the request, made once per packet."""
        if fetch not in self._got:
            self._got[fetch] = fetch(self.req).of(self.snap)
        got: T = self._got[fetch]
        return got

    def pages(self, read: Read) -> Iterator[tuple[list[Candidate], bool]]:
        """The read's candidates, a page at a time, each with whether more follow; nothing is
        read before the first page is asked for."""
        if not read.page:
            if read.source is None:
                raise ValueError(f"the read {read.read!r} has no source")
            yield self._secrets(self._allowed(read.source.candidates(self, read), read.gate), read), False
            return
        after, more = "", True
        while more:
            rows = fetches.entries_page(self.req, read.kind, after, read.page).of(self.snap)
            after, more = rows[-1].key if rows else after, len(rows) == read.page
            yield self._secrets(self._allowed([entry(read.tier, e, read.reason, self.chapter) for e in rows
                                               if not e.retired], read.gate), read), more

    def whole(self, reads: Recipe | list[Read]) -> list[Candidate]:
        """The candidates of ``reads``, read in order. At the first read by key (``by_key``), the
        reads by key from there on are fetched together (``CanonSnapshot.prefetch``): their keys
        are known once the reads before them are made, and one read does not wait for another."""
        out: list[Candidate] = []
        first = next((i for i, read in enumerate(reads) if by_key(read)), None)
        for i, read in enumerate(reads):
            if i == first:
                self.prefetch_by_key(reads[i:])
            out += [c for page, _ in self.pages(read) for c in page]
        return out

    def prefetch_by_key(self, reads: Recipe | list[Read]) -> None:
        """Fetch the reads by key among ``reads`` together, when they are more than one."""
        keys = [keys_of(self, read) for read in reads if (keys_of := by_key(read))]
        calls = [fetches.entries_by_key(self.req, k) for k in dict.fromkeys(keys) if k]
        if len(calls) > 1:
            self.snap.prefetch(calls)

    def planned(self) -> ChapterView:
        chapter = self.get(fetches.chapter)
        if chapter is None:
            raise NotFound("unknown_chapter", f"chapter {self.chapter} of {self.req.story_id!r} has not been planned",
                           "chapter")
        return chapter

    def cards(self, planned: bool) -> list[SceneView]:
        """The scene cards asked for (all of the chapter's, or ``req.scene``'s)."""
        chapter = self.planned() if planned else self.get(fetches.chapter)
        scenes = self.get(fetches.scenes) if chapter else []
        if self.req.scene is not None:
            scenes = [s for s in scenes if s.scene_id == self.req.scene]
            if not scenes:
                raise NotFound("unknown_scene", f"chapter {self.chapter} has no scene card {self.req.scene!r}", "scene")
        return scenes

    def volume(self) -> int | None:
        chapter = self.get(fetches.chapter)
        return chapter.volume if chapter else None

    def point_of_view(self) -> tuple[str, str] | None:
        """The packet's point-of-view character, (key, name): the ``pov`` of the scene card asked
        for, or, for a packet of the whole chapter, the one ``pov`` all its cards share; None
        when there is none. Read only once a secret is among the candidates."""
        if self._pov is None:
            povs = {s.pov for s in self.cards(False)}
            key = povs.pop() if len(povs) == 1 else None
            name = key
            if key is not None:  # the tagged characters are read already; a pov not tagged is read here
                tagged = [e for e in self.characters if e.key == key]
                found = tagged or self.snap.entries_by_key(self.req.story_id, self.chapter, (key,))
                names = [e.name for e in found
                         if e.kind == "character" and not e.retired and not hidden_at(e.hidden_until, self.chapter)]
                name = names[0] if names else key
            self._pov = ((key, name) if key is not None and name is not None else None,)
        return self._pov[0]

    def known(self, character: str) -> dict[tuple[str, str], Known]:
        """What ``character`` (the point of view: one per packet) knows as of the chapter
        (``record_knowledge``), by entry."""
        if self._known is None:
            records = self.snap.knowledge(self.req.story_id, self.chapter, (character,))
            self._known = {(k.kind, k.key): k for k in records}
        return self._known

    def _secrets(self, candidates: list[Candidate], read: Read) -> list[Candidate]:
        """``candidates`` with the point-of-view rule applied to the secrets among them (compiler
        8): one the point-of-view character knows as of the chapter says since when and how; one
        it does not know is labelled in its text, "the reader knows; Mira does not" (planner,
        writer and qa alike: docs/architecture.md argues it). A packet with no point of view,
        or no secret, is left as it was."""
        if not read.pov or not any(c.secret and c.blocked is None for c in candidates):
            return candidates
        pov = self.point_of_view()
        if pov is None:
            return candidates
        key, name = pov
        known = self.known(key)
        unknown = [c for c in candidates if c.secret and c.blocked is None and c.identity not in known]
        refs = [c.fact.ref for c in unknown if c.fact.text is None and c.fact.ref is not None]
        texts = self.snap.texts(refs) if refs else {}  # one read for every text still to fetch
        label = render.secret_label(name, self.chapter)
        # The label ends its own line, so a tiktoken encoding counts it apart from the text after it.
        label_tokens = self.tokens.count(label)
        out = []
        for c in candidates:
            if c.secret and c.blocked is None:
                self.pov_used = True
                k = known.get(c.identity)
                if k is not None:
                    c = replace(c, reason=f"{c.reason}; {render.known_since(name, k.chapter, k.how)}")
                else:
                    text = c.fact.text if c.fact.text is not None else texts.get(c.fact.ref, "") if c.fact.ref else ""
                    c = replace(c, fact=Fact(label + text, label_tokens + c.fact.tokens, c.fact.sources),
                                reason=f"{c.reason}; {render.unknown_to(name, self.chapter)}")
            out.append(c)
        return out

    def _allowed(self, candidates: list[Candidate], gate: bool) -> list[Candidate]:
        """``candidates`` less the entries whose rule says never (``domain.recall``) and, when
        ``gate``, those only their rule or a tag may bring in (``Lore.gated``)."""
        if not self.rules:
            return candidates
        lore = self.get(fetches.lore)
        out = lore.never | lore.gated if gate else lore.never
        if not out or not any(c.step is not None for c in candidates):  # most stories: no rule keeps any out
            return candidates
        return [c for c in candidates if c.step is None or (c.kind, c.key, c.step) not in out]


# -- candidates ---------------------------------------------------------------------------------

def hidden(e: Any, chapter: int) -> str | None:
    """Why ``e``'s text (an entry's, a chain node's) may not be shown at ``chapter``
    (``render.hidden_reason``: its ``hidden_until`` is later), or None."""
    return render.hidden_reason(e.hidden_until, chapter)


def from_where(origin: str | None) -> str:
    """What a reason adds for an inherited entry or node (``inherited``): where it comes from."""
    return f"; {origin}" if origin else ""


def entry(tier: Tier, e: EntryView, reason: str, chapter: int) -> Candidate:
    """An entry's candidate: blocked while hidden, its retirement said, an inherited one's home."""
    return Candidate(tier, e.kind, e.key, e.fact, reason + (" (retired)" if e.retired else "") + from_where(e.origin),
                     hidden(e, chapter), e.step, secret=e.secret)


def one(read: Read, key: str, fact: Fact | None) -> list[Candidate]:
    """The read's one candidate, or none when ``fact`` has no text."""
    return [Candidate(read.tier, read.kind, key, fact, read.reason)] if fact is not None and fact.text else []


def numbered(read: Read, facts: Iterable[tuple[int, Fact]]) -> list[Candidate]:
    """A candidate per (number, fact): chapter or volume summaries."""
    return [Candidate(read.tier, read.kind, str(n), fact, read.reason) for n, fact in facts]
