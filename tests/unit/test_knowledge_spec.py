"""Issue 43, the write side of who knows what: a canon version may be a secret (``fields.secret``),
``record_knowledge`` says a character knows an entry from a chapter on (``CanonEntry.KnowledgeRecorded``
on the known entry), and a scene card may name its point-of-view character (``add_scene_card.pov``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import DatetimeAsISO, JSONTranscoder, Mapper, UUIDAsHex

from canon_ledger.domain import bounds as b
from canon_ledger.domain import ids
from canon_ledger.domain.canon import CanonEntry
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.commands import AddSceneCard, parse_command
from canon_ledger.domain.errors import InvalidCommand
from tests.unit.spec import confirm, given, know, plan, propose, retire, scene, start

MIRA = (propose("p-mira", key="mira"), confirm("p-mira"))  # a character from chapter 1
HARL = (propose("p-harl", key="harl"), confirm("p-harl"))
# The steward is a spy, a secret from chapter 3.
SPY = (propose("p-spy", key="steward", valid_from=3, fields={"secret": True, "allegiance": "the Marrow"}),
       confirm("p-spy"))
CAST = (start(), *MIRA, *HARL, *SPY)


def _entry(spec: Any, kind: str, key: str) -> CanonEntry:
    entry = spec.history.get(ids.canon_entry_id("s", kind, key))
    assert isinstance(entry, CanonEntry)
    return entry


# -- secrets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("secret", [True, False])
def test_a_version_is_a_secret_by_a_boolean(secret: bool) -> None:
    given(start()).when(propose("p", fields={"secret": secret})).then(
        ("CanonProposal.Proposed", {"fields": {"secret": secret}}))


@pytest.mark.parametrize("secret", ["yes", "true", 1, 0, None, [], {}])
def test_a_secret_that_is_not_true_or_false_is_refused(secret: object) -> None:
    given(start()).when(propose("p", fields={"secret": secret})).then_error(
        "secret_must_be_true_or_false", "fields.secret")


# -- record_knowledge ---------------------------------------------------------------------------

def test_recording_what_a_character_knows_and_from_when() -> None:
    events = given(*CAST).when(know("mira", "steward", 12, "told by Harl")).then(
        ("CanonEntry.KnowledgeRecorded", {"story_id": "s", "kind": "character", "key": "steward",
                                          "character": "mira", "chapter": 12, "how": "told by Harl"}))
    # On the known entry's aggregate, which keeps who knows it.
    assert events[0].originator_id == ids.canon_entry_id("s", "character", "steward")
    spec = given(*CAST, know("mira", "steward", 12, "told by Harl"), know("harl", "steward", 3, "deduced"))
    assert _entry(spec, "character", "steward").known_by == {"mira": (12, "told by Harl"), "harl": (3, "deduced")}
    assert _entry(spec, "character", "steward").known("nobody") is None


def test_any_kind_of_entry_can_be_known() -> None:
    given(*CAST, propose("p-vault", kind="location", key="vault", valid_from=2), confirm("p-vault")).when(
        know("mira", "vault", 2, "overheard", kind="location")).then(
        ("CanonEntry.KnowledgeRecorded", {"kind": "location", "key": "vault", "character": "mira", "chapter": 2}))


def test_a_character_may_know_its_own_entry() -> None:
    given(*CAST).when(know("steward", "steward", 3, "it is his own secret")).then(
        ("CanonEntry.KnowledgeRecorded", {"character": "steward", "key": "steward", "chapter": 3}))


def test_the_same_record_again_changes_nothing() -> None:
    given(*CAST, know("mira", "steward", 12)).when(know("mira", "steward", 12)).then()


@pytest.mark.parametrize("change", [{"chapter": 9}, {"chapter": 40}, {"how": "overheard"}])
def test_another_chapter_or_how_for_the_same_character_and_entry_is_a_correction(change: dict[str, Any]) -> None:
    corrected = {**know("mira", "steward", 12), **change}
    given(*CAST, know("mira", "steward", 12)).when(corrected).then(
        ("CanonEntry.KnowledgeRecorded", {"character": "mira", **change}))
    spec = given(*CAST, know("mira", "steward", 12), corrected)
    assert _entry(spec, "character", "steward").known("mira") == (corrected["chapter"], corrected["how"])
    # ... and the first record, sent again, is a correction back (the latest holds).
    spec.when(know("mira", "steward", 12)).then(("CanonEntry.KnowledgeRecorded", {"chapter": 12}))


def test_the_character_must_be_a_confirmed_character_in_canon_at_the_chapter() -> None:
    cases = {
        "never proposed": (CAST, know("nobody", "steward", 5)),
        "only proposed": ((*CAST, propose("p-ann", key="ann")), know("ann", "steward", 5)),
        "not a character": ((*CAST, propose("p-q", kind="location", key="quay"), confirm("p-q")),
                            know("quay", "steward", 5)),
        "not yet in canon": ((*CAST, propose("p-late", key="late", valid_from=8), confirm("p-late")),
                             know("late", "steward", 7)),
        "retired then": ((*CAST, retire("character", "harl", 5)), know("harl", "steward", 6)),
    }
    for why, (history, command) in cases.items():
        error = given(*history).when(command).then_error("unknown_character", "character")
        assert command["character"] in error.message, why
    # Retired from 5: still in canon at 4; a later version brings a character back.
    given(*CAST, retire("character", "harl", 5)).when(know("harl", "steward", 4)).then(
        "CanonEntry.KnowledgeRecorded")
    given(*CAST, retire("character", "harl", 5), propose("p-back", key="harl", valid_from=9), confirm("p-back")).when(
        know("harl", "steward", 9)).then("CanonEntry.KnowledgeRecorded")


def test_the_entry_must_be_in_canon_at_the_chapter() -> None:
    given(*CAST).when(know("mira", "nothing", 5)).then_error("entry_not_in_canon_at_chapter", "key")
    given(*CAST, propose("p-x", key="x")).when(know("mira", "x", 5)).then_error("entry_not_in_canon_at_chapter", "key")
    # The key is confirmed, but as another kind.
    given(*CAST).when(know("mira", "steward", 5, kind="item")).then_error("entry_not_in_canon_at_chapter", "key")
    given(*CAST, retire("character", "steward", 20)).when(know("mira", "steward", 25)).then_error(
        "entry_not_in_canon_at_chapter", "chapter")
    given(*CAST, retire("character", "steward", 20)).when(know("mira", "steward", 19)).then(
        "CanonEntry.KnowledgeRecorded")


def test_knowledge_before_the_entry_exists_is_refused() -> None:
    error = given(*CAST).when(know("mira", "steward", 2)).then_error("knowledge_before_entry_exists", "chapter")
    assert "chapter 3" in error.message
    given(*CAST).when(know("mira", "steward", 3)).then("CanonEntry.KnowledgeRecorded")


def test_the_character_is_checked_before_the_entry() -> None:
    given(*CAST).when(know("nobody", "nothing", 5)).then_error("unknown_character", "character")


def test_recording_knowledge_needs_a_started_story() -> None:
    given().when(know("mira", "steward", 5)).then_error("unknown_story", "story_id")


def _command(**fields: object) -> dict[str, object]:
    return {"command_id": "c", **know("mira", "steward", 12), **fields}


@pytest.mark.parametrize(("field", "value"), [
    ("chapter", 0), ("chapter", b.MAX_CHAPTER + 1), ("chapter", 10**30), ("chapter", True), ("chapter", "12"),
    ("how", ""), ("how", "   "), ("how", "x" * (b.MAX_LINE_TEXT + 1)), ("how", "a\x00b"), ("how", None),
    ("character", ""), ("character", " "), ("character", "c" * (b.MAX_ID + 1)),
    ("key", ""), ("key", "k" * (b.MAX_ID + 1)),
    ("kind", "spaceship"),
])
def test_values_out_of_bounds_are_invalid_fields(field: str, value: object) -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_command(_command(**{field: value}))
    assert (refused.value.code, refused.value.field) == ("invalid_field", field), refused.value.as_dict()


def test_the_bounds_themselves_are_accepted_and_every_field_is_required() -> None:
    assert parse_command(_command(how="x" * b.MAX_LINE_TEXT, chapter=b.MAX_CHAPTER, character="c" * b.MAX_ID))
    for missing in ("character", "kind", "key", "chapter", "how"):
        data = _command()
        del data[missing]
        with pytest.raises(InvalidCommand) as refused:
            parse_command(data)
        assert (refused.value.code, refused.value.field) == ("missing_field", missing)


def test_an_entry_snapshotted_before_knowledge_was_kept_still_records_it() -> None:
    """A CanonEntry snapshot taken before issue 43 has no ``known_by``: loading one and recording
    knowledge works, and a snapshot read back from JSON (lists, not tuples) compares the same."""
    entry = _entry(given(*CAST), "character", "steward")
    snapshot = Snapshot.take(entry)
    old = {k: v for k, v in snapshot.state.items() if k != "known_by"}
    loaded = Snapshot(originator_id=snapshot.originator_id, originator_version=snapshot.originator_version,
                      timestamp=snapshot.timestamp, topic=snapshot.topic, state=old).mutate(None)
    assert isinstance(loaded, CanonEntry) and loaded.known("mira") is None
    loaded.record_knowledge("mira", 12, "told by Harl")
    assert loaded.known("mira") == (12, "told by Harl") and len(loaded.collect_events()) == 1
    vars(loaded)["known_by"] = {"mira": [12, "told by Harl"]}  # as JSON gives it back
    loaded.record_knowledge("mira", 12, "told by Harl")
    assert loaded.collect_events() == []


# -- add_scene_card.pov ---------------------------------------------------------------------------

def test_a_scene_card_names_its_point_of_view_character() -> None:
    given(*CAST, plan(12)).when(scene(12, characters=["mira"], pov="mira")).then(
        ("Chapter.SceneCardAdded", {"scene_id": "a", "pov": "mira", "tags": {
            "characters": ["mira"], "locations": [], "threads": [], "items": [], "callbacks": []}}))


def test_a_scene_card_without_a_pov_has_none() -> None:
    given(*CAST, plan(12)).when(scene(12)).then(("Chapter.SceneCardAdded", {"pov": None}))
    given(*CAST, plan(12)).when(scene(12, pov=None)).then(("Chapter.SceneCardAdded", {"pov": None}))


def test_the_pov_must_be_a_confirmed_character_in_canon_at_the_chapter() -> None:
    cases = {
        "never proposed": (CAST, "nobody", 12),
        "only proposed": ((*CAST, propose("p-ann", key="ann")), "ann", 12),
        "not a character": ((*CAST, propose("p-q", kind="location", key="quay"), confirm("p-q")), "quay", 12),
        "not yet in canon": (CAST, "steward", 2),
        "retired then": ((*CAST, retire("character", "harl", 5)), "harl", 12),
    }
    for why, (history, pov, chapter) in cases.items():
        error = given(*history, plan(chapter)).when(scene(chapter, pov=pov)).then_error("unknown_pov_character", "pov")
        assert pov in error.message, why


def test_the_same_card_again_changes_nothing_and_another_pov_is_another_card() -> None:
    card = scene(12, characters=["mira"], pov="mira")
    given(*CAST, plan(12), card).when(card).then()
    given(*CAST, plan(12), card).when({**card, "pov": "harl"}).then_error("scene_id_must_be_unique_in_chapter",
                                                                          "scene_id")
    given(*CAST, plan(12), card).when({**card, "pov": None}).then_error("scene_id_must_be_unique_in_chapter",
                                                                        "scene_id")
    given(*CAST, plan(12), scene(12)).when(scene(12, pov="mira")).then_error("scene_id_must_be_unique_in_chapter",
                                                                             "scene_id")
    given(*CAST, plan(12), scene(12)).when(scene(12)).then()


@pytest.mark.parametrize("pov", ["", " ", "k" * (b.MAX_ID + 1), 7])
def test_a_pov_out_of_bounds_is_an_invalid_field(pov: object) -> None:
    with pytest.raises(InvalidCommand) as refused:
        parse_command({"command_id": "c", **scene(12, pov=pov)})
    assert (refused.value.code, refused.value.field) == ("invalid_field", "pov"), refused.value.as_dict()


def test_a_card_without_a_pov_keeps_the_digest_it_had() -> None:
    """Receipts store a command's digest: an add_scene_card stored before ``pov`` existed, retried
    now, must still be a duplicate, not ``command_id_must_identify_one_command``."""
    before = {"command_id": "c", **scene(12, characters=["mira"])}
    old = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    command = parse_command(before)
    assert isinstance(command, AddSceneCard) and command.digest() == old
    assert parse_command({**before, "pov": None}).digest() == old
    assert parse_command({**before, "pov": "mira"}).digest() != old


def _mapper() -> Mapper[Any]:
    transcoder = JSONTranscoder()
    transcoder.register(UUIDAsHex())
    transcoder.register(DatetimeAsISO())
    return Mapper(transcoder=transcoder)


def test_a_scene_card_event_stored_before_pov_existed_still_loads() -> None:
    """The log holds SceneCardAdded events without ``pov``: eventsourcing rebuilds an event from its
    stored dict, so the missing key reads as None and the chapter's card is the card it was."""
    chapter = Chapter.plan("s", 1, 1, ["goal"])
    chapter.add_scene_card("a", "sum", {"characters": ["mira"]})
    mapper = _mapper()
    stored = [mapper.to_stored_event(e) for e in chapter.collect_events()]
    state = json.loads(stored[1].state)
    assert state.pop("pov") is None
    old = stored[1].__class__(originator_id=stored[1].originator_id, originator_version=stored[1].originator_version,
                              topic=stored[1].topic, state=json.dumps(state).encode())
    events = [mapper.to_domain_event(s) for s in (stored[0], old)]
    assert "pov" not in vars(events[1]) and events[1].pov is None  # type: ignore[attr-defined]
    loaded = None
    for e in events:
        loaded = e.mutate(loaded)  # type: ignore[attr-defined]
    assert isinstance(loaded, Chapter)
    assert loaded.scene_cards == {"a": {"summary": "sum", "characters": ["mira"]}}
    loaded.add_scene_card("a", "sum", {"characters": ["mira"]})  # the same card: nothing changes
    assert loaded.collect_events() == []
