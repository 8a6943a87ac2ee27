"""Series: starting one, adding books in reading order, and the rules that refuse the rest."""

from tests.unit.spec import confirm, given, plan, propose, retire, scene, start


def series(story_id: str = "saga", title: str = "The Saga") -> dict:
    return {"type": "start_series", "story_id": story_id, "title": title}


def book(story_id: str, series_id: str = "saga") -> dict:
    return {"type": "add_book", "story_id": story_id, "series_id": series_id}


def started(story_id: str) -> dict:
    return start(story_id=story_id)


def test_starting_a_series_starts_its_bible():
    given().when(series()).then(
        ("Story.Started", {"story_id": "saga", "title": "The Saga"}),
        ("Series.Started", {"series_id": "saga", "title": "The Saga"}),
        ("Story.JoinedSeries", {"story_id": "saga", "series_id": "saga", "role": "bible", "ordinal": 0}))


def test_an_existing_story_can_become_a_bible():
    given(started("world")).when(series("world")).then(
        ("Series.Started", {"series_id": "world"}), ("Story.JoinedSeries", {"story_id": "world", "role": "bible"}))


def test_a_series_started_again_is_unchanged_and_with_another_title_refused():
    given(series()).when(series()).then()
    given(series()).when(series(title="Other")).then_error("series_id_must_be_unique", "story_id")


def test_books_join_in_reading_order():
    spec = given(series(), started("b1"), started("b2"), book("b1"))
    spec.when(book("b2")).then(("Series.BookAdded", {"story_id": "b2", "ordinal": 2}),
                               ("Story.JoinedSeries", {"story_id": "b2", "series_id": "saga", "role": "book",
                                                       "ordinal": 2}))


def test_a_book_added_again_is_unchanged():
    given(series(), started("b1"), book("b1")).when(book("b1")).then()


def test_a_story_joins_one_series_at_most():
    given(series(), series("other"), started("b1"), book("b1")).when(book("b1", "other")).then_error(
        "story_in_one_series_at_most", "story_id")


def test_a_series_cannot_contain_its_own_bible():
    given(series()).when(book("saga")).then_error("series_must_not_contain_its_bible", "story_id")


def test_a_bible_is_not_a_book_of_another_series():
    given(series(), series("other")).when(book("other")).then_error("series_bible_is_not_a_book", "story_id")


def test_a_book_cannot_become_a_bible():
    given(series(), started("b1"), book("b1")).when(series("b1")).then_error("story_in_one_series_at_most", "story_id")


def test_unknown_series_and_unknown_story_are_refused():
    given(started("b1")).when(book("b1", "nope")).then_error("unknown_series", "series_id")
    given(series()).when(book("nope")).then_error("unknown_story", "story_id")


def test_a_refused_add_book_changes_nothing():
    spec = given(series(), series("other"), started("b1"), book("b1"))
    before = len(spec.history.events)
    spec.when(book("b1", "other"))
    assert len(spec.history.events) == before


def test_a_book_tags_canon_it_inherits_from_the_bible_and_earlier_books():
    bible = [propose("p1", key="mage", story_id="saga"), confirm("p1") | {"story_id": "saga"}]
    first = [started("b1"), book("b1"), propose("p2", key="sword", kind="item", story_id="b1"),
             confirm("p2") | {"story_id": "b1"}]
    spec = given(series(), *bible, *first, started("b2"), book("b2"), plan(1) | {"story_id": "b2"})
    spec.when(scene(1, characters=["mage"], items=["sword"]) | {"story_id": "b2"}).then("Chapter.SceneCardAdded")


def test_a_story_outside_the_series_does_not_inherit():
    bible = [propose("p1", key="mage", story_id="saga"), confirm("p1") | {"story_id": "saga"}]
    spec = given(series(), *bible, started("b9"), plan(1) | {"story_id": "b9"})
    spec.when(scene(1, characters=["mage"]) | {"story_id": "b9"}).then_error("scene_card_tags_must_be_confirmed_canon")


def test_a_pov_dead_at_the_end_of_an_earlier_book_is_not_in_canon():
    first = [started("b1"), book("b1"), propose("p1", key="hero", story_id="b1"), confirm("p1") | {"story_id": "b1"},
             retire("character", "hero", 9) | {"story_id": "b1"}]
    spec = given(series(), *first, started("b2"), book("b2"), plan(1) | {"story_id": "b2"})
    spec.when(scene(1, pov="hero") | {"story_id": "b2"}).then_error("unknown_pov_character", "pov")
