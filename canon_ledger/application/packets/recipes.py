"""Per-role recipes, declared as data: which canon facts are candidates, in which tier and order.

Tiers: P0 hard constraints (never trimmed), P1 current state, P2 recent context, P3 distant
reference, P4 supplementary. A role's recipe is a tuple of ``Read``; the order of the reads
within a tier is fill priority. Everything else about a role is derived from its recipe:
the role names (``RECIPES``' keys, held equal to ``domain.story.ROLES``), which reads are read
at once and which only while the budget has room (``staged``), which reads a store may
fetch together before anything is read (``first_reads``), and whether L1 retrieval runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, TypeVar, cast

from canon_ledger.application import continuity
from canon_ledger.application.packets import render
from canon_ledger.application.packets.packet import Tier
from canon_ledger.application.packets.ports import (Always, Call, CanonSnapshot, ChapterView, DraftView, EntryView,
                                                    Fact, Known, Mention, Mentions, SceneView, StoryView)
from canon_ledger.domain.canon import hidden_at
from canon_ledger.domain.errors import NotFound
from canon_ledger.domain.story import ROLES
from canon_ledger.domain.tokens import TokenCounter

ROLE_TAGS = ("characters", "locations", "items", "threads", "callbacks")
TAG_KIND = {"characters": "character", "locations": "location", "items": "item", "threads": "thread"}
RECENT_SUMMARIES = 3
RECENT_TIMELINE = 5
WORLD_RULE_PAGE = 64  # world rules read per statement, while the budget has room
HISTORY_STEPS = 3  # earlier states per tagged character: the latest shifts, not the whole life
RETRIEVAL = "L1 retrieval"  # the read the compiler makes through its Retriever, last in a recipe
ALWAYS = "always-on entries"  # a recipe with this read also keeps out every entry whose rule says never
# Compiler 7's reads of lore, the entries brought in by their own rule (also keeping out every
# entry whose rule says never): the mentioned and always-on entries together, in their rules'
# order, under the story's lore cap; and the always-on ones alone (chat, summarizer).
LORE = "lore entries"
LORE_ALWAYS = "always-on lore"
RULED = (ALWAYS, LORE, LORE_ALWAYS)
REVIEW = "draft under review"  # a recipe with this read may be asked for a packet holding one submitted draft
CONTINUITY = "continuity findings"  # the continuity check of the draft under review (compiler 8)


@dataclass(frozen=True)
class Read:
    """One read of a recipe. ``read`` names what is read (a key of ``SOURCES``, or
    ``RETRIEVAL``) and is the name a packet gives it when it was not read; ``kind`` is the
    candidates' kind ("canon": each entry's own); ``reason`` starts every candidate's reason.
    ``while_room``: read only after every other read, and only while the budget has room.
    ``page``: entries of ``kind`` read this many at a time, in key order. ``hides``: an entry
    hidden until a later chapter is listed without its text (the role lists leave it out).
    ``spaceless``: a key is found as SillyTavern finds it across scripts (``domain.recall``: a
    key with no ASCII letter or digit as a substring); False, whole words only (compilers 5, 6).
    ``gate``: an entry its rule gates (an imported lorebook entry: ``Lore.gated``) is left out
    of this read; False for the reads that bring entries in by their rule or a tag, and for
    every read of compilers 1-6. ``pov``: a secret (``EntryView.secret``) the packet's point-of-view
    character does not know as of the chapter is labelled so, one it knows says since when and how
    (``Reading.point_of_view``); False for every read of compilers 1-7."""

    tier: Tier
    kind: str
    read: str
    reason: str
    while_room: bool = False
    page: int = 0
    hides: bool = True
    spaceless: bool = True
    gate: bool = True
    pov: bool = True


Recipe = tuple[Read, ...]
_SCENE: Recipe = (
    Read("P0", "scene_card", "scene cards", "scene card"),
    Read("P0", "chapter_goals", "chapter goals", "chapter goals"),
    Read("P0", "style_guardrails", "style guardrails", "style guardrails"),
    Read("P0", "output_contract", "output contract", "output contract"),
    Read("P1", "canon", "tagged entries", "tagged", gate=False),
    Read("P1", "canon", LORE, "mentioned", gate=False),  # "mentioned ...", or "always on"
    Read("P1", "thread", "active threads", "active thread"),
    Read("P2", "chapter_ending", "previous chapter ending", "the end of the previous chapter's accepted text"),
    Read("P2", "chapter_summary", "recent chapter summaries", "recent chapter summary"),
    Read("P2", "volume_summary", "current volume summary", "current volume summary"),
    Read("P2", "timeline_event", "recent timeline", "recent timeline"),
    Read("P3", "volume_summary", "earlier volume summaries", "earlier volume summary"),
    Read("P3", "world_rule", "world rules", "world rule", while_room=True, page=WORLD_RULE_PAGE),
    Read("P3", "history", "earlier character states", "earlier state", while_room=True),
    Read("P4", "development_chain", "development chains", "development chain", while_room=True),
    Read("P4", "chunk", RETRIEVAL, RETRIEVAL, while_room=True),  # or "wiki_page"
)
RECIPES: dict[str, Recipe] = {
    "planner": (Read("P0", "scene_card", "scene cards, if planned", "scene card"), *_SCENE[1:]),
    "writer": _SCENE,
    # The one packet that may hold a draft: the one asked to check it (``Request.draft``).
    "qa": (*_SCENE[:4], Read("P0", "draft_under_review", REVIEW, "the draft under review: unconfirmed text, not canon"),
           Read("P0", "continuity_finding", CONTINUITY,
                "continuity finding: the draft contradicts the canon in force at its chapter"),
           *_SCENE[4:]),
    "summarizer": (Read("P0", "chapter_text", "chapter text", "accepted chapter text"),
                   Read("P1", "role_lists", "role lists", "names the summary must use"),
                   Read("P1", "canon", LORE_ALWAYS, "always on", gate=False)),
    "chat": (Read("P0", "story", "story", "project"),
             Read("P0", "style_guardrails", "style guardrails", "style guardrails"),
             Read("P1", "canon", LORE_ALWAYS, "always on", gate=False),
             Read("P1", "volume_summary", "volume summaries", "project overview"),
             Read("P2", "chapter_summary", "latest chapter summaries", "latest chapter summary"),
             Read("P3", "thread", "active threads", "open thread")),
}


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


@dataclass(frozen=True)
class Request:
    story_id: str
    role: str
    chapter: int
    scene: str | None = None
    budget: int | None = None
    draft: str | None = None  # the id of the submitted draft a qa packet checks


# The port reads whose arguments come from the request alone, by name, as data: a store may
# fetch them together before anything is read (``first_reads``), and ``Reading.get`` reads each once.
Fetch = Callable[[Request], Call]
FETCH: dict[str, Fetch] = {
    "chapter": lambda r: Call("chapter", (r.story_id, r.chapter)),
    "previous chapter": lambda r: Call("chapter", (r.story_id, r.chapter - 1)),
    "scenes": lambda r: Call("scenes", (r.story_id, r.chapter)),
    "threads": lambda r: Call("active_entries", (r.story_id, r.chapter, "thread")),
    "recent summaries": lambda r: Call("chapter_summaries", (r.story_id, max(1, r.chapter - RECENT_SUMMARIES),
                                                             r.chapter - 1)),
    "latest summaries": lambda r: Call("chapter_summaries", (r.story_id, max(1, r.chapter - RECENT_SUMMARIES + 1),
                                                             r.chapter)),
    "volumes": lambda r: Call("volume_summaries", (r.story_id,)),
    "timeline": lambda r: Call("entries_since", (r.story_id, r.chapter, "timeline_event", r.chapter - RECENT_TIMELINE)),
    "lore": lambda r: Call("lore", (r.story_id,)),
}


def _page(r: Request, read: Read, after: str) -> Call:
    return Call("entries_page", (r.story_id, r.chapter, read.kind, after, read.page))


class Reading:
    """One packet's reads: a port result several reads use is read once (``get``); what one
    read finds for a later one (the tagged characters, the scene-keys detail) is kept here."""

    def __init__(self, snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter,
                 recipe: Recipe = (), draft: DraftView | None = None) -> None:
        self.snap, self.req, self.story, self.tokens, self.k = snap, req, story, tokens, req.chapter
        self.draft = draft  # the draft under review (checked by ``reviewed``), or None
        self.detail = f"{req.role} reads no scene keys"
        self.characters: list[EntryView] = []
        self.tagged: set[tuple[str, str]] = set()  # the entries a tag brought in (a mention never repeats one)
        self.rules = any(read.read in RULED for read in recipe)  # do entries' recall rules apply?
        self.pov_used = False  # did the point-of-view rule change a candidate (compiler 8)?
        self._got: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self._got:
            self._got[name] = FETCH[name](self.req).of(self.snap)
        return self._got[name]

    def pages(self, read: Read) -> Iterator[tuple[list[Candidate], bool]]:
        """The read's candidates, a page at a time, each with whether more follow; nothing is
        read before the first page is asked for."""
        after, more = "", True
        while more and read.page:
            rows: list[EntryView] = _page(self.req, read, after).of(self.snap)
            after, more = rows[-1].key if rows else after, len(rows) == read.page
            yield self._secrets(self._allowed([_entry(read.tier, e, read.reason, self.k) for e in rows
                                               if not e.retired], read.gate), read), more
        if not read.page:
            yield self._secrets(self._allowed(SOURCES[read.read][1](self, read), read.gate), read), False

    def point_of_view(self) -> tuple[str, str] | None:
        """The packet's point-of-view character, (key, name): the ``pov`` of the scene card asked
        for, or, for a packet of the whole chapter, the one ``pov`` all its cards share; None
        when there is none. Read only once a secret is among the candidates."""
        if "pov" not in self._got:
            povs = {s.pov for s in self.cards(False)}
            key = povs.pop() if len(povs) == 1 else None
            name = key
            if key is not None:  # the tagged characters are read already; a pov not tagged is read here
                tagged = [e for e in self.characters if e.key == key]
                found = tagged or self.snap.entries_by_key(self.req.story_id, self.k, (key,))
                names = [e.name for e in found
                         if e.kind == "character" and not e.retired and not hidden_at(e.hidden_until, self.k)]
                name = names[0] if names else key
            self._got["pov"] = (key, name) if key is not None else None
        pov: tuple[str, str] | None = self._got["pov"]
        return pov

    def known(self, character: str) -> dict[tuple[str, str], Known]:
        """What ``character`` knows as of the chapter (``record_knowledge``), by entry."""
        if "known" not in self._got:
            self._got["known"] = {(k.kind, k.key): k for k in self.snap.knowledge(self.req.story_id, self.k,
                                                                                (character,))}
        known: dict[tuple[str, str], Known] = self._got["known"]
        return known

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
        label = render.secret_label(name, self.k)
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
                                reason=f"{c.reason}; {render.unknown_to(name, self.k)}")
            out.append(c)
        return out

    def _allowed(self, candidates: list[Candidate], gate: bool) -> list[Candidate]:
        """``candidates`` less the entries whose rule says never (``domain.recall``) and, when
        ``gate``, those only their rule or a tag may bring in (``Lore.gated``)."""
        if not self.rules:
            return candidates
        lore = self.get("lore")
        out = lore.never | lore.gated if gate else lore.never
        if not out or not any(c.step is not None for c in candidates):  # most stories: no rule keeps any out
            return candidates
        return [c for c in candidates if c.step is None or (c.kind, c.key, c.step) not in out]

    def whole(self, reads: Recipe | list[Read]) -> list[Candidate]:
        """The candidates of ``reads``, read in order. At the first read by key (``BY_KEY``), the
        reads by key from there on are fetched together (``CanonSnapshot.prefetch``): their keys
        are known once the reads before them are made, and one read does not wait for another."""
        out: list[Candidate] = []
        for i, read in enumerate(reads):
            if read.read in BY_KEY and not any(earlier.read in BY_KEY for earlier in reads[:i]):
                self.prefetch_by_key(reads[i:])
            out += [c for page, _ in self.pages(read) for c in page]
        return out

    def prefetch_by_key(self, reads: Recipe | list[Read]) -> None:
        """Fetch the reads by key among ``reads`` together, when they are more than one."""
        keys = [BY_KEY[read.read](self, read) for read in reads if read.read in BY_KEY]
        calls = [Call("entries_by_key", (self.req.story_id, self.k, k)) for k in dict.fromkeys(keys) if k]
        if len(calls) > 1:
            self.snap.prefetch(calls)

    def planned(self) -> ChapterView:
        chapter: ChapterView | None = self.get("chapter")
        if chapter is None:
            raise NotFound("unknown_chapter", f"chapter {self.k} of {self.req.story_id!r} has not been planned", "chapter")
        return chapter

    def cards(self, planned: bool) -> list[SceneView]:
        """The scene cards asked for (all of the chapter's, or ``req.scene``'s)."""
        chapter = self.planned() if planned else self.get("chapter")
        scenes: list[SceneView] = self.get("scenes") if chapter else []
        if self.req.scene is not None:
            scenes = [s for s in scenes if s.scene_id == self.req.scene]
            if not scenes:
                raise NotFound("unknown_scene", f"chapter {self.k} has no scene card {self.req.scene!r}", "scene")
        return scenes

    def volume(self) -> int | None:
        chapter = self.get("chapter")
        return chapter.volume if chapter else None


def _hidden(e: Any, chapter: int) -> str | None:
    """Why ``e``'s text may not be shown at ``chapter`` (its ``hidden_until`` is later), or None."""
    return f"hidden until chapter {e.hidden_until}" if hidden_at(e.hidden_until, chapter) else None


def _entry(tier: Tier, e: EntryView, reason: str, chapter: int) -> Candidate:
    return Candidate(tier, e.kind, e.key, e.fact, reason + (" (retired)" if e.retired else ""), _hidden(e, chapter),
                     e.step, secret=e.secret)


def _one(read: Read, key: str, fact: Fact | None) -> list[Candidate]:
    return [Candidate(read.tier, read.kind, key, fact, read.reason)] if fact is not None and fact.text else []


def _numbered(read: Read, facts: Iterable[tuple[int, Fact]]) -> list[Candidate]:
    return [Candidate(read.tier, read.kind, str(n), fact, read.reason) for n, fact in facts]


def _cards(r: Reading, read: Read, planned: bool) -> list[Candidate]:
    return [Candidate(read.tier, read.kind, s.scene_id, s.card, f"{read.reason} of chapter {r.k}")
            for s in r.cards(planned)]


def _tagged(r: Reading, read: Read) -> list[Candidate]:
    """Each scene's tagged keys in force at the chapter; a key not in canon then is listed blocked."""
    scenes, k = r.cards(False), r.k
    r.detail = f"{len(scenes)} scene card(s), {sum(len(s.tags) for s in scenes)} tag(s)"
    wanted = [(scene.scene_id, tag_type, key) for scene in scenes for tag_type, key in sorted(
        scene.tags, key=lambda t: ROLE_TAGS.index(t[0]) if t[0] in ROLE_TAGS else len(ROLE_TAGS))]
    keys = BY_KEY[read.read](r, read)  # every key in ``wanted``
    by_key: dict[str, list[EntryView]] = {}
    for e in r.snap.entries_by_key(r.req.story_id, k, keys) if keys else []:
        by_key.setdefault(e.key, []).append(e)
    out = []
    for scene_id, tag_type, key in wanted:
        kind = TAG_KIND.get(tag_type)
        matches = [e for e in by_key.get(key, []) if kind is None or e.kind == kind]
        reason = f"{read.reason} {tag_type} in scene {scene_id}"
        if not matches:
            out.append(Candidate(read.tier, kind or read.kind, key, Fact("", 0, ()), reason,
                                 blocked=f"not in canon as of chapter {k}"))
        for e in matches:
            out.append(_entry(read.tier, e, reason, k))
            r.tagged.add((e.kind, e.key))
            if e.kind == "character":
                r.characters.append(e)
    return out


def query_texts(r: Reading) -> list[tuple[str, str]]:
    """What the chapter is about, as the author wrote it, each with where it is: the goals,
    then each scene card's summary (of ``req.scene`` alone when one is asked for)."""
    chapter = r.get("chapter")
    goals = [("the chapter goals", g) for g in chapter.goal_items] if chapter else []
    return [*goals, *((f"scene {s.scene_id}", s.summary) for s in r.cards(False) if s.summary)]


V = TypeVar("V")


def _in_force(r: Reading, read: Read, value: Callable[[EntryView], V | None]) -> list[tuple[EntryView, V]]:
    """Of the entries named by the keys ``read`` reads (``BY_KEY``), those whose step in force at
    the chapter is shown then (not retired, not hidden) and has a ``value`` (not None), each
    with it, in (kind, key) order. Read by key: an entry of any kind with one of those keys is
    read, so ``value`` says which are wanted."""
    keys = BY_KEY[read.read](r, read)
    found = r.snap.entries_by_key(r.req.story_id, r.k, keys) if keys else []
    return [(e, v) for e in found
            if not e.retired and _hidden(e, r.k) is None and (v := value(e)) is not None]


def _mentions(r: Reading, read: Read) -> Mentions:
    """What the goals, the scene summaries and the draft under review mention."""
    texts = query_texts(r) + ([("the draft under review", r.draft.text)] if r.draft is not None else [])
    mentions: Mentions = r.get("lore").mentions(texts, spaceless=read.spaceless)
    return mentions


def _constant(r: Reading) -> dict[tuple[str, str, int], Always]:
    """The always-on steps, by (kind, key, step)."""
    return {(a.kind, a.key, a.step): a for a in r.get("lore").constant}


def _untagged(r: Reading, mentions: Mentions) -> Callable[[EntryView], Mention | None]:
    """The mention of an entry's step: None for a step not mentioned, or an entry a tag brought in."""
    return lambda e: None if (e.kind, e.key) in r.tagged else mentions.of(e.kind, e.key, e.step)


def _mentioned(r: Reading, read: Read) -> list[Candidate]:
    """Entries in force whose keys the goals, the scene summaries or the draft under review
    mention (no tag named them)."""
    return [_entry(read.tier, e, f'{read.reason} in {m.where} as "{m.said}"', r.k)
            for e, m in _in_force(r, read, _untagged(r, _mentions(r, read)))]


def _always(r: Reading, read: Read) -> list[Candidate]:
    """Entries in force whose rule includes them in every packet, at the tier it names."""
    steps = _constant(r)
    return [_entry(cast(Tier, a.tier), e, read.reason, r.k)
            for e, a in _in_force(r, read, lambda e: steps.get(_step(e)))]


def _step(e: EntryView) -> tuple[str, str, int]:
    return (e.kind, e.key, e.step)


def _lore(r: Reading, read: Read) -> list[Candidate]:
    """The entries in force that their rule brings in: those whose keys the goals, the scene
    summaries or the draft under review mention (``LORE`` only; none a tag brought) and the
    always-on ones (at their rule's tier), in their rules' order (higher first), a mentioned
    one before an always-on one of the same order (the scene's own lore first: always-on
    entries must not starve it under a lore cap), mentions as they come in the texts. Each
    counts against the story's lore cap unless its rule ignores the budget. One hidden at the
    chapter is not listed (as compilers 5 and 6: its key, in a packet, could be the reveal)."""
    always = {step: ((-a.order, 1, (0, 0)), a.tier, "always on", not a.ignore_budget)
              for step, a in _constant(r).items()}  # step -> rank, tier, reason, capped
    mention = _untagged(r, _mentions(r, read)) if read.read == LORE else lambda e: None

    def ranked(e: EntryView) -> tuple[tuple[Any, ...], Any, str, bool] | None:
        """A mention first; else the step's always-on rule; else None."""
        m = mention(e)
        if m is None:
            return always.get(_step(e))
        return (-m.order, 0, m.at), "P1", f'mentioned in {m.where} as "{m.said}"', not m.ignore_budget

    picked = []
    for e, (rank, tier, reason, capped) in _in_force(r, read, ranked):
        candidate = _entry(tier, e, reason + ("" if capped else " (outside the lore cap, as its source asks)"), r.k)
        candidate.lore = capped
        picked.append((rank, e.kind, e.key, candidate))
    return [c for *_, c in sorted(picked, key=lambda p: p[:3])]


def _keys(entries: Iterable[tuple[Any, ...]]) -> tuple[str, ...]:
    """The keys of (kind, key, ...) ``entries``, sorted, each once."""
    return tuple(sorted({e[1] for e in entries}))


# The reads that read entries by key (``CanonSnapshot.entries_by_key``), each with the keys it
# reads, known once the reads before it in its recipe are made: ``Reading.whole`` fetches them
# together, and each read asks for the same keys. An entry a tag brought in is read again by
# the reads by rule (and left out by them): their keys do not wait for the tagged read. An entry
# whose mentioned steps all take effect after the chapter is not read: none is in force then.
ByKey = Callable[[Reading, Read], tuple[str, ...]]
BY_KEY: dict[str, ByKey] = {
    "tagged entries": lambda r, read: tuple(sorted({key for s in r.cards(False) for _, key in s.tags})),
    "mentioned entries": lambda r, read: _keys(_mentions(r, read).by(r.k)),
    ALWAYS: lambda r, read: _keys(_constant(r)),
    LORE: lambda r, read: _keys([*_mentions(r, read).by(r.k), *_constant(r)]),
    LORE_ALWAYS: lambda r, read: _keys(_constant(r)),
}


def _timeline(r: Reading, read: Read) -> list[Candidate]:
    timeline = [e for e in r.get("timeline") if not e.retired]
    return [_entry(read.tier, e, read.reason, r.k) for e in sorted(timeline, key=lambda e: (-e.valid_from, e.key))]


def _history(r: Reading, read: Read) -> list[Candidate]:
    k, characters = r.k, r.characters
    steps = r.snap.superseded_steps(r.req.story_id, k, "character", tuple(c.key for c in characters), HISTORY_STEPS)
    return [Candidate(read.tier, read.kind, f"{c.key}@{old.valid_from}", old.fact,
                      f"{read.reason} of {c.key}, superseded from chapter {c.valid_from}",
                      _hidden(old, k) if read.hides else None)
            for c in characters for old in steps.get(c.key, [])]


def _chains(r: Reading, read: Read) -> list[Candidate]:
    k, out = r.k, []
    for node in r.snap.chain_nodes(r.req.story_id, k):
        blocked = f"hidden until chapter {node.hidden_until}" if hidden_at(node.hidden_until, k) else None
        out.append(Candidate(read.tier, read.kind, f"{node.chain}/{node.node_id}", node.fact,
                             f"{read.reason} {node.chain} ({node.node_kind})", blocked))
    return out


def _ending(r: Reading, read: Read) -> list[Candidate]:
    """The last ``render.ENDING_TOKENS`` of chapter K-1's accepted text, from a sentence's start;
    nothing when K-1 has no accepted text (not planned yet, or not written)."""
    previous: ChapterView | None = r.get("previous chapter") if r.k > 1 else None
    if previous is None or previous.text is None or not previous.text.text:
        return []
    accepted = previous.text.text.removeprefix(render.chapter_text(r.k - 1, ""))
    text = render.ending(r.k - 1, accepted, render.ENDING_TOKENS, r.tokens)
    return _one(read, str(r.k - 1), Fact(text, r.tokens.count(text), previous.text.sources))


def _chapter_text(r: Reading, read: Read) -> list[Candidate]:
    if (text := r.planned().text) is None:
        raise NotFound("chapter_has_no_accepted_text", f"chapter {r.k} has no accepted draft to summarise", "chapter")
    return _one(read, str(r.k), text)


def _role_lists(r: Reading, read: Read) -> list[Candidate]:
    """The names the summary must use: the chapter's tagged characters, locations and items,
    but (``read.hides``) none hidden at the chapter: a name can be the reveal (the tagged
    entries list such an entry dropped, without its text)."""
    scenes = r.get("scenes")
    r.detail = f"{len(scenes)} scene card(s) for role lists"
    keys = tuple(sorted({key for s in scenes for t, key in s.tags if t in TAG_KIND and t != "threads"}))
    entries = [e for e in r.snap.entries_by_key(r.req.story_id, r.k, keys)
               if not e.retired and not (read.hides and _hidden(e, r.k))] if keys else []
    text = render.role_lists(entries)
    sources = tuple(sorted({s for e in entries for s in e.fact.sources}))
    return _one(read, str(r.k), Fact(text, r.tokens.count(text) if text else 0, sources))


def _draft(r: Reading, read: Read) -> list[Candidate]:
    """The draft under review, whole and labelled as unconfirmed, sourced at its submission."""
    if r.draft is None:
        return []
    text = render.draft_under_review(r.draft.draft_id, r.draft.chapter, r.draft.text)
    return _one(read, r.draft.draft_id, Fact(text, r.tokens.count(text), (r.draft.position,)))


def _findings(r: Reading, read: Read) -> list[Candidate]:
    """The continuity check's findings on the draft under review (``application.continuity``),
    each sourced at the canon events that prove it and the draft's submission; the text of a
    proof hidden at the chapter or not yet in force is withheld (``Finding.withheld``)."""
    if r.draft is None:
        return []
    out = []
    for found in continuity.findings(r.snap, r.req.story_id, r.draft):
        f = found.withheld(r.k)  # a worker's packet: no text of canon hidden or not yet in force
        text = render.continuity_finding(f)
        sources = tuple(sorted({r.draft.position, *(e.source for e in f.evidence)}))
        out.append(Candidate(read.tier, read.kind, f.id, Fact(text, r.tokens.count(text), sources), read.reason))
    return out


def _story(r: Reading, read: Read) -> list[Candidate]:
    title = render.story_title(r.story.title, r.story.story_id)
    return _one(read, r.story.story_id, Fact(title, r.tokens.count(title), r.story.guardrails.sources))


Source = Callable[[Reading, Read], list[Candidate]]
# Each read by name: the request-only port reads it makes (``FETCH``'s names), and the read.
# A paged read (``Read.page``) needs none: it reads entries of its kind (``Reading.pages``).
SOURCES: dict[str, tuple[tuple[str, ...], Source]] = {
    "scene cards": (("chapter", "scenes"), lambda r, read: _cards(r, read, True)),
    "scene cards, if planned": (("chapter", "scenes"), lambda r, read: _cards(r, read, False)),
    "chapter goals": (("chapter",), lambda r, read: _one(read, str(r.k), r.get("chapter") and r.get("chapter").goals)),
    "style guardrails": ((), lambda r, read: _one(read, r.story.story_id, r.story.guardrails)),
    "output contract": ((), lambda r, read: _one(read, r.story.story_id, r.story.contract)),
    "tagged entries": (("chapter", "scenes"), _tagged),
    "active threads": (("threads",), lambda r, read: [_entry(read.tier, e, read.reason, r.k) for e in r.get("threads")]),
    "previous chapter ending": (("previous chapter",), _ending),
    "recent chapter summaries": (("recent summaries",), lambda r, read: _numbered(read, reversed(r.get("recent summaries")))),
    "latest chapter summaries": (("latest summaries",), lambda r, read: _numbered(read, reversed(r.get("latest summaries")))),
    "volume summaries": (("volumes",), lambda r, read: _numbered(read, reversed(r.get("volumes")))),
    "current volume summary": (("chapter", "volumes"), lambda r, read: _numbered(
        read, [(v, f) for v, f in r.get("volumes") if v == r.volume()])),
    "earlier volume summaries": (("chapter", "volumes"), lambda r, read: _numbered(
        read, [(v, f) for v, f in reversed(r.get("volumes")) if r.volume() is None or v < r.volume()])),
    "recent timeline": (("timeline",), _timeline),
    "earlier character states": ((), _history),
    "development chains": ((), _chains),
    "chapter text": (("chapter",), _chapter_text),
    "role lists": (("scenes",), _role_lists),
    "story": ((), _story),
    REVIEW: ((), _draft),
    CONTINUITY: (("lore",), _findings),
    "mentioned entries": (("chapter", "scenes", "lore"), _mentioned),
    ALWAYS: (("lore",), _always),
    LORE: (("chapter", "scenes", "lore"), _lore),
    LORE_ALWAYS: (("lore",), _lore),
}


@cache
def staged(recipe: Recipe) -> tuple[list[Read], list[Read], Read | None]:
    """The reads made at once, those made only while the budget has room, and L1 retrieval."""
    l1 = recipe[-1] if recipe and recipe[-1].read == RETRIEVAL else None
    rest = recipe[:-1] if l1 else recipe
    return [r for r in rest if not r.while_room], [r for r in rest if r.while_room], l1


def first_reads(recipe: Recipe, req: Request) -> list[Call]:
    """The reads a recipe makes whatever the canon holds, as the reads make them: the story,
    what each read made at once needs, and the first page of each paged read."""
    first, later, _ = staged(recipe)
    needs = dict.fromkeys(name for read in first if not read.page for name in SOURCES[read.read][0])
    pages = [read for read in (*first, *later) if read.page]
    return [Call("story", (req.story_id,)), *(FETCH[name](req) for name in needs), *(_page(req, p, "") for p in pages)]


def check(recipes: dict[str, Recipe]) -> dict[str, Recipe]:
    """Refuses, at import, a recipe table out of step with the domain's roles or its sources."""
    if tuple(recipes) != ROLES:
        raise ValueError(f"recipes are for {tuple(recipes)}, the domain's roles are {ROLES}")
    for recipe in recipes.values():
        for read in recipe:
            if read.page and read.kind == "canon" or not (read.page or read.read in SOURCES or read is staged(recipe)[2]):
                raise ValueError(f"no source for the read {read.read!r} (L1 retrieval comes last)")
    return recipes


check(RECIPES)
