"""The continuity check's rules (domain.continuity_rules): for each type, a case it must find
and the hard negatives it must not (quotes, memories, negation, another owner)."""

from __future__ import annotations

import pytest

from canon_ledger.domain.continuity import Step
from canon_ledger.domain.continuity_rules import (FIELD_CONFLICT, KNOWLEDGE_LEAK, NOT_YET, RETIRED, SPOILER,
                                                  UNAVAILABLE_CHARACTER, Knowledge, Vocabulary, check, spoiler_needs)


def step(kind: str, key: str, n: int, valid_from: int, valid_to: int | None, name: str, text: str = "",
         facts: dict | None = None, *, retired: bool = False, hidden: int | None = None, source: int = 0,
         aliases: tuple[str, ...] = (), secret: bool = False) -> Step:
    head = f"{name} ({kind} {key}; from chapter {valid_from})"
    return Step(kind, key, n, valid_from, valid_to, retired, name, aliases, () if retired else (name, *aliases),
                None, hidden, text if retired else f"{head}\n{text}", source, facts or {}, secret)


CANON = [
    step("character", "mira", 1, 1, None, "Mira", "A scout of Harrowgate.",
         {"eyes": "grey", "home": "Harrowgate", "age": 17}, source=10),
    step("character", "harl", 1, 1, 8, "Harl", "The steward.", {"status": "alive"}, source=11),
    step("character", "harl", 2, 8, None, "Harl", "Killed at the ford.", {"status": "dead"}, source=20),
    step("character", "oren", 1, 1, None, "Oren", "A smith.", {"eyes": "blue"}, source=14),
    step("character", "caelan", 1, 20, None, "Caelan", "A prince in exile.", source=30),
    step("item", "sword", 1, 1, 12, "Sword of Varn", "An old blade.", source=12),
    step("item", "sword", 2, 12, None, "sword", "(item sword) retired from chapter 12: shattered", retired=True,
         source=25),
    step("location", "brightwater", 1, 1, None, "Brightwater", "A river town.", source=13),
    step("location", "harrowgate", 1, 1, None, "Harrowgate", "A hill fort.", source=16),
    step("character", "vess", 1, 1, None, "Vess", "The queen's handmaid.", source=17),
    step("character", "vess", 2, 3, None, "Vess", "Vess is secretly the queen's poisoner, paid by the Duke of Osk.",
         hidden=40, source=18),
]


def found(text: str, chapter: int = 15, canon: list[Step] = CANON, vocabulary: Vocabulary = Vocabulary()):
    return [(f.type, f.key, f.text) for f in check("d1", text, chapter, canon, vocabulary)]


def test_a_character_first_confirmed_later_is_not_yet_in_canon():
    assert found("Caelan bowed to the crowd.") == [(NOT_YET, "caelan", "Caelan")]
    assert found("Caelan bowed to the crowd.", chapter=20) == []


def test_a_retired_entry_is_a_warning_with_its_retirement_as_evidence():
    [f] = check("d1", "Mira drew the Sword of Varn.", 15, CANON)
    assert (f.type, f.severity, f.key, f.text) == (RETIRED, "warning", "sword", "Sword of Varn")
    assert [e.source for e in f.evidence] == [25]
    assert found("Mira drew the Sword of Varn.", chapter=11) == []


def test_a_dead_character_acting_is_found_and_his_name_is_the_span():
    [f] = check("d1", "Mira waited. Harl walked into the hall.", 15, CANON)
    assert (f.type, f.severity, f.text, f.start) == (UNAVAILABLE_CHARACTER, "error", "Harl", 13)
    assert [(e.valid_from, e.source) for e in f.evidence] == [(8, 20)]
    assert found('"Stay," said Harl.') == [(UNAVAILABLE_CHARACTER, "harl", "Harl")]


@pytest.mark.parametrize("text", [
    '"Harl walked in here once," she said.',  # quoted speech
    "She remembered Harl laughing at the ford.",  # a memory
    "Harl never walked these halls again.",  # negation
    "Harl had walked these halls for years.",  # past perfect
    "Mira stood by Harl's grave.",  # a possessive, and a memory cue
    "If Harl walked in now, she would weep.",  # hypothetical
    "The steward's chair stood empty; Harl's cloak hung by the door.",
])
def test_a_dead_character_spoken_of_is_not_acting(text):
    assert found(text) == []


def test_the_chapter_a_character_dies_in_is_not_checked_for_availability():
    assert found("Harl walked to the ford.", chapter=8) == []


def test_a_field_stated_differently_is_a_conflict_with_the_version_in_force():
    [f] = check("d1", "Mira's blue eyes narrowed.", 15, CANON)
    assert (f.type, f.key, f.text) == (FIELD_CONFLICT, "mira", "blue")
    assert [e.source for e in f.evidence] == [10]
    assert found("The nineteen-year-old Mira ran on.") == [(FIELD_CONFLICT, "mira", "nineteen")]
    assert found("Mira lived in Brightwater now.") == [(FIELD_CONFLICT, "mira", "Brightwater")]


@pytest.mark.parametrize("text", [
    "Mira's grey eyes narrowed.",  # agrees
    "Mira's gray eyes narrowed.",  # agrees, other spelling
    "Mira looked into Oren's blue eyes.",  # the eyes are Oren's
    "Mira's eyes were never blue.",  # negation
    "\"Your eyes are blue,\" Mira told Oren.",  # quoted speech
    "Mira remembered her mother's blue eyes.",  # a memory, another owner
    "Mira looked at him, his blue eyes cold.",  # a pronoun for someone else
])
def test_field_hard_negatives(text):
    assert found(text) == []


def test_a_state_contradicted_by_was():
    canon = [step("character", "ada", 1, 1, None, "Ada", "", {"status": "alive"}, source=5)]
    assert found("Ada was dead.", canon=canon) == [(FIELD_CONFLICT, "ada", "dead")]
    assert found("Ada was alive.", canon=canon) == []


def test_a_spoiler_names_the_entry_and_enough_of_its_hidden_terms():
    [f] = check("d1", "Vess smiled. She was the queen's poisoner, paid by Osk.", 15, CANON)
    assert (f.type, f.key) == (SPOILER, "vess")
    assert [e.source for e in f.evidence] == [18]
    assert found("Vess brushed the queen's hair.") == []
    assert found("Vess smiled. She was the queen's poisoner, paid by Osk.", chapter=40) == []


def test_spoiler_threshold():
    assert [spoiler_needs(n) for n in (2, 3, 4, 6, 8, 20)] == [2, 2, 2, 3, 4, 4]


def test_a_lowercase_word_is_not_a_capitalised_name():
    canon = [step("character", "will", 1, 1, None, "Will", "", {"status": "dead"}, source=5),
             step("character", "will", 2, 2, None, "Will", "", {"status": "dead"}, source=6)]
    assert found("She will walk home.", canon=canon) == []


def test_a_story_adds_its_own_unavailable_words():
    canon = [step("character", "ada", 1, 1, None, "Ada", "", {"status": "petrified"}, source=5),
             step("character", "bo", 1, 1, None, "Bo", "", {"status": "dreaming"}, source=6),
             step("world_rule", "continuity", 1, 1, None, "Continuity", "", {"unavailable": "dreaming, away"},
                  source=7)]
    assert found("Ada walked in.", canon=canon) == [(UNAVAILABLE_CHARACTER, "ada", "Ada")]
    assert found("Bo walked in.", canon=canon) == []
    assert found("Bo walked in.", canon=canon, vocabulary=Vocabulary.of(canon, 15)) == [
        (UNAVAILABLE_CHARACTER, "bo", "Bo")]


def test_ids_are_stable_and_differ_by_draft():
    a = check("d1", "Harl walked in.", 15, CANON)
    assert [f.id for f in a] == [f.id for f in check("d1", "Harl walked in.", 15, list(reversed(CANON)))]
    assert a[0].id != check("d2", "Harl walked in.", 15, CANON)[0].id
    assert a[0].id.startswith("fnd_") and len(a[0].id) == 20


def test_cjk_names_are_found_without_spaces():
    canon = [step("character", "lin", 1, 30, None, "林黛玉", "", source=5)]
    [f] = check("d1", "这时林黛玉走了进来。", 10, canon)
    assert (f.type, f.text, f.start, f.end) == (NOT_YET, "林黛玉", 2, 5)


@pytest.mark.parametrize("text, said", [
    ("Linnet, who was thirty-seven years old, kept the accounts.", None),  # agrees (a hyphenated number)
    ("Linnet, who was thirty-nine years old, kept the accounts.", "thirty-nine"),
    ("Linnet was twenty-four that winter.", "twenty-four"),
    ("The fifty-seven-year-old Linnet kept the accounts.", "fifty-seven"),
    ("Green-eyed Linnet kept the accounts.", "Green"),
    ("Linnet had worn her hair chestnut in those days.", None),  # an irregular past perfect
    ("Linnet's daughter had green eyes.", None),  # the daughter's eyes
    ("Wind tugged at Linnet's black hair. Oren rubbed his green eyes.", None),  # Oren's, in the next sentence
])
def test_field_statements_read_in_more_shapes(text, said):
    canon = [step("character", "linnet", 1, 1, None, "Linnet", "", {"age": 37, "eyes": "grey", "hair": "black"},
                  source=5),
             step("character", "oren", 1, 1, None, "Oren", "", {}, source=6)]
    assert [f.text for f in check("d1", text, 15, canon)] == ([said] if said else [])


def test_a_town_named_as_the_value_does_not_own_the_fact():
    canon = [step("character", "niall", 1, 1, None, "Niall", "", {"home": "Quarrington"}, source=5),
             step("location", "pennick", 1, 1, None, "Pennick", "", source=6),
             step("location", "quarrington", 1, 1, None, "Quarrington", "", source=7)]
    assert found("Niall was glad to be back home in Pennick.", canon=canon) == [(FIELD_CONFLICT, "niall", "Pennick")]
    assert found("Niall was glad to be back home in Quarrington.", canon=canon) == []


@pytest.mark.parametrize("text", [
    "Harl, pale and silent, stood by the door.",  # an appositive
    "Mira and Harl walked to the ford.",  # two subjects
    "Beside the well stood Harl.",  # an inversion
    "Harl walked into the yard, ringing no bell.",  # a negation after the verb
])
def test_acting_in_more_shapes(text):
    assert found(text) == [(UNAVAILABLE_CHARACTER, "harl", "Harl")]


def test_names_starting_with_an_article_match_written_mid_sentence():
    canon = [step("item", "flute", 1, 30, None, "The Bone Flute", "", source=5)]
    assert found("She lifted the Bone Flute to her lips.", canon=canon) == [(NOT_YET, "flute", "the Bone Flute")]


def test_foreshadowing_may_name_what_is_to_come_but_a_memory_of_it_may_not():
    assert found("There were rumours of Caelan in the south.") == []
    assert found("Mira remembered Caelan's face.") == [(NOT_YET, "caelan", "Caelan")]


def test_a_hidden_version_gives_no_name_and_no_fact_to_a_finding():
    canon = [step("character", "ilsa", 1, 1, None, "Ilsa Gray", "", {"age": 30}, source=5),
             step("character", "ilsa", 2, 2, None, "Ilsa the Heir", "the king's daughter", {"age": 31}, hidden=12,
                  source=6)]
    [f] = check("d1", "Ilsa Gray was thirty-five that winter.", 5, canon)
    assert (f.type, f.name, f.text) == (FIELD_CONFLICT, "Ilsa Gray", "thirty-five")
    assert "31" not in f.message and "Heir" not in f.message
    [spoiler] = check("d1", "Ilsa Gray smiled: the king's daughter, at last.", 5, canon)
    assert spoiler.type == SPOILER and "Heir" not in spoiler.message and spoiler.name == "Ilsa Gray"
    assert spoiler.withheld(5).evidence[0].text.startswith("(withheld at chapter 5: hidden until chapter 12")


def test_a_cue_in_another_clause_or_after_the_action_does_not_silence_the_rule():
    canon = [step("character", "charlotte", 1, 1, None, "Charlotte", "", {"age": 27}, source=5)]
    assert found("Charlotte, who was thirty-two years old, had never been handsome.", canon=canon) == [
        (FIELD_CONFLICT, "charlotte", "thirty-two")]
    assert found("Charlotte, who had never been thirty-two years old, smiled.", canon=canon) == []
    assert found("Harl strode into the hall as if nothing had happened.") == [
        (UNAVAILABLE_CHARACTER, "harl", "Harl")]
    assert found("If Harl strode into the hall, nothing would happen.") == []


SECRETS = [
    step("character", "mira", 1, 1, None, "Mira", "A scout.", source=1),
    step("character", "orrin", 1, 1, None, "Orrin", "A clerk.", source=2),
    step("character", "harl", 1, 1, 5, "Harl", "The steward.", source=3),
    step("character", "harl", 2, 5, None, "Harl", "Harl is a spy paid by the Duke of Osk.", secret=True, source=4),
]


def leaks(text: str, known: set = frozenset(), povs: set = frozenset(), chapter: int = 12):
    return [(f.type, f.key, f.text) for f in check("d1", text, chapter, SECRETS, knowledge=Knowledge(
        frozenset(povs), frozenset(known))) if f.type == KNOWLEDGE_LEAK]


def test_a_character_who_does_not_know_a_secret_speaks_it():
    text = 'Mira laughed. "Harl is a spy for the Duke of Osk," said Mira.'
    [f] = check("d1", text, 12, SECRETS)
    assert (f.type, f.key, f.text) == (KNOWLEDGE_LEAK, "harl", '"Harl is a spy for the Duke of Osk,"')
    assert [e.source for e in f.evidence] == [4] and "Mira" in f.message
    assert leaks(text, known={("mira", "character", "harl")}) == []  # she was told
    assert leaks('"Harl is a spy for the Duke of Osk," said Harl.') == []  # his own secret


def test_the_point_of_view_character_holds_a_secret_in_the_narration():
    text = "Mira watched Harl, the Duke of Osk's spy, count the coins."
    assert leaks(text, povs={"mira"}) == [(KNOWLEDGE_LEAK, "harl", text)]
    assert leaks(text) == []  # no point of view: the narrator may know
    assert leaks(text, povs={"orrin"}) == []  # the point of view is not named
    assert leaks("Mira watched Harl count the coins.", povs={"mira"}) == []  # no secret held


def test_a_leak_is_read_through_more_speech_tags_and_not_in_a_denial():
    assert leaks('"Harl is a spy for the Duke of Osk," Mira muttered.') == [
        (KNOWLEDGE_LEAK, "harl", '"Harl is a spy for the Duke of Osk,"')]
    assert leaks('"Harl is a spy for the Duke of Osk," Mira told Orrin.') == [
        (KNOWLEDGE_LEAK, "harl", '"Harl is a spy for the Duke of Osk,"')]
    assert leaks("Mira had no idea that Harl was a spy for the Duke of Osk.", povs={"mira"}) == []


def test_the_speaker_is_the_nearest_name_and_a_pronoun_tag_names_the_one_named_before():
    assert leaks('"Harl is a spy for the Duke of Osk," Orrin told Mira.', known={("mira", "character", "harl")}) == [
        (KNOWLEDGE_LEAK, "harl", '"Harl is a spy for the Duke of Osk,"')]  # Orrin speaks, not Mira
    assert leaks('Mira leaned in. "Harl is a spy for the Duke of Osk," she said.') == [
        (KNOWLEDGE_LEAK, "harl", '"Harl is a spy for the Duke of Osk,"')]
    assert leaks('Mira looked at Orrin. "Harl is a spy for the Duke of Osk," she said.') == []  # whose "she"?
