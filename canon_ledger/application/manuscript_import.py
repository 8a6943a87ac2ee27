"""Importing a manuscript: its chapters become the ordinary commands, in atomic batches.

For each chapter (``domain.manuscript``): ``plan_chapter`` (its volume, no goals), then
``submit_draft`` + ``accept_draft`` with its text; ``start_story`` first when the story is new.
Command and draft ids derive from the story, the chapter and its text, so importing an
unchanged file again is all ``duplicate`` and a chapter whose text changed appends one new
accepted draft (and nothing else). A chapter whose text is already its canon text reuses the
draft that made it so; any other text gets a draft id derived also from the draft it replaces,
so a chapter edited and then reverted to an earlier text is accepted again, not skipped as a
duplicate of its first import. Every command is parsed, bounds checked, before the first
batch is applied: a manuscript that cannot be imported whole writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain import ids
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.manuscript import Manuscript

BATCH_CHAPTERS = 20  # chapters per atomic batch (3 commands each)



Accepted = dict[int, tuple[str, str]]  # chapter -> (the accepted draft's id, its text): the chapter's canon text


def draft_id(story_id: str, chapter: int, text: str, replacing: str | None = None) -> str:
    """The imported draft of ``chapter`` with exactly ``text``, replacing the accepted draft
    ``replacing`` (None: the chapter has no text yet)."""
    parts = (story_id, chapter, text) if replacing is None else (story_id, chapter, text, replacing)
    return f"import-{chapter}-{ids.content_digest(*parts)}"


def accepted(ledger: CanonLedger, story_id: str, chapters: list[int]) -> Accepted:
    """Each of ``chapters`` that has an accepted text: that draft's id and the text."""
    found: Accepted = {}
    for number in chapters:
        try:
            chapter: Chapter = ledger.repository.get(ids.chapter_id(story_id, number))
        except AggregateNotFoundError:
            continue
        if chapter.accepted_draft_id is not None and chapter.text is not None:
            found[number] = (chapter.accepted_draft_id, chapter.text)
    return found


def commands(manuscript: Manuscript, story_id: str, *, title: str | None, new_story: bool,
             current: Accepted | None = None) -> list[list[Any]]:
    """The parsed commands, one list per atomic batch (``InvalidCommand`` if any is out of
    bounds: a chapter's text too long, a story id the vocabulary refuses). ``current``: the
    chapters' accepted texts now (``accepted``)."""
    current = current or {}
    batches: list[list[dict[str, Any]]] = []
    head: list[dict[str, Any]] = []
    if new_story:
        head.append({"type": "start_story", "command_id": f"import:start:{ids.content_digest(story_id)}",
                     "story_id": story_id,
                     "title": title or story_id, "style_guardrails": [], "output_contract": ""})
    chapters = manuscript.chapters
    for i in range(0, len(chapters), BATCH_CHAPTERS):
        batch = list(head) if i == 0 else []
        for ch in chapters[i:i + BATCH_CHAPTERS]:
            batch.append({"type": "plan_chapter", "story_id": story_id, "chapter": ch.number, "volume": ch.volume,
                          "goals": [],
                          "command_id": f"import:plan:{ch.number}:{ids.content_digest(story_id, ch.number, ch.volume)}"})
            if not ch.text.strip():
                continue  # a heading with no text: planned, nothing to accept
            now = current.get(ch.number)
            draft = now[0] if now is not None and now[1] == ch.text else draft_id(
                story_id, ch.number, ch.text, now[0] if now is not None else None)
            batch.append({"type": "submit_draft", "story_id": story_id, "chapter": ch.number, "draft_id": draft,
                          "text": ch.text, "command_id": f"import:submit:{draft}"})
            batch.append({"type": "accept_draft", "story_id": story_id, "draft_id": draft,
                          "command_id": f"import:accept:{draft}"})
        batches.append(batch)
    return [[parse_command(c) for c in batch] for batch in batches]


@dataclass
class ImportReport:
    story_id: str
    chapters: int
    volumes: int
    counts: dict[str, int] = field(default_factory=dict)  # command status -> how many
    new_drafts: list[int] = field(default_factory=list)  # chapters that got a newly accepted text
    failed: dict[str, Any] | None = None  # the first rejected command of the batch that failed
    position: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"story_id": self.story_id, "chapters": self.chapters, "volumes": self.volumes, "counts": self.counts,
                "new_drafts": self.new_drafts, "failed": self.failed, "position": self.position}


def import_manuscript(ledger: CanonLedger, manuscript: Manuscript, story_id: str, *, title: str | None,
                      new_story: bool, progress: Callable[[int], None] | None = None) -> ImportReport:
    """Apply the manuscript's commands batch by batch; stops at the first batch refused (earlier
    batches stay: importing again resumes, as every id is derived). ``progress(chapters)``
    after each batch."""
    numbers = [ch.number for ch in manuscript.chapters]
    batches = commands(manuscript, story_id, title=title, new_story=new_story,
                       current=None if new_story else accepted(ledger, story_id, numbers))
    report = ImportReport(story_id, len(manuscript.chapters), len(manuscript.volumes))
    for batch in batches:
        results = ledger.apply(batch, atomic=True)
        chapter_of = {c.draft_id: c.chapter for c in batch if c.type == "submit_draft"}
        for command, result in zip(batch, results, strict=True):
            report.counts[result.status] = report.counts.get(result.status, 0) + 1
            if command.type == "accept_draft" and result.status == "applied":
                report.new_drafts.append(chapter_of[command.draft_id])
        refused = next((r for r in results if not r.ok), None)
        if refused is not None:
            report.failed = refused.as_dict()
            break
        if progress is not None:
            progress(sum(1 for c in batch if c.type == "plan_chapter"))
    report.position = ledger.event_log.position()
    return report
