"""The continuity check of a draft (``canon check``, ``GET /v1/stories/{s}/drafts/{d}/check``,
MCP ``check_draft``): the draft against the confirmed canon in force at its chapter.

``findings(snap, story_id, draft)`` is the one way to check: the recall matcher (the story's
``Lore``, SillyTavern's rule across scripts) finds the entries the draft names, one read brings
every step of their timelines (``CanonSnapshot.steps``), and ``domain.continuity_rules`` decides.
No LLM call: the same draft and canon give the same findings, ids and order, so the qa packet
that carries them (``recipes``' "continuity findings") replays in an audit.

``ContinuityCheck`` answers a door's request: read your writes (the draft and canon as of the
log's end or a position), leave out the findings a person dismissed, and, with a ``Judge``
(``--provider gemini``), ask one metered LLM call for more, falling back to the deterministic
findings on any failure, saying so in ``stages``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from canon_ledger.application.knowledge.compile import StopBatch
from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.application.packets.inherited import inherited
from canon_ledger.application.packets.packet import Stage
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView
from canon_ledger.application.ports import Judge
from canon_ledger.domain.continuity import ERROR, Finding, Step
from canon_ledger.domain.continuity_rules import VOCABULARY_ENTRY, Knowledge, Vocabulary, check
from canon_ledger.domain.errors import CanonError, NotFound

if TYPE_CHECKING:  # the qa recipe imports this module, and the service imports the recipes
    from canon_ledger.application.packets.service import PacketService

WHERE = "the draft"


def read_steps(snap: CanonSnapshot, story_id: str, text: str) -> list[Step]:
    """Every step of the entries ``text`` names (recall's matcher, the spaceless rule), and of
    the story's continuity vocabulary entry (``continuity_rules.VOCABULARY_ENTRY``)."""
    mentioned = snap.lore(story_id).mentions([(WHERE, text)], spaceless=True).entries
    return snap.steps(story_id, tuple(sorted(mentioned | {VOCABULARY_ENTRY})))


def knowledge(snap: CanonSnapshot, story_id: str, chapter: int, steps: list[Step]) -> Knowledge:
    """Who may know the secrets among ``steps`` at ``chapter``: the chapter's point-of-view
    characters and what each knows as of it. Read only when a secret is among them."""
    if not any(s.secret for s in steps):
        return Knowledge()
    povs = frozenset(s.pov for s in snap.scenes(story_id, chapter) if s.pov)
    known = frozenset((k.character, k.kind, k.key) for k in snap.knowledge(story_id, chapter))
    return Knowledge(povs, known)


def run(snap: CanonSnapshot, story_id: str, draft: DraftView) -> tuple[list[Step], list[Finding]]:
    """Every step read and every finding of ``draft`` against ``snap``'s canon at its chapter."""
    steps = read_steps(snap, story_id, draft.text)
    return steps, check(draft.draft_id, draft.text, draft.chapter, steps, Vocabulary.of(steps, draft.chapter),
                        knowledge(snap, story_id, draft.chapter, steps))


def findings(snap: CanonSnapshot, story_id: str, draft: DraftView) -> list[Finding]:
    """The deterministic findings of ``draft`` against ``snap``'s canon at the draft's chapter,
    less the ones dismissed on the draft (``DraftView.dismissed``)."""
    dismissed = {d[0] for d in draft.dismissed}
    return [f for f in run(snap, story_id, draft)[1] if f.id not in dismissed]


@dataclass
class Report:
    story_id: str
    draft_id: str
    chapter: int
    position: int
    status: str
    findings: list[dict[str, Any]]
    dismissed: list[dict[str, Any]]
    stages: list[Stage]

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f["severity"] == ERROR)

    def as_dict(self) -> dict[str, Any]:
        return {"story_id": self.story_id, "draft_id": self.draft_id, "chapter": self.chapter,
                "position": self.position, "status": self.status, "findings": self.findings,
                "dismissed": self.dismissed, "errors": self.errors,
                "warnings": len(self.findings) - self.errors, "stages": [s.as_dict() for s in self.stages]}


class ContinuityCheck:
    """Checks drafts for a door: reads through the packet service's read models (read your writes)."""

    def __init__(self, packets: PacketService, judges: dict[str, Callable[[], Judge]] | None = None) -> None:
        self.packets = packets
        self.judges = judges or {}

    def check(self, story_id: str, draft_id: str, *, after: int | None = None, provider: str = "offline",
              spoilers: bool = True) -> Report:
        """The report on ``draft_id`` as of ``after`` (default: the log's end). ``spoilers`` False
        (a key that may not see spoilers): the text of evidence hidden at the draft's chapter or
        not yet in force is withheld (``Finding.withheld``)."""
        if provider != "offline" and provider not in self.judges:
            raise CanonError("unknown_provider", f"provider {provider!r} is not one of "
                             f"{', '.join(['offline', *sorted(self.judges)])}", "provider")
        started = time.perf_counter()
        target = self.packets.within_log(after)
        drafts = self.packets.drafts
        draft = drafts.draft(story_id, draft_id, target) if drafts is not None else None
        if draft is None:
            raise NotFound("unknown_draft", f"story {story_id!r} has no draft {draft_id!r}", "draft_id")
        def checked(snap: CanonSnapshot) -> tuple[float, list[Step], list[Finding], int]:
            story = snap.story(story_id)
            if story is None:
                raise NotFound("unknown_story", f"no story {story_id!r}", "story_id")
            snap = inherited(snap, story)  # a book checks against the canon it inherits too
            read = time.perf_counter()
            return (read, *run(snap, story_id, draft), snap.position)

        read, steps, found, position = self.packets.read_at(story_id, target, checked)
        ruled = time.perf_counter()
        entries = len({(s.kind, s.key) for s in steps} - {VOCABULARY_ENTRY})
        dismissed = {d[0]: (d[1], d[2]) for d in draft.dismissed}
        if not spoilers:
            found = [f.withheld(draft.chapter) for f in found]
        kept = [f.as_dict() for f in found if f.id not in dismissed]
        gone = [{**f.as_dict(), "dismissed": {"reason": dismissed[f.id][0], "source": dismissed[f.id][1]}}
                for f in found if f.id in dismissed]
        stages = [Stage("read", "done", f"draft {draft_id} (chapter {draft.chapter}, {draft.status}, "
                                        f"{len(draft.text):,} characters) and canon as of position {position} in "
                                        f"{(read - started) * 1000:.1f} ms"),
                  Stage("rules", "done", f"{entries} entr{'y' if entries == 1 else 'ies'} named, {len(steps)} "
                                         f"step(s) read, {len(found)} finding(s) in {(ruled - read) * 1000:.1f} ms; "
                                         "no LLM call"),
                  Stage("dismissed", "done" if gone else "skipped",
                        f"{len(gone)} finding(s) dismissed as intentional left out" if gone
                        else "no finding of this draft was dismissed")]
        if provider != "offline":
            kept, stage = self._judged(provider, kept, draft, steps, story_id, position, set(dismissed))
            stages.append(stage)
        return Report(story_id, draft_id, draft.chapter, position, draft.status, kept, gone, stages)

    def _judged(self, provider: str, kept: list[dict[str, Any]], draft: DraftView, steps: list[Step], story_id: str,
                position: int, dismissed: set[str]) -> tuple[list[dict[str, Any]], Stage]:
        judge = self.judges[provider]()
        report = {"story_id": story_id, "draft_id": draft.draft_id, "chapter": draft.chapter, "position": position,
                  "findings": kept}
        step, alone = f"{provider}-review", "the deterministic findings stand alone"
        try:
            more = judge.judge(report, draft, steps)
        except StopBatch as e:  # a refused reservation (the day's cap, an exhausted day) or a 429
            return kept, Stage(step, "skipped", f"quota: {e}; no LLM review, {alone}")
        except CanonError as e:
            return kept, Stage(step, "skipped", f"{e.code}: {e.message}; {alone}")
        except ProviderError as e:  # a 5xx after the retries, an answer not in the schema (key scrubbed)
            return kept, Stage(step, "error", f"{judge.name} failed: {e}; {alone}")
        except Exception as e:  # noqa: BLE001 - any provider failure falls back, and says so
            return kept, Stage(step, "error", f"{type(e).__name__}: the LLM review failed; {alone}")
        ids = {f["id"] for f in kept}
        added = [f for f in more if f["id"] not in ids and f["id"] not in dismissed]
        how = getattr(judge, "note", "") or "one call, cached by draft and canon position"
        return kept + added, Stage(step, "done", f"{len(added)} finding(s) added by {judge.name} ({how})")
