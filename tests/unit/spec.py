"""given(commands) / when(command) / then(events | error), on the domain alone.

History is a list of real domain events; aggregates are rebuilt from it by the events'
own ``mutate`` (the "evolve" half), and the handlers decide (the "decide" half). No store.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from canon_ledger.application.handlers import handle
from canon_ledger.domain.commands import parse_command
from canon_ledger.application.unit_of_work import UnitOfWork
from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure.tokenizer import token_counter


class History:
    """Past events, answering ``get(id)`` the way the repository does."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def get(self, aggregate_id: UUID) -> Any:
        aggregate = None
        for e in self.events:
            if e.originator_id == aggregate_id:
                aggregate = e.mutate(aggregate)
        if aggregate is None:
            raise AggregateNotFoundError(aggregate_id)
        return aggregate

    def run(self, command: dict[str, Any]) -> list[Any]:
        uow = UnitOfWork(self)  # type: ignore[arg-type]
        handle(parse_command({"command_id": "spec", **command}), uow, token_counter())
        new = [e for a in uow.pending() for e in a.collect_events()]
        self.events.extend(new)
        return new


class Spec:
    def __init__(self, *commands: dict[str, Any]) -> None:
        self.history = History()
        for c in commands:
            self.history.run(c)
        self._outcome: list[Any] | CanonError | None = None

    def when(self, command: dict[str, Any]) -> Spec:
        try:
            self._outcome = self.history.run(command)
        except CanonError as e:
            self._outcome = e
        return self

    def then(self, *expected: tuple[str, dict[str, Any]] | str) -> list[Any]:
        """Each expected event is a type name ("Chapter.Planned") or (name, attributes subset)."""
        assert not isinstance(self._outcome, CanonError), f"expected events, got error {self._outcome.as_dict()}"
        events = self._outcome or []
        names = [type(e).__qualname__ for e in events]
        want = [x if isinstance(x, str) else x[0] for x in expected]
        assert sorted(names) == sorted(want), f"events {names} != {want}"
        for x in expected:
            if isinstance(x, tuple):
                name, attrs = x
                matching = [e for e in events if type(e).__qualname__ == name]
                assert any(all(getattr(e, k, None) == v for k, v in attrs.items()) for e in matching), (name, attrs)
        return events

    def then_error(self, code: str, field: str | None = None) -> CanonError:
        assert isinstance(self._outcome, CanonError), f"expected error {code}, got events {self._outcome}"
        assert self._outcome.code == code, self._outcome.as_dict()
        if field is not None:
            assert self._outcome.field == field, self._outcome.as_dict()
        assert self._outcome.message
        return self._outcome


def given(*commands: dict[str, Any]) -> Spec:
    return Spec(*commands)


# -- command builders, with every required field defaulted ---------------------------------------
S = "s"


def start(**kw: Any) -> dict[str, Any]:
    return {"type": "start_story", "story_id": S, "title": "T", "style_guardrails": ["g"], "output_contract": "md", **kw}


def plan(chapter: int, volume: int = 1, **kw: Any) -> dict[str, Any]:
    return {"type": "plan_chapter", "story_id": S, "chapter": chapter, "volume": volume, "goals": ["goal"], **kw}


def propose(pid: str, kind: str = "character", key: str = "ann", valid_from: int = 1, **kw: Any) -> dict[str, Any]:
    return {"type": "propose_canon", "story_id": S, "proposal_id": pid, "kind": kind, "key": key, "name": key.title(),
            "aliases": [], "text": f"{key} text", "fields": {}, "valid_from": valid_from, **kw}


def confirm(pid: str) -> dict[str, Any]:
    return {"type": "confirm_canon", "story_id": S, "proposal_id": pid}


def reject(pid: str, reason: str = "no") -> dict[str, Any]:
    return {"type": "reject_canon", "story_id": S, "proposal_id": pid, "reason": reason}


def retire(kind: str, key: str, valid_from: int, reason: str = "gone") -> dict[str, Any]:
    return {"type": "retire_canon", "story_id": S, "kind": kind, "key": key, "valid_from": valid_from, "reason": reason}


def scene(chapter: int, scene_id: str = "a", **tags: Any) -> dict[str, Any]:
    base = {k: [] for k in ("characters", "locations", "threads", "callbacks", "items")}
    return {"type": "add_scene_card", "story_id": S, "chapter": chapter, "scene_id": scene_id, "summary": "sum", **base, **tags}


def submit(chapter: int, draft_id: str, text: str = "draft text") -> dict[str, Any]:
    return {"type": "submit_draft", "story_id": S, "chapter": chapter, "draft_id": draft_id, "text": text}


def accept(draft_id: str, override_reason: str | None = None) -> dict[str, Any]:
    override = {} if override_reason is None else {"override_reason": override_reason}
    return {"type": "accept_draft", "story_id": S, "draft_id": draft_id, **override}


def reject_draft(draft_id: str, reason: str = "no") -> dict[str, Any]:
    return {"type": "reject_draft", "story_id": S, "draft_id": draft_id, "reason": reason}


FINDING = "fnd_0123456789abcdef"


def dismiss(draft_id: str, finding_id: str = FINDING, reason: str = "on purpose") -> dict[str, Any]:
    return {"type": "dismiss_finding", "story_id": S, "draft_id": draft_id, "finding_id": finding_id, "reason": reason}


def know(character: str, key: str, chapter: int, how: str = "told by Harl", kind: str = "character") -> dict[str, Any]:
    return {"type": "record_knowledge", "story_id": S, "character": character, "kind": kind, "key": key,
            "chapter": chapter, "how": how}


def chapter_summary(chapter: int, text: str = "summary") -> dict[str, Any]:
    return {"type": "record_chapter_summary", "story_id": S, "chapter": chapter, "text": text}


def volume_summary(volume: int, text: str = "summary") -> dict[str, Any]:
    return {"type": "record_volume_summary", "story_id": S, "volume": volume, "text": text}


def lore_cap(share: int | None) -> dict[str, Any]:
    return {"type": "set_lore_cap", "story_id": S, "share": share}


def ingest(document_id: str, text: str, collection: str = "kb", title: str = "Doc", **kw: Any) -> dict[str, Any]:
    return {"type": "ingest_document", "collection_id": collection, "document_id": document_id, "title": title,
            "text": text, **kw}


def edit(chunk_id: str, text: str) -> dict[str, Any]:
    return {"type": "edit_chunk", "chunk_id": chunk_id, "text": text}
