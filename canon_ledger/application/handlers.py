"""Thin command handlers: load aggregates, let the domain decide, hand back what changed.

Each handler raises a ``CanonError`` before any aggregate is changed, so a refused command
leaves the unit of work as it found it. A command whose outcome is the state already (the same
story started again, the summary a chapter has) decides no events: the ledger answers it
``unchanged``. A repeat that differs from that state is refused by the rule it breaks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from canon_ledger.application.unit_of_work import UnitOfWork
from canon_ledger.domain import commands as c
from canon_ledger.domain import ids
from canon_ledger.domain.canon import KINDS, CanonEntry, CanonProposal, confirm_proposal, require_knowable
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.chunking import chunk_document
from canon_ledger.domain.document import Document, document_of_chunk
from canon_ledger.domain.draft import Draft, accept_into
from canon_ledger.domain.errors import NotFound, RuleViolated, unknown_series, unknown_story
from canon_ledger.domain.scene_tags import TAG_KINDS, TAG_LISTS
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.domain.series import BIBLE, BOOK, Series, canon_homes
from canon_ledger.domain.story import Story, with_default_budgets
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.volume import Volume


def _story(uow: UnitOfWork, story_id: str) -> Story:
    story = uow.get(Story, ids.story_id(story_id))
    if story is None:
        raise unknown_story(story_id)
    return story


def _chapter(uow: UnitOfWork, story_id: str, number: int) -> Chapter:
    chapter = uow.get(Chapter, ids.chapter_id(story_id, number))
    if chapter is None:
        raise NotFound("unknown_chapter", f"chapter {number} of {story_id!r} has not been planned", "chapter")
    return chapter


def _proposal(uow: UnitOfWork, story_id: str, proposal_id: str) -> CanonProposal:
    proposal = uow.get(CanonProposal, ids.proposal_id(story_id, proposal_id))
    if proposal is None:
        raise NotFound("unknown_proposal", f"proposal {proposal_id!r} does not exist in {story_id!r}", "proposal_id")
    return proposal


def _draft(uow: UnitOfWork, story_id: str, draft_id: str) -> Draft:
    draft = uow.get(Draft, ids.draft_id(story_id, draft_id))
    if draft is None:
        raise NotFound("unknown_draft", f"draft {draft_id!r} does not exist in {story_id!r}", "draft_id")
    return draft


def _made_already(existing: Any, different: RuleViolated, **made: Any) -> bool:
    """Whether what a creating command would make exists already: True when ``existing`` has
    every attribute in ``made`` (the command changes nothing); ``different`` refuses it when
    ``existing`` differs; False when there is none."""
    if existing is None:
        return False
    if any(getattr(existing, name) != value for name, value in made.items()):
        raise different
    return True


def _homes(uow: UnitOfWork, story: Story) -> list[str]:
    """Where the story's canon is looked up (``series.canon_homes``): itself, then, for a book,
    its series' bible and earlier books."""
    series = uow.get(Series, ids.series_id(story.series)) if story.series is not None else None
    return canon_homes(story.story_id, series)


def _is_confirmed(uow: UnitOfWork, story: Story, kinds: tuple[str, ...], key: str) -> bool:
    """Is ``key`` confirmed canon of one of ``kinds`` in the story or where it inherits from?"""
    return any(uow.get(CanonEntry, ids.canon_entry_id(home, kind, key)) is not None
               for home in _homes(uow, story) for kind in kinds)


def _character_in_canon(uow: UnitOfWork, story: Story, key: str, chapter: int) -> bool:
    """Is ``key`` a confirmed character in canon at ``chapter`` (a version in force, not retired):
    the story's own character if it has one, else the one it inherits, as it stands at the end of
    its bible or earlier book."""
    for home in _homes(uow, story):
        character = uow.get(CanonEntry, ids.canon_entry_id(home, "character", key))
        if character is not None:
            return character.in_canon_at(chapter if home == story.story_id else MAX_CHAPTER)
    return False


def start_story(cmd: c.StartStory, uow: UnitOfWork) -> None:
    if _made_already(
        uow.get(Story, ids.story_id(cmd.story_id)),
        RuleViolated("story_id_must_be_unique", f"story {cmd.story_id!r} already exists, started otherwise", "story_id"),
        title=cmd.title, style_guardrails=list(cmd.style_guardrails), output_contract=cmd.output_contract,
        budgets=with_default_budgets(dict(cmd.budgets)),
    ):
        return
    uow.add(Story.start(cmd.story_id, cmd.title, cmd.style_guardrails, cmd.output_contract, dict(cmd.budgets)))


def plan_chapter(cmd: c.PlanChapter, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    if _made_already(
        uow.get(Chapter, ids.chapter_id(cmd.story_id, cmd.chapter)),
        RuleViolated(
            "chapter_number_must_be_unique",
            f"chapter {cmd.chapter} of {cmd.story_id!r} is already planned, with another volume or goals",
            "chapter",
        ),
        volume=cmd.volume, goals=list(cmd.goals),
    ):
        return
    uow.add(Chapter.plan(cmd.story_id, cmd.chapter, cmd.volume, cmd.goals))


def add_scene_card(cmd: c.AddSceneCard, uow: UnitOfWork) -> None:
    story = _story(uow, cmd.story_id)
    chapter = _chapter(uow, cmd.story_id, cmd.chapter)
    tags = {t.name: list(getattr(cmd, t.name)) for t in TAG_LISTS}
    for name, keys in tags.items():
        kinds = TAG_KINDS.get(name, KINDS)
        for key in keys:
            if not _is_confirmed(uow, story, kinds, key):
                raise RuleViolated(
                    "scene_card_tags_must_be_confirmed_canon",
                    f"{name} tag {key!r} names no confirmed {kinds[0] if len(kinds) == 1 else 'canon'} entry",
                    name,
                )
    if cmd.pov is not None and not _character_in_canon(uow, story, cmd.pov, cmd.chapter):
        raise RuleViolated("unknown_pov_character",
                           f"pov {cmd.pov!r} names no confirmed character in canon at chapter {cmd.chapter}", "pov")
    chapter.add_scene_card(cmd.scene_id, cmd.summary, tags, cmd.pov)


def propose_canon(cmd: c.ProposeCanon, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    proposal = dict(kind=cmd.kind, key=cmd.key, name=cmd.name, aliases=list(cmd.aliases), text=cmd.text,
                    fields=dict(cmd.fields), tags=list(cmd.tags), valid_from=cmd.valid_from)
    if _made_already(
        uow.get(CanonProposal, ids.proposal_id(cmd.story_id, cmd.proposal_id)),
        RuleViolated("proposal_id_must_be_unique", f"proposal {cmd.proposal_id!r} already exists, proposing otherwise",
                     "proposal_id"),
        **proposal,
    ):
        return
    uow.add(CanonProposal.propose(story_id=cmd.story_id, proposal_id=cmd.proposal_id, **proposal))


def confirm_canon(cmd: c.ConfirmCanon, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    proposal = _proposal(uow, cmd.story_id, cmd.proposal_id)
    entry = uow.get(CanonEntry, ids.canon_entry_id(cmd.story_id, proposal.kind, proposal.key))
    confirmed = confirm_proposal(proposal, entry)
    if confirmed is not None:
        uow.add(confirmed)


def reject_canon(cmd: c.RejectCanon, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    _proposal(uow, cmd.story_id, cmd.proposal_id).reject(cmd.reason)


def retire_canon(cmd: c.RetireCanon, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    entry = uow.get(CanonEntry, ids.canon_entry_id(cmd.story_id, cmd.kind, cmd.key))
    if entry is None:
        raise NotFound("unknown_canon_entry", f"no confirmed {cmd.kind} {cmd.key!r} in {cmd.story_id!r}", "key")
    entry.retire(cmd.valid_from, cmd.reason)


def submit_draft(cmd: c.SubmitDraft, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    _chapter(uow, cmd.story_id, cmd.chapter)
    if _made_already(
        uow.get(Draft, ids.draft_id(cmd.story_id, cmd.draft_id)),
        RuleViolated("draft_id_must_be_unique", f"draft {cmd.draft_id!r} already exists, with another chapter or text",
                     "draft_id"),
        chapter=cmd.chapter, text=cmd.text,
    ):
        return
    uow.add(Draft(story_id=cmd.story_id, draft_id=cmd.draft_id, chapter=cmd.chapter, text=cmd.text))


def accept_draft(cmd: c.AcceptDraft, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    draft = _draft(uow, cmd.story_id, cmd.draft_id)
    accept_into(draft, _chapter(uow, cmd.story_id, draft.chapter), cmd.override_reason)


def reject_draft(cmd: c.RejectDraft, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    _draft(uow, cmd.story_id, cmd.draft_id).reject(cmd.reason)


def dismiss_finding(cmd: c.DismissFinding, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    _draft(uow, cmd.story_id, cmd.draft_id).dismiss_finding(cmd.finding_id, cmd.reason)


def record_knowledge(cmd: c.RecordKnowledge, uow: UnitOfWork) -> None:
    story = _story(uow, cmd.story_id)
    if not _character_in_canon(uow, story, cmd.character, cmd.chapter):
        raise RuleViolated("unknown_character", f"character {cmd.character!r} names no confirmed character in canon "
                                                f"at chapter {cmd.chapter}", "character")
    entry = uow.get(CanonEntry, ids.canon_entry_id(cmd.story_id, cmd.kind, cmd.key))
    require_knowable(entry, cmd.kind, cmd.key, cmd.chapter).record_knowledge(cmd.character, cmd.chapter, cmd.how)


def record_chapter_summary(cmd: c.RecordChapterSummary, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    _chapter(uow, cmd.story_id, cmd.chapter).record_summary(cmd.text)


def record_volume_summary(cmd: c.RecordVolumeSummary, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id)
    volume = uow.get(Volume, ids.volume_id(cmd.story_id, cmd.volume))
    if volume is None:
        volume = Volume.open(cmd.story_id, cmd.volume)
        uow.add(volume)
    volume.record_summary(cmd.text)


def set_lore_cap(cmd: c.SetLoreCap, uow: UnitOfWork) -> None:
    _story(uow, cmd.story_id).set_lore_cap(cmd.share)


def ingest_document(cmd: c.IngestDocument, uow: UnitOfWork, tokens: TokenCounter) -> None:
    doc_key = f"{cmd.collection_id}/{cmd.document_id}"
    sections, chunks = chunk_document(doc_key, cmd.title, cmd.text, tokens, cmd.max_chunk_tokens)
    document = uow.get(Document, ids.document_id(cmd.collection_id, cmd.document_id))
    if document is None:
        uow.add(Document.ingest(cmd.collection_id, cmd.document_id, cmd.title, sections, chunks))
    else:
        document.reingest(cmd.title, sections, chunks)


def edit_chunk(cmd: c.EditChunk, uow: UnitOfWork, tokens: TokenCounter) -> None:
    collection_id, document_id = document_of_chunk(cmd.chunk_id)
    document = uow.get(Document, ids.document_id(collection_id, document_id))
    if document is None:
        raise NotFound("unknown_chunk", f"no document holds chunk {cmd.chunk_id!r}", "chunk_id")
    document.edit_chunk(cmd.chunk_id, cmd.text)


def start_series(cmd: c.StartSeries, uow: UnitOfWork) -> None:
    if _made_already(
        uow.get(Series, ids.series_id(cmd.story_id)),
        RuleViolated("series_id_must_be_unique", f"series {cmd.story_id!r} already exists, with another title",
                     "story_id"),
        title=cmd.title,
    ):
        return
    bible = uow.get(Story, ids.story_id(cmd.story_id))
    if bible is None:
        bible = Story.start(cmd.story_id, cmd.title, [], "")
        uow.add(bible)
    bible.require_joinable()
    uow.add(Series(series_id=cmd.story_id, title=cmd.title))
    bible.join_series(cmd.story_id, BIBLE, 0)


def add_book(cmd: c.AddBook, uow: UnitOfWork) -> None:
    series = uow.get(Series, ids.series_id(cmd.series_id))
    if series is None:
        raise unknown_series(cmd.series_id)
    story = _story(uow, cmd.story_id)
    if cmd.story_id in series.books:
        return  # a book of this series already: nothing changes
    series.require_addable(cmd.story_id)
    story.require_joinable()
    story.join_series(cmd.series_id, BOOK, series.add_book(cmd.story_id))


# Knowledge commands chunk text, so they are handed the token counter.
WITH_TOKENS: dict[type, Callable[[Any, UnitOfWork, TokenCounter], None]] = {
    c.IngestDocument: ingest_document,
    c.EditChunk: edit_chunk,
}

HANDLERS: dict[type, Callable[[Any, UnitOfWork], None]] = {
    c.StartStory: start_story,
    c.PlanChapter: plan_chapter,
    c.AddSceneCard: add_scene_card,
    c.ProposeCanon: propose_canon,
    c.ConfirmCanon: confirm_canon,
    c.RejectCanon: reject_canon,
    c.RetireCanon: retire_canon,
    c.SubmitDraft: submit_draft,
    c.AcceptDraft: accept_draft,
    c.RejectDraft: reject_draft,
    c.DismissFinding: dismiss_finding,
    c.RecordKnowledge: record_knowledge,
    c.RecordChapterSummary: record_chapter_summary,
    c.RecordVolumeSummary: record_volume_summary,
    c.SetLoreCap: set_lore_cap,
    c.StartSeries: start_series,
    c.AddBook: add_book,
}


def _scene_card_reads(cmd: c.AddSceneCard) -> list[UUID]:
    story = cmd.story_id
    named = [ids.chapter_id(story, cmd.chapter)]
    for t in TAG_LISTS:
        kinds = TAG_KINDS.get(t.name, KINDS)
        named += [ids.canon_entry_id(story, kind, key) for key in getattr(cmd, t.name) for kind in kinds]
    if cmd.pov is not None:
        named.append(ids.canon_entry_id(story, "character", cmd.pov))
    return named


def _chunk_reads(cmd: c.EditChunk) -> list[UUID]:
    try:
        return [ids.document_id(*document_of_chunk(cmd.chunk_id))]
    except NotFound:
        return []  # the handler refuses it


# Beyond its story: the aggregates each handler may look up whose ids its command's own fields give
# (and a proposal's entry, which a confirmation of it in the same batch then finds loaded).
READS: dict[type, Callable[[Any], list[UUID]]] = {
    c.StartStory: lambda cmd: [],
    c.PlanChapter: lambda cmd: [ids.chapter_id(cmd.story_id, cmd.chapter)],
    c.AddSceneCard: _scene_card_reads,
    c.ProposeCanon: lambda cmd: [ids.proposal_id(cmd.story_id, cmd.proposal_id),
                                 ids.canon_entry_id(cmd.story_id, cmd.kind, cmd.key)],
    c.ConfirmCanon: lambda cmd: [ids.proposal_id(cmd.story_id, cmd.proposal_id)],
    c.RejectCanon: lambda cmd: [ids.proposal_id(cmd.story_id, cmd.proposal_id)],
    c.RetireCanon: lambda cmd: [ids.canon_entry_id(cmd.story_id, cmd.kind, cmd.key)],
    c.SubmitDraft: lambda cmd: [ids.chapter_id(cmd.story_id, cmd.chapter), ids.draft_id(cmd.story_id, cmd.draft_id)],
    c.AcceptDraft: lambda cmd: [ids.draft_id(cmd.story_id, cmd.draft_id)],
    c.RejectDraft: lambda cmd: [ids.draft_id(cmd.story_id, cmd.draft_id)],
    c.DismissFinding: lambda cmd: [ids.draft_id(cmd.story_id, cmd.draft_id)],
    c.RecordKnowledge: lambda cmd: [ids.canon_entry_id(cmd.story_id, "character", cmd.character),
                                    ids.canon_entry_id(cmd.story_id, cmd.kind, cmd.key)],
    c.RecordChapterSummary: lambda cmd: [ids.chapter_id(cmd.story_id, cmd.chapter)],
    c.RecordVolumeSummary: lambda cmd: [ids.volume_id(cmd.story_id, cmd.volume)],
    c.SetLoreCap: lambda cmd: [],
    c.StartSeries: lambda cmd: [ids.series_id(cmd.story_id)],
    c.AddBook: lambda cmd: [ids.series_id(cmd.series_id)],
    c.IngestDocument: lambda cmd: [ids.document_id(cmd.collection_id, cmd.document_id)],
    c.EditChunk: _chunk_reads,
}


def reads(cmd: c.Command) -> list[UUID]:
    """The aggregates ``cmd``'s handler may look up that the command's own fields name (not
    those only another aggregate names, such as the entry of the proposal a confirmation names):
    the ledger loads a batch's together before deciding it (``UnitOfWork.prefetch``). A hint,
    never a limit: a handler reads what it needs either way, so a missing id costs a read of its
    own, an extra one a row."""
    story_id = getattr(cmd, "story_id", None)
    named = READS.get(type(cmd), lambda _: [])(cmd)
    return [ids.story_id(story_id), *named] if story_id is not None else named


def handle(cmd: c.Command, uow: UnitOfWork, tokens: TokenCounter | None = None) -> None:
    if type(cmd) in WITH_TOKENS:
        if tokens is None:
            raise RuntimeError("knowledge commands need a token counter")
        WITH_TOKENS[type(cmd)](cmd, uow, tokens)
    else:
        HANDLERS[type(cmd)](cmd, uow)
