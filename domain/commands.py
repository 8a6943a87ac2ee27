"""The authoring app's command vocabulary: one pydantic discriminated union on ``type``.

This is a public contract (DESIGN §4): fields may be added, never renamed. The same models
serve the Python API, ``canon apply`` and the published JSON Schema (``canon schema``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter

from domain.canon import KINDS
from domain.story import ROLES

Id = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\s\x00-\x1f]+$")]
Key = Annotated[str, StringConstraints(min_length=1, max_length=200)]
Text = Annotated[str, StringConstraints(min_length=1)]
Number = Annotated[int, Field(ge=1, strict=True)]
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
    story_id: Id


class StartStory(_StoryCommand):
    type: Literal["start_story"]
    title: Text
    style_guardrails: list[str]
    output_contract: str
    budgets: dict[Role, Annotated[int, Field(ge=0, strict=True)]] = Field(
        default_factory=dict, description="Per-role packet token budgets; defaults fill the rest."
    )


class PlanChapter(_StoryCommand):
    type: Literal["plan_chapter"]
    chapter: Number
    volume: Number
    goals: list[str]


class AddSceneCard(_StoryCommand):
    type: Literal["add_scene_card"]
    chapter: Number
    scene_id: Id
    summary: str
    characters: list[Key]
    locations: list[Key]
    threads: list[Key]
    callbacks: list[Key]
    items: list[Key]


class ProposeCanon(_StoryCommand):
    type: Literal["propose_canon"]
    proposal_id: Id
    kind: Kind
    key: Key
    name: Text
    aliases: list[str]
    text: str
    fields: dict[str, Any]
    valid_from: Number
    tags: list[str] = Field(default_factory=list)


class ConfirmCanon(_StoryCommand):
    type: Literal["confirm_canon"]
    proposal_id: Id


class RejectCanon(_StoryCommand):
    type: Literal["reject_canon"]
    proposal_id: Id
    reason: str


class RetireCanon(_StoryCommand):
    type: Literal["retire_canon"]
    kind: Kind
    key: Key
    valid_from: Number
    reason: str


class SubmitDraft(_StoryCommand):
    type: Literal["submit_draft"]
    chapter: Number
    draft_id: Id
    text: Text


class AcceptDraft(_StoryCommand):
    type: Literal["accept_draft"]
    draft_id: Id


class RejectDraft(_StoryCommand):
    type: Literal["reject_draft"]
    draft_id: Id
    reason: str


class RecordChapterSummary(_StoryCommand):
    type: Literal["record_chapter_summary"]
    chapter: Number
    text: Text


class RecordVolumeSummary(_StoryCommand):
    type: Literal["record_volume_summary"]
    volume: Number
    text: Text


CollectionId = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[^\s/#\x00-\x1f]+$")]
DocumentId = Annotated[str, StringConstraints(min_length=1, max_length=400, pattern=r"^[^\s#\x00-\x1f]+$")]


class IngestDocument(_Command):
    type: Literal["ingest_document"]
    collection_id: CollectionId
    document_id: DocumentId
    title: Text
    text: str
    max_chunk_tokens: Annotated[int, Field(ge=32, le=8192, strict=True)] = Field(
        default=256, description="Children are runs of paragraphs up to this many tokens.")


class EditChunk(_Command):
    type: Literal["edit_chunk"]
    chunk_id: Annotated[str, StringConstraints(min_length=3, max_length=1000)]
    text: str = Field(description="The chunk's new body; its breadcrumb prefix is kept.")


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
