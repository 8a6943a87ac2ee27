"""The authoring app's command vocabulary: one pydantic discriminated union on ``type``.

This is a public contract: fields may be added, never renamed. The same models
serve the Python API, ``canon apply`` and the published JSON Schema (``canon schema``).

Every door reads a command the same way: ``parse_line`` for JSON text (strict JSON within
the bounds of ``domain.bounds``: line size, depth, integer digits, no NaN or Infinity), then
``parse_command`` for the schema. Every failure, however hostile the input, is a structured
``InvalidCommand``; nothing else is raised.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from canon_ledger.domain import bounds as b
from canon_ledger.domain.canon import KINDS
from canon_ledger.domain.errors import InvalidCommand
from canon_ledger.domain.scene_tags import TAG_LIST
from canon_ledger.domain.series import MAX_BOOKS
from canon_ledger.domain.story import DEFAULT_BUDGETS, ROLES


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


def _length(max_length: int, min_length: int = 0, pattern: str | None = None) -> StringConstraints:
    """With ``_STORABLE``: a string of at most ``max_length`` characters that both stores can hold.
    Written out as ``Annotated[str, _length(...), _STORABLE]`` so that type checkers read a ``str``."""
    return StringConstraints(min_length=min_length, max_length=max_length, pattern=pattern)


def _not_blank(value: str) -> str:
    """A key, alias or tag names something: empty or only whitespace names nothing (it would
    tag no entry, and an alias of nothing would be looked up as every entry's)."""
    if not value.strip():
        raise ValueError("must not be blank (empty or only whitespace)")
    return value


_STORABLE = AfterValidator(_storable)
_WORDS = AfterValidator(_not_blank)
_NO_SPACE = r"^[^\s\x00-\x1f]+$"
Id = Annotated[str, _length(b.MAX_ID, 1, _NO_SPACE), _STORABLE]
StoryId = Annotated[str, _length(b.MAX_STORY_ID, 1, _NO_SPACE), _STORABLE]
Key = Annotated[str, _length(b.MAX_ID, 1), _STORABLE, _WORDS]
Name = Annotated[str, _length(b.MAX_NAME, 1), _STORABLE]
Line = Annotated[str, _length(b.MAX_LINE_TEXT), _STORABLE]
Alias = Annotated[str, _length(b.MAX_ALIAS, 1), _STORABLE, _WORDS]
Tag = Annotated[str, _length(b.MAX_ID, 1), _STORABLE, _WORDS]
CanonText = Annotated[str, _length(b.MAX_CANON_TEXT), _STORABLE]
Reason = Annotated[str, _length(b.MAX_LINE_TEXT, 1), _STORABLE, _WORDS]  # a reason that must say something
FindingId = Annotated[str, _length(b.MAX_FINDING_ID, b.MAX_FINDING_ID, r"^fnd_[0-9a-f]{16}$")]
Summary = Annotated[str, _length(b.MAX_CANON_TEXT, 1), _STORABLE]
# Lists of at most MAX_LIST items.
Lines = Annotated[list[Line], Field(max_length=b.MAX_LIST)]
Keys = Annotated[list[Key], Field(max_length=b.MAX_LIST)]
Aliases = Annotated[list[Alias], Field(max_length=b.MAX_LIST)]
Tags = Annotated[list[Tag], Field(max_length=b.MAX_LIST)]
Number = Annotated[int, Field(ge=1, le=b.MAX_CHAPTER, strict=True,
                              description=f"A chapter or volume number, 1..{b.MAX_CHAPTER:,}.")]
Fields = Annotated[dict[str, Any], AfterValidator(_bounded_fields), Field(
    description="Free-form structured facts, kept whole. Keys packets act on: `state` (a thread's state, "
                f"e.g. open / resolved; at most {b.MAX_STATE} characters), `hidden_until` (a chapter number: "
                "the entry stays out of packets before it), `secret` (true or false), `nodes` (a development "
                "chain: a list of {id, text, kind?, hidden_until?}). "
                f"At most {b.MAX_FIELDS_DEPTH} levels deep, {b.MAX_FIELDS_ITEMS} items and {b.MAX_FIELDS_BYTES} bytes.")]
Kind = Literal[KINDS]  # type: ignore[valid-type]
Role = Literal[ROLES]  # type: ignore[valid-type]

# Descriptions published by ``canon schema``: every field says what it is, its unit and
# its allowed values. Descriptions only: the types, names and bounds above are the contract.
_CHAPTERS = f"1..{b.MAX_CHAPTER:,}"
_ID_CHARS = "characters, no whitespace or control characters"
_KINDS = ", ".join(f"`{k}`" for k in KINDS)
_ROLES = ", ".join(f"`{r}`" for r in ROLES)
_IN_FORCE = ("A packet or view for chapter K sees each entry as the last confirmed step (version or retirement) "
             "with `valid_from` <= K; on a tie the later confirmation wins.")
_KEY = (f"The entry's stable key within its kind (1..{b.MAX_ID} characters, not blank), e.g. a slug of the name; "
        "the same key may be used under another kind. Confirming a proposal for a (kind, key) that already has "
        "confirmed canon revises that entry (a new version from its `valid_from`); scene cards tag entries by key.")
_VALID_FROM = (
    f"Chapter number ({_CHAPTERS}) from which this version is in force once confirmed. {_IN_FORCE} "
    "Before the first version's `valid_from` the entry is not in canon (a scene card's tag of it is dropped "
    "\"not in canon as of chapter K\"); a later `valid_from` makes a progression (chapters before it keep the "
    "earlier version); a later `retire_canon` takes it out from its own `valid_from`. `valid_from` is when the "
    "fact is true; `fields.hidden_until` is when packets may show it: a packet for chapter K shows this version "
    "only if `valid_from` <= K and `hidden_until` is absent, null or <= K."
)
_FIELDS = (
    "Structured facts about the entry as one JSON object, kept whole with this version; the keys not listed below are "
    "free-form (any kind: e.g. {\"age\": 17, \"role\": \"keeper\"}) and are rendered in packets as `key: value` pairs, "
    "sorted by key. Keys packets act on (checked on `propose_canon`): "
    f"`state` (any kind; a string of at most {b.MAX_STATE} characters, rendered first; for a `thread` it is the "
    "thread's state: `resolved` (compared case-insensitively) closes it, so it is no longer listed among a packet's "
    "active threads (P1; chat P3) from this version's `valid_from`; any other value, e.g. `open` or `advanced`, or "
    "no `state`, keeps it active; refused otherwise with `state_must_be_text`); "
    f"`hidden_until` (any kind; a chapter number N, {_CHAPTERS}, or null for none: spoiler protection for this "
    "version only. A packet for chapter K < N lists the entry `dropped` with the reason \"hidden until chapter N\", "
    "no text and 0 tokens (its kind, key and source positions still show: choose a key that gives nothing away), and "
    "does not fall back to an earlier version; for K >= N it is packed as usual, and N <= `valid_from` hides nothing. "
    "A later version without it is visible from its own `valid_from`. Packets and lorebook exports hide it from "
    "everyone; the HTTP and MCP canon views and the viewer hide it from a key below author scope (listed with "
    "`hidden: true` and the reason, no text, name or aliases), relative to the chapter asked; author keys and "
    "`canon canon` read it whole, labelled hidden. Refused otherwise with `hidden_until_must_be_a_chapter`); "
    "`hidden_until_book` (a series bible's step, any kind; the story id of the book its `hidden_until` counts in, "
    "default the series' first book: books before it do not see the step at all, that book hides it until the "
    "chapter, later books show it; an earlier book's `hidden_until` is always revealed by its end for the books "
    "after it; refused otherwise with `hidden_until_book_must_be_a_story`); "
    "`secret` (any kind; true or false: true marks this version a secret, known only to the characters recorded as "
    "knowing it with `record_knowledge`; refused otherwise with `secret_must_be_true_or_false`); "
    f"`nodes` (a `development_chain`'s foreshadow -> payoff steps: a list of {{id, text, kind?, hidden_until?}} with "
    f"unique ids of 1..{b.MAX_ID} characters, a text string, a kind of at most {b.MAX_NODE_KIND} characters (default "
    "`node`, e.g. `foreshadow`, `payoff`) and a chapter `hidden_until` that hides that node alone; each node is a P4 "
    "item while the chain's version is in force; checked on every kind, read only for chains; refused otherwise with "
    "`chain_nodes_must_be_well_formed`). "
    f"Bounds: at most {b.MAX_FIELDS_DEPTH} levels of objects and lists deep, {b.MAX_FIELDS_ITEMS:,} keys and list "
    f"items in all, {b.MAX_FIELDS_BYTES:,} bytes as compact UTF-8 JSON; keys are strings of at most {b.MAX_ID} "
    f"characters; integers within +/-{b.MAX_JSON_INT:,} (2^53 - 1); numbers finite; no NUL or lone surrogates "
    "(refused with `invalid_field`). Use {} for none."
)
_BUDGETS = (
    "Per-role packet token budgets: an object whose keys are roles (" + _ROLES + ") and whose values are tokens "
    f"(0..{b.MAX_BUDGET:,}), counted with tiktoken `cl100k_base`. A role left out takes its default: "
    + ", ".join(f"{role} {tokens:,}" for role, tokens in DEFAULT_BUDGETS.items())
    + ". Fixed when the story starts (no command changes them); `canon packet --budget` (HTTP `budget=`) overrides "
    "them for one packet. A budget smaller than the packet's P0 hard constraints is refused when the packet is asked "
    "for (`p0_exceeds_budget`)."
)


def _tags(tag: str) -> str:
    """The description of the scene card's tag list ``tag`` (``scene_tags.TAG_LISTS``: one kind)."""
    kind = TAG_LIST[tag].kind
    return (f"Keys of confirmed `{kind}` entries this scene involves ({tag}; 0..{b.MAX_LIST} keys of "
            f"1..{b.MAX_ID} characters, none blank, [] for none). Each must name an entry confirmed in this story "
            f"as a `{kind}` (any version, at any chapter), else the card is refused with "
            "`scene_card_tags_must_be_confirmed_canon` (a tag that is an entry's name or alias, not its key, is "
            "told the key it meant). "
            "Packets for the chapter carry each tagged entry as of the chapter in P1; one not in force then is "
            "listed `dropped` (\"not in canon as of chapter K\"), one hidden then (`fields.hidden_until`) `dropped` "
            "without its text, a retired one as its retirement notice.")


class _Command(BaseModel):
    # Each model's validator is built on its first use, not at import: a process that reads no
    # command (a packet, a search) does not pay for every schema (cold start: docs/benchmarks.md).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    command_id: Id = Field(description=(
        f"Client-chosen id of this command, 1..{b.MAX_ID} {_ID_CHARS}, unique in the whole store (every story and "
        "collection). A retried command with the same id and the same content is applied once (the retry answers "
        "`duplicate` and writes nothing); the same id on a different command is refused "
        "(`command_id_must_identify_one_command`)."))

    # Optional fields added after commands of the type were stored: left out of the digest while
    # None, so a retry of a command stored before the field existed keeps its digest.
    digest_omits_when_none: ClassVar[tuple[str, ...]] = ()

    def digest(self) -> str:
        """Content hash used to tell a retry from a different command reusing the id."""
        data = self.model_dump(mode="json")
        for name in self.digest_omits_when_none:
            if data.get(name) is None:
                data.pop(name, None)
        body = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()


class _StoryCommand(_Command):
    story_id: StoryId = Field(description=(
        f"The story, 1..{b.MAX_STORY_ID} {_ID_CHARS} (its accepted chapters are the knowledge collection "
        "`story:<story_id>`). Every command but `start_story` needs a started story (`unknown_story`)."))


class StartStory(_StoryCommand):
    """Start a story: its title, the rules every worker follows and its per-role packet budgets.
    Appends `Story.Started`; refused with `story_id_must_be_unique` when the story exists."""

    type: Literal["start_story"] = Field(description="The command type: `start_story`.")
    title: Name = Field(description=f"The story's title, 1..{b.MAX_NAME:,} characters.")
    style_guardrails: Lines = Field(description=(
        f"Style rules every writing worker must follow, one per string (0..{b.MAX_LIST} strings of at most "
        f"{b.MAX_LINE_TEXT:,} characters; [] for none). P0 (never trimmed) of every planner, writer, qa and chat "
        "packet, as a bulleted list."))
    output_contract: Line = Field(description=(
        f"What a chapter draft must look like (form, length, markup), at most {b.MAX_LINE_TEXT:,} characters; "
        "\"\" for none. P0 (never trimmed) of every planner, writer and qa packet."))
    budgets: dict[Role, Annotated[int, Field(ge=0, le=b.MAX_BUDGET, strict=True)]] = Field(
        default_factory=dict, description=_BUDGETS
    )


class PlanChapter(_StoryCommand):
    """Plan a chapter: its number, its volume and its goals. Appends `Chapter.Planned`. A chapter
    must be planned before scene cards, drafts or a summary can name it, and before a writer, qa
    or summarizer packet can be asked for it (a planner or chat packet may be asked for any chapter)."""

    type: Literal["plan_chapter"] = Field(description="The command type: `plan_chapter`.")
    chapter: Number = Field(description=(
        f"The chapter number, {_CHAPTERS}, unique in the story (`chapter_number_must_be_unique`). Chapters may be "
        "planned in any order."))
    volume: Number = Field(description=(
        f"The volume the chapter belongs to, {_CHAPTERS}: that volume's summary is the chapter's \"current volume "
        "summary\" (P2) and earlier volumes' summaries are P3."))
    goals: Lines = Field(description=(
        f"What the chapter must achieve, one goal per string (0..{b.MAX_LIST} strings of at most "
        f"{b.MAX_LINE_TEXT:,} characters). P0 (never trimmed) of the chapter's planner, writer and qa packets, and "
        "part of the L1 retrieval query."))


class AddSceneCard(_StoryCommand):
    """Add a scene card to a planned chapter: a summary and tags naming the confirmed canon the
    scene uses, and optionally its point-of-view character. Appends `Chapter.SceneCardAdded`. The
    tags drive a packet's P1 recall."""

    # Added after add_scene_card commands were stored: left out of the digest while it is absent.
    digest_omits_when_none: ClassVar[tuple[str, ...]] = ("pov",)

    type: Literal["add_scene_card"] = Field(description="The command type: `add_scene_card`.")
    chapter: Number = Field(description=f"The planned chapter the scene belongs to, {_CHAPTERS} (`unknown_chapter`).")
    scene_id: Id = Field(description=(
        f"The scene's id, 1..{b.MAX_ID} {_ID_CHARS}, unique within its chapter "
        "(`scene_id_must_be_unique_in_chapter`); `canon packet --scene` narrows a packet to one scene."))
    summary: Line = Field(description=(
        f"What happens in the scene, at most {b.MAX_LINE_TEXT:,} characters. P0 (never trimmed) of the chapter's "
        "planner, writer and qa packets with the tag lists, and part of the L1 retrieval query."))
    # One field per tag list of ``scene_tags.TAG_LISTS`` (a unit test holds them the same).
    characters: Keys = Field(description=_tags("characters"))
    locations: Keys = Field(description=_tags("locations"))
    threads: Keys = Field(description=_tags("threads"))
    callbacks: Keys = Field(description=(
        f"Keys of confirmed entries of any kind ({_KINDS}) the scene calls back to, e.g. a world rule "
        f"(0..{b.MAX_LIST} keys of 1..{b.MAX_ID} characters, none blank, [] for none). Each must name an entry "
        "confirmed in this story under some kind (`scene_card_tags_must_be_confirmed_canon`); every entry of that "
        "key in force as of the chapter is carried in P1, as for the other tags."))
    items: Keys = Field(description=_tags("items"))
    pov: Key | None = Field(default=None, description=(
        f"The scene's point-of-view character: the key of a confirmed `character` (1..{b.MAX_ID} characters, not "
        "blank) in canon at the chapter (confirmed, its version in force then, not retired), else the card is "
        "refused with `unknown_pov_character`; default null (none). What a character knows as of a chapter is "
        "`record_knowledge`'s. Without it, a card is as it always was (same event, same receipt digest)."))


class ProposeCanon(_StoryCommand):
    """Propose a canon entry, or a new version of one. Appends `CanonProposal.Proposed`. A proposal
    is not canon: it never reaches a packet until `confirm_canon` confirms it."""

    type: Literal["propose_canon"] = Field(description="The command type: `propose_canon`.")
    proposal_id: Id = Field(description=(
        f"The proposal's id, 1..{b.MAX_ID} {_ID_CHARS}, unique in the story (`proposal_id_must_be_unique`); "
        "`confirm_canon` and `reject_canon` name it."))
    kind: Kind = Field(description=(
        f"The entry's kind, one of {_KINDS}. In packets: tagged entries are P1, `thread`s not resolved are P1 "
        "active threads, `timeline_event`s valid from the last 5 chapters (K-4..K) P2, `world_rule`s P3, earlier "
        "versions of tagged characters P3, a `development_chain`'s `fields.nodes` P4."))
    key: Key = Field(description=_KEY)
    name: Name = Field(description=(
        f"The entry's display name, 1..{b.MAX_NAME:,} characters; it heads the entry's text in packets."))
    aliases: Aliases = Field(description=(
        f"Other names of the entry (0..{b.MAX_LIST} strings of 1..{b.MAX_ALIAS} characters, none blank; [] for "
        "none), shown as \"also ...\" in packets and kept casefolded for look-ups."))
    text: CanonText = Field(description=(
        f"What is true of the entry from `valid_from` on, as prose, at most {b.MAX_CANON_TEXT:,} characters; "
        "rendered in packets under the name line, before `fields`."))
    fields: Fields = Field(description=_FIELDS)
    valid_from: Number = Field(description=_VALID_FROM)
    tags: Tags = Field(default_factory=list, description=(
        f"Free labels of the entry, e.g. `magic` (0..{b.MAX_LIST} strings of 1..{b.MAX_ID} characters, none blank; "
        "default []). Kept with the version in the log; no packet or view reads them today. Not scene-card tags."))


class ConfirmCanon(_StoryCommand):
    """Confirm a proposal (one still `proposed`): it becomes canon from its `valid_from`. Appends
    `CanonProposal.Confirmed` and `CanonEntry.Established` (a new kind and key) or
    `CanonEntry.Revised` (a new version of an existing entry: a progression)."""

    type: Literal["confirm_canon"] = Field(description="The command type: `confirm_canon`.")
    proposal_id: Id = Field(description=(
        f"The proposal to confirm, still `proposed`, 1..{b.MAX_ID} {_ID_CHARS} (`unknown_proposal`; a rejected one is "
        "refused with `rejected_proposal_cannot_be_confirmed`)."))


class RejectCanon(_StoryCommand):
    """Reject a proposal (one still `proposed`): it never becomes canon and never reaches a packet. Appends
    `CanonProposal.Rejected`."""

    type: Literal["reject_canon"] = Field(description="The command type: `reject_canon`.")
    proposal_id: Id = Field(description=(
        f"The proposal to reject, 1..{b.MAX_ID} {_ID_CHARS} (`unknown_proposal`; only a `proposed` one can "
        "be rejected: `confirmed_proposal_cannot_be_rejected`; one rejected already answers `unchanged` for the "
        "same reason, `rejected_proposal_cannot_be_rejected` for another)."))
    reason: Line = Field(description=(
        f"Why it was rejected, at most {b.MAX_LINE_TEXT:,} characters; kept with the proposal, never in a packet."))


class RetireCanon(_StoryCommand):
    """Take a confirmed entry out of canon from a chapter on (a death, a demolition, a rule
    repealed). Appends `CanonEntry.Retired`; chapters before it still see the entry."""

    type: Literal["retire_canon"] = Field(description="The command type: `retire_canon`.")
    kind: Kind = Field(description=f"The entry's kind, one of {_KINDS}.")
    key: Key = Field(description=(
        f"The confirmed entry's key, 1..{b.MAX_ID} characters (`unknown_canon_entry` when no entry of this kind and "
        "key was ever confirmed)."))
    valid_from: Number = Field(description=(
        f"Chapter number ({_CHAPTERS}) from which the entry is out of canon: the retirement is a step of the "
        f"entry's timeline like a version. {_IN_FORCE} The entry must be in canon, and not retired, at this chapter "
        "(`only_confirmed_canon_can_be_retired`). From then on views leave it out, world rules, timeline and active "
        "threads skip it, and a scene card that still tags it gets its retirement notice instead; a version "
        "confirmed later with a later `valid_from` brings it back from that chapter."))
    reason: Line = Field(description=(
        f"Why it leaves canon, at most {b.MAX_LINE_TEXT:,} characters; the retirement notice packets show for a "
        "tagged entry: \"(kind key) retired from chapter N: reason\"."))


class SubmitDraft(_StoryCommand):
    """Submit a draft of a planned chapter for review. Appends `Draft.Submitted`. A draft is never
    canon and never reaches a packet (a qa worker is given the draft it checks by its caller,
    beside the chapter's qa packet); only `accept_draft` makes its text the chapter's."""

    type: Literal["submit_draft"] = Field(description="The command type: `submit_draft`.")
    chapter: Number = Field(description=f"The planned chapter it drafts, {_CHAPTERS} (`unknown_chapter`).")
    draft_id: Id = Field(description=(
        f"The draft's id, 1..{b.MAX_ID} {_ID_CHARS}, unique in the story (`draft_id_must_be_unique`)."))
    text: Annotated[str, _length(b.MAX_CHAPTER_TEXT, 1), _STORABLE] = Field(description=(
        f"The chapter text, 1..{b.MAX_CHAPTER_TEXT:,} characters (markdown or plain text)."))


class AcceptDraft(_StoryCommand):
    """Accept a submitted draft: its text becomes the chapter's canon text (the summarizer's P0,
    and searchable in `story:<story_id>` for later chapters' L1 retrieval). Appends `Draft.Accepted`
    and `Chapter.TextAccepted` (with `override_reason`, `Draft.FindingsOverridden` first); accepting
    a later draft of the same chapter replaces the text."""

    # Added after accept_draft commands were stored: left out of the digest while it is absent.
    digest_omits_when_none: ClassVar[tuple[str, ...]] = ("override_reason",)

    type: Literal["accept_draft"] = Field(description="The command type: `accept_draft`.")
    draft_id: Id = Field(description=(
        f"The submitted draft to accept, 1..{b.MAX_ID} {_ID_CHARS} (`unknown_draft`; "
        "`rejected_draft_cannot_be_accepted`, `draft_already_accepted`)."))
    override_reason: Reason | None = Field(default=None, description=(
        f"Why the author accepts the draft over the continuity check's error findings (`canon check`), "
        f"1..{b.MAX_LINE_TEXT:,} characters, not blank; default null (none). Recorded as `Draft.FindingsOverridden` "
        "just before `Draft.Accepted`, kept with the draft, never in a packet. Accepting again the draft whose text "
        "the chapter has is `unchanged` with no override reason or the one recorded, `draft_already_accepted` with "
        "another."))


class RejectDraft(_StoryCommand):
    """Reject a submitted draft: it never becomes chapter text. Appends `Draft.Rejected`."""

    type: Literal["reject_draft"] = Field(description="The command type: `reject_draft`.")
    draft_id: Id = Field(description=(
        f"The submitted draft to reject, 1..{b.MAX_ID} {_ID_CHARS} (`unknown_draft`; only a submitted one: "
        "`accepted_draft_cannot_be_rejected`; one rejected already answers `unchanged` for the same reason, "
        "`rejected_draft_cannot_be_rejected` for another)."))
    reason: Line = Field(description=(
        f"Why it was rejected, at most {b.MAX_LINE_TEXT:,} characters; kept with the draft, never in a packet."))


class DismissFinding(_StoryCommand):
    """Dismiss one continuity finding of a submitted draft as intentional (`canon check`): a person
    says the draft departs from canon on purpose. Appends `Draft.FindingDismissed`; a dismissed finding is not
    reported again for that draft. An author's decision, like `accept_draft`."""

    type: Literal["dismiss_finding"] = Field(description="The command type: `dismiss_finding`.")
    draft_id: Id = Field(description=(
        f"The submitted draft the finding is about, 1..{b.MAX_ID} {_ID_CHARS} (`unknown_draft`; only a submitted "
        "one: `accepted_draft_findings_cannot_be_dismissed`, `rejected_draft_findings_cannot_be_dismissed`)."))
    finding_id: FindingId = Field(description=(
        "The finding's id as the check reports it: `fnd_` and 16 lowercase hexadecimal digits, stable for the same "
        "draft and canon. Dismissed already: `unchanged` for the same reason, `finding_already_dismissed` for "
        "another."))
    reason: Reason = Field(description=(
        f"Why the departure is intentional, 1..{b.MAX_LINE_TEXT:,} characters, not blank; kept with the draft, "
        "never in a packet."))


class RecordKnowledge(_StoryCommand):
    """Record that a character knows a canon entry from a chapter on (who knows what, when), e.g. a
    secret (`fields.secret`). Appends `CanonEntry.KnowledgeRecorded` on the known entry; the same record again is
    `unchanged`, another `chapter` or `how` for the same character and entry is a correction (the latest holds)."""

    type: Literal["record_knowledge"] = Field(description="The command type: `record_knowledge`.")
    character: Key = Field(description=(
        f"The key of the character who knows, 1..{b.MAX_ID} characters, not blank: a confirmed `character` in "
        "canon at `chapter` (`unknown_character`). A character may know its own entry."))
    kind: Kind = Field(description=f"The known entry's kind, one of {_KINDS}.")
    key: Key = Field(description=(
        f"The known entry's key, 1..{b.MAX_ID} characters, not blank: an entry confirmed as this kind and in canon "
        "at `chapter` (`entry_not_in_canon_at_chapter`: never confirmed, or retired then; "
        "`knowledge_before_entry_exists`: `chapter` is before its first version's `valid_from`)."))
    chapter: Number = Field(description=(
        f"The chapter from which the character knows it, {_CHAPTERS}. Both the character and the entry must be in "
        f"canon then. {_IN_FORCE}"))
    how: Reason = Field(description=(
        f"How the character learnt it, 1..{b.MAX_LINE_TEXT:,} characters, not blank (free text: \"told by Harl\", "
        "\"overheard\", \"deduced\")."))


class RecordChapterSummary(_StoryCommand):
    """Record a planned chapter's summary (layer 0). Appends `Chapter.SummaryRecorded`; a later
    summary of the same chapter replaces it."""

    type: Literal["record_chapter_summary"] = Field(description="The command type: `record_chapter_summary`.")
    chapter: Number = Field(description=f"The planned chapter it summarises, {_CHAPTERS} (`unknown_chapter`).")
    text: Summary = Field(description=(
        f"The summary, 1..{b.MAX_CANON_TEXT:,} characters. P2 of the planner, writer and qa packets of the next 3 "
        "chapters (a chapter-K packet carries the summaries of K-3..K-1) and of the chat packets of this chapter and "
        "the next 2 (K-2..K)."))


class RecordVolumeSummary(_StoryCommand):
    """Record a volume's summary (layer 1, ~every 100 chapters). Appends `Volume.Opened` the first
    time, then `Volume.SummaryRecorded`; a later summary of the same volume replaces it."""

    type: Literal["record_volume_summary"] = Field(description="The command type: `record_volume_summary`.")
    volume: Number = Field(description=(
        f"The volume number, {_CHAPTERS}, as chapters name it in `plan_chapter.volume`; it need not have chapters."))
    text: Summary = Field(description=(
        f"The summary, 1..{b.MAX_CANON_TEXT:,} characters. P2 (\"current volume summary\") of the planner, writer "
        "and qa packets of the volume's chapters, P3 of later volumes' chapters, P1 of chat packets."))


class SetLoreCap(_StoryCommand):
    """Cap the share of a packet's budget that lore may take: the entries brought in by their own
    rule (mentioned in the goals, scene summaries or draft; always-on), like SillyTavern's
    world-info budget. Appends `Story.LoreCapSet`; the cap the story has already is `unchanged`."""

    type: Literal["set_lore_cap"] = Field(description="The command type: `set_lore_cap`.")
    share: Annotated[int, Field(ge=1, le=100, strict=True)] | None = Field(description=(
        "Percent of each packet's budget (1..100) those entries may take together, in their order (the source's "
        "`order` / `insertion_order` / `priority`, or `fields.recall.order`; higher first, then as mentioned); one "
        "past the cap is trimmed into what is left of it, or listed `dropped` (\"no space: needs N tokens, lore cap "
        "M\"). An entry whose source says \"ignore budget\" (`fields.recall.ignore_budget`) is outside the cap. "
        "null: no cap (the default)."))


class StartSeries(_StoryCommand):
    """Start a series: books that share canon. Its `story_id` names the series and its bible, the
    story whose canon every book inherits (world rules, characters who span books), written to with
    the usual canon commands. A new `story_id` starts that story too (`Story.Started`, default
    budgets, no guardrails); an existing story not in a series becomes the bible. Appends
    `Series.Started` and `Story.JoinedSeries`; the same series started again is `unchanged`."""

    type: Literal["start_series"] = Field(description="The command type: `start_series`.")
    story_id: StoryId = Field(description=(
        f"The series' id, 1..{b.MAX_STORY_ID} {_ID_CHARS}: the story id of its bible, which `add_book` names as "
        "`series_id`. A story in a series already is refused (`story_in_one_series_at_most`); a series of this id "
        "started with another title is refused (`series_id_must_be_unique`)."))
    title: Name = Field(description=f"The series' title, 1..{b.MAX_NAME:,} characters (a new bible's title too).")


class AddBook(_StoryCommand):
    """Add a started story to a series as its next book, in reading order. Appends
    `Series.BookAdded` and `Story.JoinedSeries`; a book of the series already is `unchanged`. From then on, the book's packets and views see,
    for each (kind, key) of canon, the book's own canon in force at the chapter if it has one,
    else the series bible's, else the canon in force at the end of the latest earlier book that
    has it; each such item says where it comes from."""

    type: Literal["add_book"] = Field(description="The command type: `add_book`.")
    story_id: StoryId = Field(description=(
        f"The book, a started story, 1..{b.MAX_STORY_ID} {_ID_CHARS} (`unknown_story`). A story joins one series at "
        "most (`story_in_one_series_at_most`); a series' bible is not a book "
        "(`series_must_not_contain_its_bible`, `series_bible_is_not_a_book`)."))
    series_id: StoryId = Field(description=(
        f"The series, as `start_series` named it (`unknown_series`); at most {MAX_BOOKS:,} books "
        "(`series_book_limit`)."))


CollectionId = Annotated[str, _length(b.MAX_COLLECTION_ID, 1, r"^[^\s/#\x00-\x1f]+$"), _STORABLE]
DocumentId = Annotated[str, _length(b.MAX_DOCUMENT_ID, 1, r"^[^\s#\x00-\x1f]+$"), _STORABLE]


class IngestDocument(_Command):
    """Ingest a markdown or text document into a knowledge collection as hierarchical chunks
    (parents by heading, children of whole paragraphs, each prefixed with its breadcrumb). Appends
    `Document.Ingested` the first time; re-ingesting appends only what changed, and nothing
    (`unchanged`) when nothing did. Not a story command: no `story_id`."""

    type: Literal["ingest_document"] = Field(description="The command type: `ingest_document`.")
    collection_id: CollectionId = Field(description=(
        f"The knowledge collection, 1..{b.MAX_COLLECTION_ID} characters, no whitespace, control characters, `/` "
        "or `#`; `canon search --collection` names it."))
    document_id: DocumentId = Field(description=(
        f"The document's id within the collection, 1..{b.MAX_DOCUMENT_ID} characters, no whitespace, control "
        "characters or `#` (`canon ingest` uses the file's path); chunk ids read `collection/document#section/n`."))
    title: Name = Field(description=(
        f"The document's title, 1..{b.MAX_NAME:,} characters: the first part of every chunk's breadcrumb."))
    text: Annotated[str, _length(b.MAX_DOCUMENT_TEXT), _STORABLE] = Field(description=(
        f"The whole document, markdown or plain text, at most {b.MAX_DOCUMENT_TEXT:,} characters (5 MiB); "
        "headings make the sections."))
    max_chunk_tokens: Annotated[int, Field(ge=32, le=8192, strict=True)] = Field(
        default=256, description=(
            "Children are runs of whole paragraphs up to this many tokens (tiktoken `cl100k_base`), 32..8,192; "
            "default 256. A longer paragraph is split on sentences, then on tokens."))


class EditChunk(_Command):
    """Replace one chunk's body. Appends `Document.ChunkEdited` (the wiki pages compiled from it go
    stale); a body equal to the one it has changes nothing. Not a story command: no `story_id`."""

    type: Literal["edit_chunk"] = Field(description="The command type: `edit_chunk`.")
    chunk_id: Annotated[str, _length(b.MAX_CHUNK_ID, 3), _STORABLE] = Field(description=(
        f"The chunk to edit, 3..{b.MAX_CHUNK_ID:,} characters, as `collection/document#section-path/n` "
        "(`unknown_chunk`)."))
    text: Annotated[str, _length(b.MAX_CHAPTER_TEXT), _STORABLE] = Field(description=(
        f"The chunk's new body, at most {b.MAX_CHAPTER_TEXT:,} characters; its breadcrumb prefix is kept."))


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
        DismissFinding,
        RecordKnowledge,
        RecordChapterSummary,
        RecordVolumeSummary,
        SetLoreCap,
        StartSeries,
        AddBook,
        IngestDocument,
        EditChunk,
    ],
    Field(discriminator="type"),
]


@functools.cache
def command_adapter() -> TypeAdapter[Command]:
    """The union's validator and schema, built on first use (``COMMAND_ADAPTER`` names it too)."""
    return TypeAdapter(Command)


def __getattr__(name: str) -> Any:
    if name == "COMMAND_ADAPTER":
        return command_adapter()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def json_schema() -> dict[str, Any]:
    schema = command_adapter().json_schema()
    schema["title"] = "CanonLedgerCommand"
    schema["description"] = (
        "One Canon Ledger command, chosen by `type`: one JSON object per line of `canon apply`, or the body of "
        "`POST /v1/commands`. Chapters, volumes and `valid_from` are chapter numbers "
        f"{_CHAPTERS}; budgets are tokens (tiktoken `cl100k_base`); text is counted in characters. Unknown fields "
        "are refused (`unknown_field`); a value out of bounds is `invalid_field`, naming the field.")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


# -- reading commands from JSON text ------------------------------------------------------------

_CODES = {
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "union_tag_invalid": "unknown_command_type",
    "union_tag_not_found": "missing_field",
}


def _describe(problem: ErrorDetails) -> tuple[str, str | None, str]:
    loc = [str(part) for part in problem["loc"]]
    kind = problem["type"]
    if kind == "union_tag_invalid":
        tags = problem.get("ctx", {}).get("expected_tags", "")
        tag = str(problem.get("ctx", {}).get("tag"))
        shown = repr(tag if len(tag) <= 60 else tag[:57] + "...")
        hint = did_you_mean(tag, re.findall(r"'([^']*)'", tags))
        return "unknown_command_type", "type", f"unknown command type {shown}{hint}; expected one of {tags}"
    if kind == "union_tag_not_found":
        return "missing_field", "type", "type: a command needs a 'type' (see `canon schema`)"
    # A discriminated union puts the tag first ("start_story.title"): the field is what follows.
    field = ".".join(loc[1:]) if len(loc) > 1 else (loc[0] if loc else None)
    return _CODES.get(kind, "invalid_field"), field, f"{field}: {problem['msg']}"


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to a mistyped ``word``, or "" when
    none is close (``difflib``'s ratio 0.6 or more): the hint every door gives for a type."""
    close = difflib.get_close_matches(word[:200], list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def from_validation_error(error: ValidationError) -> InvalidCommand:
    described = [_describe(p) for p in error.errors()]
    code, field, _ = described[0]
    return InvalidCommand(code, "; ".join(message for _, _, message in described), field)


def parse_command(data: Any) -> Command:
    try:
        return command_adapter().validate_python(data)
    except ValidationError as e:
        raise from_validation_error(e) from None


def _int(literal: str) -> int:
    if len(literal) > b.MAX_INT_DIGITS + 1 and len(literal.lstrip("-")) > b.MAX_INT_DIGITS:
        raise InvalidCommand("invalid_number", f"an integer of {len(literal.lstrip('-'))} digits; "
                                               f"numbers here have at most {b.MAX_INT_DIGITS}")
    return int(literal)


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise InvalidCommand("invalid_number", f"{literal[:30]} is out of range for a number")
    return value


def _constant(name: str) -> Any:
    raise InvalidCommand("malformed_json", f"{name} is not JSON (strict JSON has no NaN or Infinity)")


def _depth(data: Any) -> int:
    """How deeply ``data``'s lists and objects nest (iterative: no recursion to exhaust)."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        deepest = max(deepest, depth)
        if depth <= b.MAX_JSON_DEPTH:
            stack.extend((inner, depth + 1) for inner in value if isinstance(inner, (dict, list)))
    return deepest


def decode_line(raw: bytes) -> str:
    """One input line's bytes as text: UTF-8 or a structured error naming where it breaks."""
    if len(raw) > b.MAX_LINE_BYTES:
        raise InvalidCommand("line_too_long", f"a line of {len(raw):,} bytes; a command line is at most "
                                              f"{b.MAX_LINE_BYTES:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidCommand("invalid_utf8", f"not UTF-8 text: {e.reason} at byte {e.start + 1}") from None


def parse_json(text: str) -> Any:
    """Strict JSON with the commands' bounds (depth, integer digits, no NaN or Infinity).
    Every failure, however hostile the text, is an ``InvalidCommand``; nothing else is raised."""
    if len(text) > b.MAX_LINE_BYTES:
        raise InvalidCommand("line_too_long", f"a line of {len(text):,} characters; a command line is at most "
                                              f"{b.MAX_LINE_BYTES:,} bytes")
    try:
        data = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise InvalidCommand("malformed_json", f"not valid JSON: {_where(text, e)}{_quotes_hint(text, e)}") from None
    except RecursionError:
        raise InvalidCommand("malformed_json", f"nested deeper than {b.MAX_JSON_DEPTH} levels") from None
    if _depth(data) > b.MAX_JSON_DEPTH:
        raise InvalidCommand("malformed_json", f"nested deeper than {b.MAX_JSON_DEPTH} levels")
    return data


CURLY_QUOTES = "\u201c\u201d\u201e\u201f\u2018\u2019\u201a\u201b\u00ab\u00bb"  # “ ” „ ‟ ‘ ’ ‚ ‛ « »


def _quotes_hint(text: str, error: json.JSONDecodeError) -> str:
    """What a person most often did when JSON does not parse where it breaks: typed (or pasted
    from a word processor) curly quotes, or single quotes, where JSON needs straight double ones.
    Only the character where the parse broke is looked at: curly quotes inside a string are text."""
    at = text[error.pos:error.pos + 1]
    if at and at in CURLY_QUOTES:
        curly = "".join(dict.fromkeys(ch for ch in text[:error.pos + 200] if ch in CURLY_QUOTES))
        return (f"; the text holds curly quotes ({' '.join(curly)}), which JSON does not read: use straight double "
                'quotes (") around every key and string (an editor\'s "smart quotes" make curly ones)')
    if at == "'":
        return '; JSON strings and keys take straight double quotes ("), not single ones (\')'
    return ""


def _where(text: str, error: json.JSONDecodeError) -> str:
    """What broke and where, as line and column (1-based) of ``text``. An error past the last
    character that is not whitespace (a missing closing brace, a truncated line) is placed
    just after that character, not on the blank or newline that follows it."""
    content = len(text.rstrip())
    if content == 0:
        return "the text is blank (a command is a JSON object)"
    if error.pos < content:
        return f"{error.msg} at line {error.lineno} column {error.colno}"
    line = text.count("\n", 0, content) + 1
    column = content - (text.rfind("\n", 0, content) + 1) + 1
    return f"{error.msg} at line {line} column {column}, where the text ends (a closing brace or bracket missing?)"


def parse_line(line: str) -> Command:
    """One JSON command (``parse_json``'s bounds, then the command schema's)."""
    return parse_object(parse_json(line))


def parse_object(data: Any) -> Command:
    """A decoded JSON value as a command: an object, read by the command schema; any other
    value is ``malformed_json`` (a command is a JSON object)."""
    if not isinstance(data, dict):
        raise InvalidCommand("malformed_json", f"a command is a JSON object, got {type(data).__name__}")
    return parse_command(data)
