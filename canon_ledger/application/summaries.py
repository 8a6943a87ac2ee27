"""``canon summarize``: summaries for a story's accepted chapters that have none (and for its
volumes), recorded as ordinary ``record_chapter_summary`` / ``record_volume_summary`` commands.

Contract and invariants:

- **An author's summary wins.** Only a chapter with accepted text and no summary is summarised;
  one that has a summary is skipped (``has_summary``), whoever wrote it, and a summary recorded
  later replaces ours as any later summary does. Whether a chapter still has none is read from its
  aggregate when it is summarised and again just before its command is applied (a summary the
  author records in between is kept: ``summarised_meanwhile``). The window left is the commit of
  one batch: the command vocabulary has no "only if none" summary.
- **Re-running appends nothing.** A run only looks at chapters still without a summary, and every
  command id derives from the story, the chapter, the text summarised, the method and the summary
  (``chapter_command_id``): a second run finds nothing to do, and a batch applied twice answers
  ``duplicate``.
- **Volumes.** A volume the chapters asked for are in is summarised, from its chapters' summaries
  in chapter order, when it has no summary and every chapter planned in it has accepted text and
  a summary (after this run's chapters are written); else it is skipped, saying why
  (``chapters_without_text``: a volume still being written is not summarised from part of it;
  ``chapters_without_summary``; ``has_summary``). Like a chapter's, a volume's summary is never
  redone by a later run: a volume that gets more chapters after it was summarised keeps it
  until someone records another.
- **The quota (a writer that ``uses_quota``: Gemini).** One reserved generate call per chapter
  (purpose ``summarize:<story>:<chapter>``) and per volume (``summarize:<story>:volume-<n>``),
  through ``knowledge.compile.metered_call`` (5xx retried, each retry its own reservation); each
  summary is applied as soon as it is written. A refused reservation (the day's ``summarize`` or
  generate cap) or a 429 stops the run cleanly: ``stopped_reason`` ``quota``, and the chapters not
  reached are ``remaining``. Run again (the next day, once the quota resets) it resumes where it
  stopped, as they are the chapters still without a summary. A chapter whose call fails otherwise
  is ``failed`` and the run goes on. Offline (the extractive writer) commands are applied in
  atomic batches of ``BATCH``.
- A story that was never started is refused (``unknown_story``) before anything is written; a
  batch the ledger refuses stops the run (``stopped_reason`` ``refused``; earlier batches stay).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from canon_ledger.application.knowledge.compile import StopBatch, metered_call
from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.application.knowledge.quota import Quota
from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.ports import StoryListing, SummaryWriter
from canon_ledger.domain import ids
from canon_ledger.domain.bounds import MAX_CHAPTER
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import CanonError, InvalidCommand, NotFound, unknown_story
from canon_ledger.domain.quota import GENERATE
from canon_ledger.domain.summary import length
from canon_ledger.domain.volume import Volume

BATCH = 50  # commands per atomic batch for a writer without a quota


def chapter_command_id(story_id: str, chapter: int, text: str, method: str, summary: str) -> str:
    """The id of the command recording ``summary`` of ``chapter`` whose accepted text is ``text``."""
    return f"summarize:chapter:{chapter}:{ids.content_digest(story_id, chapter, text, method, summary)}"


def volume_command_id(story_id: str, volume: int, sources: list[tuple[int, str]], method: str, summary: str) -> str:
    """The id of the command recording ``summary`` of ``volume`` made from ``sources`` (its chapters' summaries)."""
    parts = (story_id, volume, method, summary, *(f"{n}:{s}" for n, s in sources))
    return f"summarize:volume:{volume}:{ids.content_digest(*parts)}"


@dataclass
class SummaryReport:
    story_id: str
    method: str
    first: int | None = None
    last: int | None = None
    summarised: list[dict[str, Any]] = field(default_factory=list)  # {chapter, words, position}
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {chapter, reason}
    volumes: list[dict[str, Any]] = field(default_factory=list)  # {volume, outcome, reason | words, position}
    failed: list[dict[str, Any]] = field(default_factory=list)  # {chapter | volume, detail}
    counts: dict[str, int] = field(default_factory=dict)  # command status -> how many
    stopped_reason: str = "done"  # done | quota | refused
    detail: str = ""
    remaining: list[int] = field(default_factory=list)  # chapters asked for still without a summary
    refused: dict[str, Any] | None = None  # the first refused command of the batch that stopped the run
    position: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"story_id": self.story_id, "method": self.method,
                "chapters": None if self.first is None else {"first": self.first, "last": self.last},
                "summarised": self.summarised, "skipped": self.skipped, "volumes": self.volumes,
                "failed": self.failed, "counts": self.counts, "stopped_reason": self.stopped_reason,
                "detail": self.detail, "remaining": self.remaining, "refused": self.refused,
                "position": self.position}


class _Refused(Exception):
    """A batch the ledger refused: the run stops."""


@dataclass
class _Pending:
    command: Any
    number: int  # the chapter or volume
    volume: bool = False


class Summarizer:
    def __init__(self, ledger: CanonLedger, views: Callable[[], StoryListing], writer: SummaryWriter,
                 quota: Quota | None = None, provider: str = "gemini",
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if writer.uses_quota and quota is None:
            raise ValueError("a writer that uses the quota needs the quota ledger")
        self.ledger = ledger
        self.views = views
        self.writer = writer
        self.quota = quota
        self.provider = provider  # the quota ledger's provider for the writer's calls
        self.sleep = sleep
        self.batch = 1 if writer.uses_quota else BATCH

    def run(self, story_id: str, first: int | None = None, last: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> SummaryReport:
        """Summarise ``story_id``'s chapters ``first``..``last`` (default: all) that have none, then
        their volumes; ``progress(done, total)`` once the chapters to do are known, then after each."""
        low, high = _bounds(first, last)
        story = self.views().story(story_id)
        if story is None:
            raise unknown_story(story_id)
        report = SummaryReport(story_id, self.writer.name)
        if first is not None or last is not None:
            report.first, report.last = low, high
        chapters = [r for r in story["chapters"] if low <= r["chapter"] <= high]
        todo = []
        for row in chapters:
            if not row["text_accepted"]:
                report.skipped.append({"chapter": row["chapter"], "reason": "no_accepted_text"})
            elif row["summarised"]:
                report.skipped.append({"chapter": row["chapter"], "reason": "has_summary"})
            else:
                todo.append(row["chapter"])
        written: dict[int, str] = {}
        title = str(story.get("title") or story_id)
        try:
            self._chapters(story_id, title, todo, report, written, progress)
            volumes = sorted({r["volume"] for r in chapters})
            self._volumes(story_id, title, story, volumes, report, written)
        except StopBatch as stop:
            report.stopped_reason, report.detail = stop.reason, str(stop)
        except _Refused:
            report.stopped_reason = "refused"
        settled = {s["chapter"] for s in report.skipped}  # summarised meanwhile, or blank
        report.remaining = [n for n in todo if n not in written and n not in settled]
        report.position = self.ledger.event_log.position()
        return report

    # -- chapters --------------------------------------------------------------------------------
    def _chapters(self, story_id: str, title: str, todo: list[int], report: SummaryReport,
                  written: dict[int, str], progress: Callable[[int, int], None] | None) -> None:
        pending: list[_Pending] = []
        if progress is not None:
            progress(0, len(todo))
        try:
            for done, number in enumerate(todo, start=1):
                chapter = self._chapter(story_id, number)
                if chapter is not None and chapter.summary is None and chapter.text is not None:
                    self._summarise_chapter(story_id, title, chapter, report, pending)
                elif chapter is not None and chapter.summary is not None:
                    report.skipped.append({"chapter": number, "reason": "summarised_meanwhile"})
                if len(pending) >= self.batch:
                    self._apply(story_id, pending, report, written)
                if progress is not None:
                    progress(done, len(todo))
        except StopBatch:
            self._apply(story_id, pending, report, written)  # what was written before the quota stopped it is kept
            raise
        self._apply(story_id, pending, report, written)

    def _summarise_chapter(self, story_id: str, title: str, chapter: Chapter, report: SummaryReport,
                           pending: list[_Pending]) -> None:
        number, text = chapter.number, chapter.text or ""
        if not text.strip():
            report.skipped.append({"chapter": number, "reason": "blank_text"})
            return
        try:
            summary = self._write(f"summarize:{story_id}:{number}",
                                  lambda: self.writer.summarise_chapter(title, number, text))
            command = parse_command({"type": "record_chapter_summary", "story_id": story_id, "chapter": number,
                              "text": summary,
                              "command_id": chapter_command_id(story_id, number, text, self.writer.name, summary)})
        except (ProviderError, CanonError) as e:
            report.failed.append({"chapter": number, "detail": _said(e)})
            return
        pending.append(_Pending(command, number))

    def _chapter(self, story_id: str, number: int) -> Chapter | None:
        try:
            chapter: Chapter = self.ledger.repository.get(ids.chapter_id(story_id, number))
        except AggregateNotFoundError:
            return None
        return chapter

    # -- volumes ---------------------------------------------------------------------------------
    def _volumes(self, story_id: str, title: str, story: dict[str, Any], volumes: list[int],
                 report: SummaryReport, written: dict[int, str]) -> None:
        summarised = {v["volume"] for v in story["volumes"] if v["summarised"]}
        for number in volumes:
            if number in summarised or self._volume_summary(story_id, number) is not None:
                report.volumes.append({"volume": number, "outcome": "skipped", "reason": "has_summary"})
                continue
            planned = [r for r in story["chapters"] if r["volume"] == number]
            unwritten = [r["chapter"] for r in planned if not r["text_accepted"]]
            if unwritten:  # still being written: a summary now would be of part of it
                report.volumes.append({"volume": number, "outcome": "skipped", "reason": "chapters_without_text",
                                       "chapters": _shown(unwritten)})
                continue
            sources = [(r["chapter"], written.get(r["chapter"]) or self._chapter_summary(story_id, r["chapter"]))
                       for r in planned]
            missing = [n for n, s in sources if s is None]
            if missing:
                report.volumes.append({"volume": number, "outcome": "skipped", "reason": "chapters_without_summary",
                                       "chapters": _shown(missing)})
                continue
            texts = [(n, s) for n, s in sources if s is not None]
            try:
                summary = self._write(f"summarize:{story_id}:volume-{number}",
                                      lambda: self.writer.summarise_volume(title, number, texts))
                command = parse_command({"type": "record_volume_summary", "story_id": story_id, "volume": number,
                                  "text": summary, "command_id": volume_command_id(story_id, number, texts,
                                                                                   self.writer.name, summary)})
            except (ProviderError, CanonError) as e:
                report.failed.append({"volume": number, "detail": _said(e)})
                continue
            self._apply(story_id, [_Pending(command, number, volume=True)], report, written)

    def _chapter_summary(self, story_id: str, number: int) -> str | None:
        chapter = self._chapter(story_id, number)
        return None if chapter is None else chapter.summary

    def _volume_summary(self, story_id: str, number: int) -> str | None:
        try:
            volume: Volume = self.ledger.repository.get(ids.volume_id(story_id, number))
        except AggregateNotFoundError:
            return None
        return volume.summary

    # -- writing ---------------------------------------------------------------------------------
    def _write(self, purpose: str, call: Callable[[], str]) -> str:
        if not self.writer.uses_quota or self.quota is None:
            return call()
        summary: str = metered_call(self.quota, self.provider, GENERATE, purpose, call, self.sleep)
        return summary

    def _apply(self, story_id: str, pending: list[_Pending], report: SummaryReport,
               written: dict[int, str]) -> None:
        """Apply ``pending`` in one atomic batch (emptied), less the chapters that got a summary
        since they were read; raises ``_Refused`` if the ledger refuses the batch."""
        batch: list[_Pending] = []
        for item in pending:
            now = (self._volume_summary(story_id, item.number) if item.volume
                   else self._chapter_summary(story_id, item.number))
            if now is None:
                batch.append(item)
            elif item.volume:
                report.volumes.append({"volume": item.number, "outcome": "skipped", "reason": "summarised_meanwhile"})
            else:
                report.skipped.append({"chapter": item.number, "reason": "summarised_meanwhile"})
        pending.clear()
        if not batch:
            return
        results = self.ledger.apply([item.command for item in batch], atomic=True)
        for item, result in zip(batch, results, strict=True):
            report.counts[result.status] = report.counts.get(result.status, 0) + 1
            if not result.ok:
                continue
            words = round(length(item.command.text))
            if item.volume:
                report.volumes.append({"volume": item.number, "outcome": "summarised", "words": words,
                                       "position": result.position})
            else:
                written[item.number] = item.command.text
                report.summarised.append({"chapter": item.number, "words": words, "position": result.position})
        refused = next((r for r in results if not r.ok), None)
        if refused is not None:
            report.refused = refused.as_dict()
            raise _Refused


def _bounds(first: int | None, last: int | None) -> tuple[int, int]:
    low, high = 1 if first is None else first, MAX_CHAPTER if last is None else last
    if not 1 <= low <= high <= MAX_CHAPTER:
        raise InvalidCommand("invalid_chapter_range", f"chapters {low}..{high}: a range within 1..{MAX_CHAPTER:,}, "
                                                      "the first not after the last", "chapters")
    return low, high


def _shown(chapters: list[int]) -> str:
    return ", ".join(str(n) for n in chapters[:5]) + (f" ... ({len(chapters)} in all)" if len(chapters) > 5 else "")


def _said(error: Exception) -> str:
    return error.message if isinstance(error, CanonError) else str(error)
