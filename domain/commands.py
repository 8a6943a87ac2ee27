"""The authoring app's command vocabulary: one pydantic discriminated union on ``type``.

This is a public contract (DESIGN §4): fields may be added, never renamed. The same models
serve the Python API, ``canon apply`` and the published JSON Schema (``canon schema``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from domain import bounds as b
from domain.canon import KINDS
from domain.story import ROLES


def _storable(value: str) -> str:
    why = b.text_problem(value)
    if why is not None:
        raise ValueError(why)
    return value


def _bounded_fields(value: dict[str, Any]) -> dict[str, Any]:
    why = b.fields_problem(value)
    if why is None and b.compact_size(value) > b.MAX_FIELDS_BYTES:
        why = f"fields: larger than {b.MAX_FIELDS_BYTES} bytes as JSON"
    if why is not None:
        raise ValueError(why)
    return value


def _text(max_length: int, min_length: int = 0, pattern: str | None = None) -> Any:
    """A string of at most ``max_length`` characters that both stores can hold."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length, pattern=pattern),
                     AfterValidator(_storable)]


def _list(item: Any) -> Any:
    return Annotated[list[item], Field(max_length=b.MAX_LIST)]


_NO_SPACE = r"^[^\s\x00-\x1f]+$"
Id = _text(b.MAX_ID, 1, _NO_SPACE)
StoryId = _text(b.MAX_STORY_ID, 1, _NO_SPACE)
Key = _text(b.MAX_ID, 1)
Name = _text(b.MAX_NAME, 1)
Line = _text(b.MAX_LINE_TEXT)
Alias = _text(b.MAX_ALIAS)
Tag = _text(b.MAX_ID)
CanonText = _text(b.MAX_CANON_TEXT)
Summary = _text(b.MAX_CANON_TEXT, 1)
Number = Annotated[int, Field(ge=1, le=b.MAX_CHAPTER, strict=True,
                              description=f"A chapter or volume number, 1..{b.MAX_CHAPTER:,}.")]
Fields = Annotated[dict[str, Any], AfterValidator(_bounded_fields), Field(
    description="Free-form structured facts, kept whole. Keys packets act on: `state` (a thread's state, "
                f"e.g. open / resolved; at most {b.MAX_STATE} characters), `hidden_until` (a chapter number: "
                "the entry stays out of packets before it), `nodes` (a development chain: a list of "
                "{id, text, kind?, hidden_until?}). "
                f"At most {b.MAX_FIELDS_DEPTH} levels deep, {b.MAX_FIELDS_ITEMS} items and {b.MAX_FIELDS_BYTES} bytes.")]
Kind = Literal[KINDS]  # type: ignore[valid-type]
Role = Literal[ROLES]  # type: ignore[valid-type]


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command_id: Id = Field(description="Client-chosen; a retried command with the same id is applied once.")

    def digest(self) -> str:
        """Content hash used to tell a retry from a different command reusing the id."""
        body = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()


class _StoryCommand(_Command):
    story_id: StoryId


class StartStory(_StoryCommand):
    type: Literal["start_story"]
    title: Name
    style_guardrails: _list(Line)
    output_contract: Line
    budgets: dict[Role, Annotated[int, Field(ge=0, le=b.MAX_BUDGET, strict=True)]] = Field(
        default_factory=dict, description="Per-role packet token budgets; defaults fill the rest."
    )


class PlanChapter(_StoryCommand):
    type: Literal["plan_chapter"]
    chapter: Number
    volume: Number
    goals: _list(Line)


class AddSceneCard(_StoryCommand):
    type: Literal["add_scene_card"]
    chapter: Number
    scene_id: Id
    summary: Line
    characters: _list(Key)
    locations: _list(Key)
    threads: _list(Key)
    callbacks: _list(Key)
    items: _list(Key)


class ProposeCanon(_StoryCommand):
    type: Literal["propose_canon"]
    proposal_id: Id
    kind: Kind
    key: Key
    name: Name
    aliases: _list(Alias)
    text: CanonText
    fields: Fields
    valid_from: Number
    tags: _list(Tag) = Field(default_factory=list)


class ConfirmCanon(_StoryCommand):
    type: Literal["confirm_canon"]
    proposal_id: Id


class RejectCanon(_StoryCommand):
    type: Literal["reject_canon"]
    proposal_id: Id
    reason: Line


class RetireCanon(_StoryCommand):
    type: Literal["retire_canon"]
    kind: Kind
    key: Key
    valid_from: Number
    reason: Line


class SubmitDraft(_StoryCommand):
    type: Literal["submit_draft"]
    chapter: Number
    draft_id: Id
    text: _text(b.MAX_CHAPTER_TEXT, 1)


class AcceptDraft(_StoryCommand):
    type: Literal["accept_draft"]
    draft_id: Id


class RejectDraft(_StoryCommand):
    type: Literal["reject_draft"]
    draft_id: Id
    reason: Line


class RecordChapterSummary(_StoryCommand):
    type: Literal["record_chapter_summary"]
    chapter: Number
    text: Summary


class RecordVolumeSummary(_StoryCommand):
    type: Literal["record_volume_summary"]
    volume: Number
    text: Summary


CollectionId = _text(b.MAX_COLLECTION_ID, 1, r"^[^\s/#\x00-\x1f]+$")
DocumentId = _text(b.MAX_DOCUMENT_ID, 1, r"^[^\s#\x00-\x1f]+$")


class IngestDocument(_Command):
    type: Literal["ingest_document"]
    collection_id: CollectionId
    document_id: DocumentId
    title: Name
    text: _text(b.MAX_DOCUMENT_TEXT)
    max_chunk_tokens: Annotated[int, Field(ge=32, le=8192, strict=True)] = Field(
        default=256, description="Children are runs of paragraphs up to this many tokens.")


class EditChunk(_Command):
    type: Literal["edit_chunk"]
    chunk_id: _text(b.MAX_CHUNK_ID, 3)
    text: _text(b.MAX_CHAPTER_TEXT) = Field(description="The chunk's new body; its breadcrumb prefix is kept.")


Command = Annotated[
    Union[
        StartStory,
        PlanChapter,
        AddSceneCard,
        ProposeCanon,
        ConfirmCanon,
        RejectCanon,
        RetireCanon,
        SubmitDraft,
        AcceptDraft,
        RejectDraft,
        RecordChapterSummary,
        RecordVolumeSummary,
        IngestDocument,
        EditChunk,
    ],
    Field(discriminator="type"),
]

COMMAND_ADAPTER: TypeAdapter[Command] = TypeAdapter(Command)


def json_schema() -> dict[str, Any]:
    schema = COMMAND_ADAPTER.json_schema()
    schema["title"] = "CanonLedgerCommand"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
