"""Per-role recipes: which canon facts are candidates, in which tier, in which order.

Tiers follow seed 000: P0 hard constraints, P1 current state, P2 recent context, P3 distant
reference, P4 supplementary. Order within a tier is fill priority.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from canon_ledger.application.packets.ports import CanonSnapshot, ChapterView, EntryView, Fact, StoryView
from canon_ledger.application.packets.packet import Tier
from canon_ledger.domain.errors import NotFound
from canon_ledger.domain.tokens import TokenCounter

ROLE_TAGS = ("characters", "locations", "items", "threads", "callbacks")
TAG_KIND = {"characters": "character", "locations": "location", "items": "item", "threads": "thread"}
RECENT_SUMMARIES = 3
RECENT_TIMELINE = 5
WORLD_RULE_PAGE = 64  # world rules read per statement, while the budget has room
HISTORY_STEPS = 3  # earlier states per tagged character: the latest shifts, not the whole life


# slots, not frozen: built for every candidate of every packet, and a frozen init costs ~4x.
@dataclass(slots=True)
class Candidate:
    tier: Tier
    kind: str
    key: str
    fact: Fact
    reason: str
    blocked: str | None = None  # a reason it may not be packed at all (hidden, not yet canon)
    trimmable: bool = True

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


def _hidden(e: EntryView, chapter: int) -> str | None:
    """Why ``e``'s text may not be shown at ``chapter`` (its ``hidden_until`` is later), or None."""
    return f"hidden until chapter {e.hidden_until}" if e.hidden_until is not None and e.hidden_until > chapter else None


def _entry(tier: Tier, e: EntryView, reason: str, chapter: int) -> Candidate:
    return Candidate(tier, e.kind, e.key, e.fact, reason + (" (retired)" if e.retired else ""), _hidden(e, chapter))


def _hard_constraints(story: StoryView, chapter: ChapterView | None, scenes: list) -> list[Candidate]:
    out = [Candidate("P0", "scene_card", s.scene_id, s.card, f"scene card of chapter {chapter.number}", trimmable=False)
           for s in scenes] if chapter else []
    if chapter and chapter.goals.text:
        out.append(Candidate("P0", "chapter_goals", str(chapter.number), chapter.goals, "chapter goals", trimmable=False))
    if story.guardrails.text:
        out.append(Candidate("P0", "style_guardrails", story.story_id, story.guardrails, "style guardrails", trimmable=False))
    if story.contract.text:
        out.append(Candidate("P0", "output_contract", story.story_id, story.contract, "output contract", trimmable=False))
    return out


def _tagged(snap: CanonSnapshot, story_id: str, k: int, scenes: list) -> tuple[list[Candidate], list[EntryView]]:
    wanted = [(scene.scene_id, tag_type, key) for scene in scenes for tag_type, key in sorted(
        scene.tags, key=lambda t: ROLE_TAGS.index(t[0]) if t[0] in ROLE_TAGS else len(ROLE_TAGS))]
    keys = tuple(sorted({key for _, _, key in wanted}))
    in_force = snap.entries_as_of(story_id, k, keys=keys) if keys else []
    by_key: dict[str, list[EntryView]] = {}
    for e in in_force:
        by_key.setdefault(e.key, []).append(e)
    out, characters = [], []
    for scene_id, tag_type, key in wanted:
        kind = TAG_KIND.get(tag_type)
        matches = [e for e in by_key.get(key, []) if kind is None or e.kind == kind]
        reason = f"tagged {tag_type} in scene {scene_id}"
        if not matches:
            out.append(Candidate("P1", kind or "canon", key, Fact("", 0, ()), reason,
                                 blocked=f"not in canon as of chapter {k}"))
        for e in matches:
            out.append(_entry("P1", e, reason, k))
            if e.kind == "character":
                characters.append(e)
    return out, characters


Read = Callable[[], tuple[list[Candidate], bool]]  # the next page of a later read, and whether more follow


@dataclass
class Staged:
    """A recipe read in stages (compiler 3): ``first`` always, then each of ``later`` (named,
    in tier order) only while the budget has room for it. P0-P2 are always read; P3 "as
    needed" and P4 "if budget remains" (seed 000) come later."""

    first: list[Candidate]
    later: list[tuple[str, Read]]
    detail: str

    def whole(self) -> tuple[list[Candidate], str]:
        out = list(self.first)
        for _, read in self.later:
            more = True
            while more:
                page, more = read()
                out += page
        return out, self.detail


def _once(read: Callable[[], list[Candidate]]) -> Read:
    return lambda: (read(), False)


class _KindPages:
    """The entries of one kind in force at the chapter, in key order, a page at a time: late in
    a serial most of P3's world rules find no room, and are then not read at all."""

    def __init__(self, snap: CanonSnapshot, req: Request, kind: str, tier: Tier, reason: str, size: int) -> None:
        self.snap, self.req, self.kind, self.tier, self.reason, self.size = snap, req, kind, tier, reason, size
        self.after = ""

    def __call__(self) -> tuple[list[Candidate], bool]:
        k = self.req.chapter
        rows = self.snap.entries_as_of(self.req.story_id, k, kinds=(self.kind,),
                                       after=self.after, limit=self.size)
        if rows:
            self.after = rows[-1].key
        return [_entry(self.tier, e, self.reason, k) for e in rows if not e.retired], len(rows) == self.size


def _threads(snap: CanonSnapshot, req: Request) -> list[EntryView]:
    return snap.entries_as_of(req.story_id, req.chapter, kinds=("thread",), active=True)


def _recent_summaries(snap: CanonSnapshot, req: Request) -> list[tuple[int, Fact]]:
    return snap.chapter_summaries(req.story_id, max(1, req.chapter - RECENT_SUMMARIES), req.chapter - 1)


def _recent_timeline(snap: CanonSnapshot, req: Request) -> list[EntryView]:
    return snap.entries_as_of(req.story_id, req.chapter, kinds=("timeline_event",), since=req.chapter - RECENT_TIMELINE)


def _world_rules(snap: CanonSnapshot, req: Request) -> _KindPages:
    return _KindPages(snap, req, "world_rule", "P3", "world rule", WORLD_RULE_PAGE)


def scene_recipe(snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter) -> tuple[list[Candidate], str]:
    """planner, writer and qa, every stage read at once (compilers 1 and 2)."""
    return scene_staged(snap, req, story, tokens, hidden_history=False).whole()


def scene_staged(snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter, *,
                 hidden_history: bool = True) -> Staged:
    """planner, writer and qa: the chapter's scene keys drive the recall. ``hidden_history``
    (compiler 4): an earlier state hidden until a later chapter is listed without its text,
    as every other hidden entry is; compilers 1-3 listed it whole, and replay it so."""
    k = req.chapter
    chapter = snap.chapter(req.story_id, k)
    if chapter is None and req.role != "planner":
        raise NotFound("unknown_chapter", f"chapter {k} of {req.story_id!r} has not been planned", "chapter")
    scenes = snap.scenes(req.story_id, k) if chapter else []
    if req.scene is not None:
        scenes = [s for s in scenes if s.scene_id == req.scene]
        if not scenes:
            raise NotFound("unknown_scene", f"chapter {k} has no scene card {req.scene!r}", "scene")
    out = _hard_constraints(story, chapter, scenes)

    tagged, characters = _tagged(snap, req.story_id, k, scenes)
    out += tagged
    out += [_entry("P1", e, "active thread", k) for e in _threads(snap, req)]

    for n, fact in reversed(_recent_summaries(snap, req)):
        out.append(Candidate("P2", "chapter_summary", str(n), fact, "recent chapter summary"))
    volumes = snap.volume_summaries(req.story_id)
    volume = chapter.volume if chapter else None
    out += [Candidate("P2", "volume_summary", str(v), f, "current volume summary") for v, f in volumes if v == volume]
    timeline = [e for e in _recent_timeline(snap, req) if not e.retired]
    out += [_entry("P2", e, "recent timeline", k) for e in sorted(timeline, key=lambda e: (-e.valid_from, e.key))]

    out += [Candidate("P3", "volume_summary", str(v), f, "earlier volume summary")
            for v, f in reversed(volumes) if volume is None or v < volume]  # read with P2's anyway

    def history() -> list[Candidate]:
        steps = snap.superseded_steps(req.story_id, k, "character", tuple(c.key for c in characters), HISTORY_STEPS)
        return [Candidate("P3", "history", f"{c.key}@{old.valid_from}", old.fact,
                          f"earlier state of {c.key}, superseded from chapter {c.valid_from}",
                          _hidden(old, k) if hidden_history else None)
                for c in characters for old in steps.get(c.key, [])]

    return Staged(out, [("world rules", _world_rules(snap, req)),
                        ("earlier character states", _once(history)),
                        ("development chains", _once(lambda: chain_candidates(snap, req)))],
                  f"{len(scenes)} scene card(s), {sum(len(s.tags) for s in scenes)} tag(s)")


def chain_candidates(snap: CanonSnapshot, req: Request) -> list[Candidate]:
    """P4 from canon: the nodes of the development chains in force at the chapter."""
    k, out = req.chapter, []
    for node in snap.chain_nodes(req.story_id, k):
        blocked = f"hidden until chapter {node.hidden_until}" if node.hidden_until and node.hidden_until > k else None
        out.append(Candidate("P4", "development_chain", f"{node.chain}/{node.node_id}", node.fact,
                             f"development chain {node.chain} ({node.node_kind})", blocked))
    return out


def summarizer_recipe(snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter) -> tuple[list[Candidate], str]:
    """The accepted chapter text plus the role lists it must name; no retrieval."""
    chapter = snap.chapter(req.story_id, req.chapter)
    if chapter is None:
        raise NotFound("unknown_chapter", f"chapter {req.chapter} of {req.story_id!r} has not been planned", "chapter")
    if chapter.text is None:
        raise NotFound("chapter_has_no_accepted_text",
                       f"chapter {req.chapter} has no accepted draft to summarise", "chapter")
    out = [Candidate("P0", "chapter_text", str(chapter.number), chapter.text, "accepted chapter text", trimmable=False)]
    scenes = snap.scenes(req.story_id, req.chapter)
    keys = tuple(sorted({key for s in scenes for t, key in s.tags if t in TAG_KIND and t != "threads"}))
    entries = [e for e in snap.entries_as_of(req.story_id, req.chapter, keys=keys) if not e.retired] if keys else []
    lists = []
    for kind in ("character", "location", "item"):
        names = [f"{e.name} ({e.key})" for e in entries if e.kind == kind]
        if names:
            lists.append(f"{kind}s: {', '.join(names)}")
    if lists:
        text = "Required role lists:\n" + "\n".join(lists)
        sources = tuple(sorted({s for e in entries for s in e.fact.sources}))
        out.append(Candidate("P1", "role_lists", str(chapter.number), Fact(text, tokens.count(text), sources),
                             "names the summary must use"))
    return out, f"{len(scenes)} scene card(s) for role lists"


def _latest_summaries(snap: CanonSnapshot, req: Request) -> list[tuple[int, Fact]]:
    return snap.chapter_summaries(req.story_id, max(1, req.chapter - RECENT_SUMMARIES + 1), req.chapter)


def chat_recipe(snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter) -> tuple[list[Candidate], str]:
    """A light project view for chat and intent routing."""
    title = f"Story: {story.title} ({story.story_id})"
    out = [Candidate("P0", "story", story.story_id, Fact(title, tokens.count(title), (story.guardrails.sources)),
                     "project", trimmable=False)]
    if story.guardrails.text:
        out.append(Candidate("P0", "style_guardrails", story.story_id, story.guardrails, "style guardrails", trimmable=False))
    out += [Candidate("P1", "volume_summary", str(v), f, "project overview") for v, f in reversed(snap.volume_summaries(req.story_id))]
    for n, fact in reversed(_latest_summaries(snap, req)):
        out.append(Candidate("P2", "chapter_summary", str(n), fact, "latest chapter summary"))
    out += [_entry("P3", e, "open thread", req.chapter) for e in _threads(snap, req)]
    return out, "chat reads no scene keys"


Recipe = Callable[[CanonSnapshot, Request, StoryView, TokenCounter], tuple[list[Candidate], str]]
RECIPES: dict[str, Recipe] = {  # compilers 1 and 2: every candidate of every tier
    "planner": scene_recipe,
    "writer": scene_recipe,
    "qa": scene_recipe,
    "summarizer": summarizer_recipe,
    "chat": chat_recipe,
}


def _in_one_stage(recipe: Recipe) -> Callable[[CanonSnapshot, Request, StoryView, TokenCounter], Staged]:
    def staged(snap: CanonSnapshot, req: Request, story: StoryView, tokens: TokenCounter) -> Staged:
        candidates, detail = recipe(snap, req, story, tokens)
        return Staged(candidates, [], detail)
    return staged


# Compiler 3: late in a long serial P0-P2 and the first P3 read spend the budget, and the rest
# was hundreds of rows read only to be listed "dropped: no space" (433 chain nodes at chapter
# 1,000 of the benchmark serial).
STAGED: dict[str, Callable[[CanonSnapshot, Request, StoryView, TokenCounter], Staged]] = {
    "planner": scene_staged, "writer": scene_staged, "qa": scene_staged,
    "summarizer": _in_one_stage(summarizer_recipe), "chat": _in_one_stage(chat_recipe)}
_scene_staged_v3 = partial(scene_staged, hidden_history=False)
STAGED_V3 = {**STAGED, "planner": _scene_staged_v3, "writer": _scene_staged_v3, "qa": _scene_staged_v3}
USES_RETRIEVAL = {"planner", "writer", "qa"}


# The reads each recipe makes whatever the canon holds (the ones whose arguments do not come
# from another read), made through the same helpers, so a store can fetch them together
# (``CanonSnapshot.prefetch``). The first page of world rules is nearly always read.
def _scene_reads(snap: CanonSnapshot, req: Request) -> None:
    snap.story(req.story_id)
    snap.chapter(req.story_id, req.chapter)
    snap.scenes(req.story_id, req.chapter)
    _threads(snap, req)
    _recent_summaries(snap, req)
    snap.volume_summaries(req.story_id)
    _recent_timeline(snap, req)
    _world_rules(snap, req)()


def _summarizer_reads(snap: CanonSnapshot, req: Request) -> None:
    snap.story(req.story_id)
    snap.chapter(req.story_id, req.chapter)
    snap.scenes(req.story_id, req.chapter)


def _chat_reads(snap: CanonSnapshot, req: Request) -> None:
    snap.story(req.story_id)
    snap.volume_summaries(req.story_id)
    _latest_summaries(snap, req)
    _threads(snap, req)


FIRST_READS: dict[str, Callable[[CanonSnapshot, Request], None]] = {
    "planner": _scene_reads, "writer": _scene_reads, "qa": _scene_reads,
    "summarizer": _summarizer_reads, "chat": _chat_reads}
