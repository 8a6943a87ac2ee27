"""What each read of a recipe reads: one source per read (``reading.source``), each naming the
port reads it makes (``fetches``) and, for a read of entries by key, the keys it reads.

A recipe line names its source (``recipes.RECIPES``); from the source, ``r.get(fetches.x)``
and ``r.snap.x(...)`` go to the port's method (``ports.CanonSnapshot``), and from there to the
store's (``projections.canon_view.SqlCanonSnapshot``) and its statements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from canon_ledger.application import continuity
from canon_ledger.application.packets import fetches, render
from canon_ledger.application.packets.ports import Always, EntryView, Fact, Mention, Mentions
from canon_ledger.application.packets.reading import (Candidate, Read, Reading, entry, from_where, hidden, numbered,
                                                      one, source)
from canon_ledger.domain.errors import NotFound
from canon_ledger.domain.scene_tags import ROLE_LISTS, TAG_LIST, TAG_LISTS
from canon_ledger.domain.tiers import P1, Tier

HISTORY_STEPS = 3  # earlier states per tagged character: the latest shifts, not the whole life
V = TypeVar("V")


# -- P0: what the packet is for -----------------------------------------------------------------

def _cards(r: Reading, read: Read, planned: bool) -> list[Candidate]:
    return [Candidate(read.tier, read.kind, s.scene_id, s.card, f"{read.reason} of chapter {r.chapter}")
            for s in r.cards(planned)]


@source(fetches.chapter, fetches.scenes)
def scene_cards(r: Reading, read: Read) -> list[Candidate]:
    """The chapter's scene cards (or ``req.scene``'s); the chapter must be planned."""
    return _cards(r, read, True)


@source(fetches.chapter, fetches.scenes)
def scene_cards_if_planned(r: Reading, read: Read) -> list[Candidate]:
    """The chapter's scene cards (or ``req.scene``'s), none when it is not planned (the planner)."""
    return _cards(r, read, False)


@source(fetches.chapter)
def chapter_goals(r: Reading, read: Read) -> list[Candidate]:
    chapter = r.get(fetches.chapter)
    return one(read, str(r.chapter), chapter.goals if chapter else None)


@source()
def style_guardrails(r: Reading, read: Read) -> list[Candidate]:
    return one(read, r.story.story_id, r.story.guardrails)


@source()
def output_contract(r: Reading, read: Read) -> list[Candidate]:
    return one(read, r.story.story_id, r.story.contract)


@source()
def story(r: Reading, read: Read) -> list[Candidate]:
    title = render.story_title(r.story.title, r.story.story_id)
    return one(read, r.story.story_id, Fact(title, r.tokens.count(title), r.story.guardrails.sources))


@source(fetches.chapter)
def chapter_text(r: Reading, read: Read) -> list[Candidate]:
    if (text := r.planned().text) is None:
        raise NotFound("chapter_has_no_accepted_text", f"chapter {r.chapter} has no accepted draft to summarise",
                       "chapter")
    return one(read, str(r.chapter), text)


@source()
def draft_under_review(r: Reading, read: Read) -> list[Candidate]:
    """The draft under review, whole and labelled as unconfirmed, sourced at its submission. A
    recipe with this read may be asked for a packet holding one submitted draft (``Request.draft``)."""
    if r.draft is None:
        return []
    text = render.draft_under_review(r.draft.draft_id, r.draft.chapter, r.draft.text)
    return one(read, r.draft.draft_id, Fact(text, r.tokens.count(text), (r.draft.position,)))


@source(fetches.lore)
def continuity_findings(r: Reading, read: Read) -> list[Candidate]:
    """The continuity check's findings on the draft under review (``application.continuity``),
    each sourced at the canon events that prove it and the draft's submission; the text of a
    proof hidden at the chapter or not yet in force is withheld (``Finding.withheld``)."""
    if r.draft is None:
        return []
    out = []
    for found in continuity.findings(r.snap, r.req.story_id, r.draft):
        f = found.withheld(r.chapter)  # a worker's packet: no text of canon hidden or not yet in force
        text = render.continuity_finding(f)
        sources = tuple(sorted({r.draft.position, *(e.source for e in f.evidence)}))
        out.append(Candidate(read.tier, read.kind, f.id, Fact(text, r.tokens.count(text), sources), read.reason))
    return out


# -- P1: the entries a scene names, and the open threads ----------------------------------------

def tagged_keys(r: Reading, read: Read) -> tuple[str, ...]:
    """Every key the scene cards asked for tag, sorted, each once."""
    return tuple(sorted({key for s in r.cards(False) for _, key in s.tags}))


_UNLISTED = len(TAG_LISTS)  # a tag list the table does not know sorts last


@source(fetches.chapter, fetches.scenes, keys=tagged_keys)
def tagged_entries(r: Reading, read: Read) -> list[Candidate]:
    """Each scene's tagged keys in force at the chapter, each scene's tags in their lists'
    packet order (``scene_tags.IN_PACKET``); a key not in canon then is listed blocked."""
    scenes, chapter = r.cards(False), r.chapter
    r.detail = f"{len(scenes)} scene card(s), {sum(len(s.tags) for s in scenes)} tag(s)"
    wanted = [(scene.scene_id, tag_type, key) for scene in scenes for tag_type, key in sorted(
        scene.tags, key=lambda t: TAG_LIST[t[0]].packet_rank if t[0] in TAG_LIST else _UNLISTED)]
    keys = tagged_keys(r, read)  # every key in ``wanted``
    by_key: dict[str, list[EntryView]] = {}
    for e in r.snap.entries_by_key(r.req.story_id, chapter, keys) if keys else []:
        by_key.setdefault(e.key, []).append(e)
    out = []
    for scene_id, tag_type, key in wanted:
        kind = TAG_LIST[tag_type].kind if tag_type in TAG_LIST else None
        matches = [e for e in by_key.get(key, []) if kind is None or e.kind == kind]
        reason = f"{read.reason} {tag_type} in scene {scene_id}"
        if not matches:
            out.append(Candidate(read.tier, kind or read.kind, key, Fact("", 0, ()), reason,
                                 blocked=f"not in canon as of chapter {chapter}"))
        for e in matches:
            out.append(entry(read.tier, e, reason, chapter))
            r.tagged.add((e.kind, e.key))
            if e.kind == "character":
                r.characters.append(e)
    return out


@source(fetches.active_threads)
def active_threads(r: Reading, read: Read) -> list[Candidate]:
    """The threads in force at the chapter that are neither retired nor resolved."""
    return [entry(read.tier, e, read.reason, r.chapter) for e in r.get(fetches.active_threads)]


@source(fetches.scenes)
def role_lists(r: Reading, read: Read) -> list[Candidate]:
    """The names the summary must use: the chapter's tagged entries of the role lists
    (``scene_tags.ROLE_LISTS``: characters, locations, items), but (``read.hides``) none hidden
    at the chapter: a name can be the reveal (the tagged entries list such an entry dropped,
    without its text)."""
    scenes = r.get(fetches.scenes)
    r.detail = f"{len(scenes)} scene card(s) for role lists"
    named = {t.name for t in ROLE_LISTS}
    keys = tuple(sorted({key for s in scenes for t, key in s.tags if t in named}))
    entries = [e for e in r.snap.entries_by_key(r.req.story_id, r.chapter, keys)
               if not e.retired and not (read.hides and hidden(e, r.chapter))] if keys else []
    text = render.role_lists(entries)
    sources = tuple(sorted({s for e in entries for s in e.fact.sources}))
    return one(read, str(r.chapter), Fact(text, r.tokens.count(text) if text else 0, sources))


# -- P1: the entries their recall rule brings in (lore) -----------------------------------------

def query_texts(r: Reading) -> list[tuple[str, str]]:
    """What the chapter is about, as the author wrote it, each with where it is: the goals,
    then each scene card's summary (of ``req.scene`` alone when one is asked for)."""
    chapter = r.get(fetches.chapter)
    goals = [("the chapter goals", g) for g in chapter.goal_items] if chapter else []
    return [*goals, *((f"scene {s.scene_id}", s.summary) for s in r.cards(False) if s.summary)]


def mentions(r: Reading, read: Read) -> Mentions:
    """What the goals, the scene summaries and the draft under review mention."""
    texts = query_texts(r) + ([("the draft under review", r.draft.text)] if r.draft is not None else [])
    return r.get(fetches.lore).mentions(texts, spaceless=read.spaceless)


def constant(r: Reading) -> dict[tuple[str, str, int], Always]:
    """The always-on steps, by (kind, key, step)."""
    return {(a.kind, a.key, a.step): a for a in r.get(fetches.lore).constant}


def untagged(r: Reading, found: Mentions) -> Callable[[EntryView], Mention | None]:
    """The mention of an entry's step: None for a step not mentioned, or an entry a tag brought in."""
    return lambda e: None if (e.kind, e.key) in r.tagged else found.of(e.kind, e.key, e.step)


def step_of(e: EntryView) -> tuple[str, str, int]:
    return (e.kind, e.key, e.step)


def keys_of(entries: Iterable[tuple[Any, ...]]) -> tuple[str, ...]:
    """The keys of (kind, key, ...) ``entries``, sorted, each once."""
    return tuple(sorted({e[1] for e in entries}))


def entries_in_force(r: Reading, read: Read, value: Callable[[EntryView], V | None]) -> list[tuple[EntryView, V]]:
    """Of the entries named by the keys ``read`` reads (its source's ``keys``), those whose step
    in force at the chapter is shown then (not retired, not hidden) and has a ``value`` (not
    None), each with it, in (kind, key) order. Read by key: an entry of any kind with one of
    those keys is read, so ``value`` says which are wanted. Each read by rule asks for the keys
    ``Reading.whole`` fetched them together by: an entry a tag brought in is read again (and
    left out here), and an entry whose mentioned steps all take effect after the chapter is not
    read (none is in force then)."""
    keys = read.source.keys(r, read) if read.source is not None and read.source.keys is not None else ()
    found = r.snap.entries_by_key(r.req.story_id, r.chapter, keys) if keys else []
    return [(e, v) for e in found
            if not e.retired and hidden(e, r.chapter) is None and (v := value(e)) is not None]


def _by_rule(r: Reading, read: Read, mentioned: bool) -> list[Candidate]:
    """The entries in force that their rule brings in: those whose keys the goals, the scene
    summaries or the draft under review mention (when ``mentioned``; none a tag brought) and the
    always-on ones (at their rule's tier), in their rules' order (higher first), a mentioned
    one before an always-on one of the same order (the scene's own lore first: always-on
    entries must not starve it under a lore cap), mentions as they come in the texts. Each
    counts against the story's lore cap unless its rule ignores the budget. One hidden at the
    chapter is not listed (as compilers 5 and 6: its key, in a packet, could be the reveal)."""
    always = {step: ((-a.order, 1, (0, 0)), a.tier, "always on", not a.ignore_budget)
              for step, a in constant(r).items()}  # step -> rank, tier, reason, capped
    mention = untagged(r, mentions(r, read)) if mentioned else lambda e: None

    def ranked(e: EntryView) -> tuple[tuple[Any, ...], Any, str, bool] | None:
        """A mention first; else the step's always-on rule; else None."""
        m = mention(e)
        if m is None:
            return always.get(step_of(e))
        return (-m.order, 0, m.at), P1, f'mentioned in {m.where} as "{m.said}"', not m.ignore_budget

    picked = []
    for e, (rank, tier, reason, capped) in entries_in_force(r, read, ranked):
        candidate = entry(cast(Tier, tier), e,
                          reason + ("" if capped else " (outside the lore cap, as its source asks)"), r.chapter)
        candidate.lore = capped
        picked.append((rank, e.kind, e.key, candidate))
    return [c for *_, c in sorted(picked, key=lambda p: p[:3])]


def lore_keys(r: Reading, read: Read) -> tuple[str, ...]:
    return keys_of([*mentions(r, read).by(r.chapter), *constant(r)])


def always_on_keys(r: Reading, read: Read) -> tuple[str, ...]:
    return keys_of(constant(r))


@source(fetches.chapter, fetches.scenes, fetches.lore, keys=lore_keys, rules=True)
def lore_entries(r: Reading, read: Read) -> list[Candidate]:
    """The mentioned and the always-on entries together, under the story's lore cap (``_by_rule``)."""
    return _by_rule(r, read, mentioned=True)


@source(fetches.lore, keys=always_on_keys, rules=True)
def always_on_lore(r: Reading, read: Read) -> list[Candidate]:
    """The always-on entries alone, under the story's lore cap (``_by_rule``): chat, the summarizer."""
    return _by_rule(r, read, mentioned=False)


# -- P2: recent context -------------------------------------------------------------------------

@source(fetches.previous_chapter)
def previous_chapter_ending(r: Reading, read: Read) -> list[Candidate]:
    """The last ``render.ENDING_TOKENS`` of chapter K-1's accepted text, from a sentence's start;
    nothing when K-1 has no accepted text (not planned yet, or not written)."""
    previous = r.get(fetches.previous_chapter) if r.chapter > 1 else None
    if previous is None or previous.text is None or not previous.text.text:
        return []
    accepted = previous.text.text.removeprefix(render.chapter_text(r.chapter - 1, ""))
    text = render.ending(r.chapter - 1, accepted, render.ENDING_TOKENS, r.tokens)
    return one(read, str(r.chapter - 1), Fact(text, r.tokens.count(text), previous.text.sources))


@source(fetches.recent_summaries)
def recent_chapter_summaries(r: Reading, read: Read) -> list[Candidate]:
    summaries = r.get(fetches.recent_summaries)
    return numbered(read, reversed(summaries))


@source(fetches.latest_summaries)
def latest_chapter_summaries(r: Reading, read: Read) -> list[Candidate]:
    summaries = r.get(fetches.latest_summaries)
    return numbered(read, reversed(summaries))


@source(fetches.volumes)
def volume_summaries(r: Reading, read: Read) -> list[Candidate]:
    volumes = r.get(fetches.volumes)
    return numbered(read, reversed(volumes))


@source(fetches.chapter, fetches.volumes)
def current_volume_summary(r: Reading, read: Read) -> list[Candidate]:
    return numbered(read, [(v, f) for v, f in r.get(fetches.volumes) if v == r.volume()])


@source(fetches.recent_timeline)
def recent_timeline(r: Reading, read: Read) -> list[Candidate]:
    """The recent timeline events, the latest first."""
    timeline = [e for e in r.get(fetches.recent_timeline) if not e.retired]
    return [entry(read.tier, e, read.reason, r.chapter) for e in sorted(timeline, key=lambda e: (-e.valid_from, e.key))]


# -- P3 and P4: distant reference, supplementary --------------------------------------------------

@source(fetches.chapter, fetches.volumes)
def earlier_volume_summaries(r: Reading, read: Read) -> list[Candidate]:
    volume, volumes = r.volume(), r.get(fetches.volumes)
    return numbered(read, [(v, f) for v, f in reversed(volumes) if volume is None or v < volume])


@source()
def earlier_character_states(r: Reading, read: Read) -> list[Candidate]:
    """The HISTORY_STEPS latest earlier states of each tagged character; one hidden at the
    chapter is listed without its text when ``read.hides``."""
    chapter, characters = r.chapter, r.characters
    steps = r.snap.superseded_steps(r.req.story_id, chapter, "character", tuple(c.key for c in characters),
                                    HISTORY_STEPS)
    return [Candidate(read.tier, read.kind, f"{c.key}@{old.valid_from}", old.fact,
                      f"{read.reason} of {c.key}, superseded from chapter {c.valid_from}{from_where(old.origin)}",
                      hidden(old, chapter) if read.hides else None)
            for c in characters for old in steps.get(c.key, [])]


@source()
def development_chains(r: Reading, read: Read) -> list[Candidate]:
    """The nodes of every chain in force; one hidden at the chapter is listed without its text."""
    return [Candidate(read.tier, read.kind, f"{node.chain}/{node.node_id}", node.fact,
                      f"{read.reason} {node.chain} ({node.node_kind}){from_where(node.origin)}", hidden(node, r.chapter))
            for node in r.snap.chain_nodes(r.req.story_id, r.chapter)]
