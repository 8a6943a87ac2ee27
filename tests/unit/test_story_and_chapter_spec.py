"""Story, Chapter and Volume lifecycles and invariants."""

from tests.unit.spec import (
    accept, chapter_summary, confirm, given, plan, propose, scene, start, submit, volume_summary,
)


def test_starting_a_story():
    given().when(start(budgets={"writer": 900})).then(("Story.Started", {"story_id": "s", "title": "T"}))


def test_a_story_id_is_started_once():
    given(start()).when(start(title="Another")).then_error("story_id_must_be_unique", "story_id")


def test_commands_on_an_unknown_story_are_refused():
    given().when(plan(1)).then_error("unknown_story", "story_id")
    given().when(propose("p")).then_error("unknown_story", "story_id")


def test_planning_a_chapter():
    given(start()).when(plan(1, volume=2)).then(("Chapter.Planned", {"number": 1, "volume": 2, "goals": ["goal"]}))


def test_chapter_numbers_are_unique_in_a_story():
    given(start(), plan(3)).when(plan(3, goals=["another goal"])).then_error("chapter_number_must_be_unique", "chapter")


def test_chapter_numbers_are_positive_in_the_domain_too():
    from canon_ledger.domain.chapter import Chapter
    from canon_ledger.domain.errors import RuleViolated
    import pytest

    with pytest.raises(RuleViolated) as e:
        Chapter.plan("s", 0, 1, [])
    assert e.value.code == "chapter_must_be_positive"


def test_scene_cards_tag_only_confirmed_canon():
    given(start(), plan(1), propose("p", key="ann")).when(scene(1, characters=["ann"])).then_error(
        "scene_card_tags_must_be_confirmed_canon", "characters"
    )


def test_a_tag_must_name_canon_of_the_right_kind():
    given(start(), plan(1), propose("p", kind="location", key="ann"), confirm("p")).when(
        scene(1, characters=["ann"])
    ).then_error("scene_card_tags_must_be_confirmed_canon", "characters")


def test_a_scene_card_with_confirmed_tags_is_added():
    given(
        start(), plan(1),
        propose("p1", key="ann"), confirm("p1"),
        propose("p2", kind="location", key="inn"), confirm("p2"),
        propose("p3", kind="world_rule", key="no-magic"), confirm("p3"),
    ).when(scene(1, characters=["ann"], locations=["inn"], callbacks=["no-magic"])).then(
        ("Chapter.SceneCardAdded", {"scene_id": "a"})
    )


def test_scene_ids_are_unique_in_a_chapter():
    given(start(), plan(1), scene(1, "a")).when(scene(1, "a", summary="another")).then_error(
        "scene_id_must_be_unique_in_chapter", "scene_id")


def test_scene_cards_need_a_planned_chapter():
    given(start()).when(scene(4)).then_error("unknown_chapter", "chapter")


def test_chapter_summary_needs_a_planned_chapter():
    given(start()).when(chapter_summary(2)).then_error("unknown_chapter", "chapter")
    given(start(), plan(2)).when(chapter_summary(2, "it rained")).then(("Chapter.SummaryRecorded", {"text": "it rained"}))


def test_volume_summary_opens_the_volume_once():
    given(start()).when(volume_summary(1, "v1")).then("Volume.Opened", ("Volume.SummaryRecorded", {"text": "v1"}))
    given(start(), volume_summary(1, "v1")).when(volume_summary(1, "v1b")).then(("Volume.SummaryRecorded", {"text": "v1b"}))


def test_accepting_a_draft_makes_the_chapter_text_canon():
    given(start(), plan(1), submit(1, "d", "the text")).when(accept("d")).then(
        "Draft.Accepted", ("Chapter.TextAccepted", {"draft_id": "d", "text": "the text"})
    )
