#!/usr/bin/env python
"""The continuity check (issue 42) against labels: precision and recall per finding type on a
generated set and on a real novel, and check latency on the 10,000-entry serial.

    python benchmarks/bench_continuity.py [--quick] [--seed N] [--per-type N] [--per-class N]
                                          [--samples N] [--skip-latency] [--no-store]
                                          [--show N] [--format markdown|json] [--save-json PATH]

Not part of the pytest run. Three parts, one process:

1. **Generated set** (``--seed``, default 42): per case a small canon (characters with
   ``eyes``/``hair``/``age``/``home``/``status``/``occupation`` facts, locations, items,
   factions; progressions, retirements, versions with ``hidden_until``) and a chapter draft of a
   few sentences of English prose. Positives (``--per-type`` per type, default 60) carry one
   injected contradiction, labelled with its type and entry; hard negatives (``--per-class``
   per class, default 20) carry none: agreeing paraphrases, memories, quoted speech, negations,
   past perfects, an entry named in a possessive, two characters in one sentence where the fact
   is the other's, hypotheticals, facts from another time of the timeline, near-miss spoilers,
   names that are common words, an unavailable character as an object. Every case records its
   template (``variant``), so misses and false alarms are reported by the phrasing that caused
   them. **Who knows what** (issue 43; ``KnowledgeGenerator``, its own random stream, so the
   cases above do not change with it): a version with ``fields.secret`` in force (a
   character's, or an item's, a place's, a faction's), knowledge records (``record_knowledge``)
   and the chapter's point of view (a scene card's ``pov``); ``--per-type`` positives (a
   character who does not know the secret speaks it in quotes with a speech tag: "said B", "B
   said", "B whispered to C", "B said quietly, ...", "asked B", "B told C", "B muttered", a
   pronoun tag; or the point-of-view character named in a sentence of narration that holds it;
   some with a knowledge record from a later chapter, or of another entry) and ``--per-class``
   hard negatives in 7 classes: the speaker (or the POV) knows it from before the chapter, the
   secret's own character says or holds it, a near-miss sentence, narration with no POV, a POV
   not named in the sentence, a character who knows it tells the POV, and "P had no idea that
   <secret>". The pure path passes ``Knowledge(povs, known)`` to ``check``; the store path
   records the knowledge and adds a scene card with the ``pov``.
2. **Real text**: Pride and Prejudice (``tests/fixtures/pride_and_prejudice.txt.gz``, split as
   ``canon import manuscript`` splits it) with a small hand-written canon (``PP_CANON``: homes,
   ages, eye colour, Lydia missing from chapter 46, two secrets ``hidden_until`` their reveal,
   two entries retired). Its real chapters unedited are negatives; each edit (``PP_EDITS``,
   inserted or replaced in a real chapter) is one labelled case. Again for who knows what
   (``PP_KNOWLEDGE_CANON``: Wickham's Ramsgate attempt a secret from chapter 16, not hidden;
   Darcy and Georgiana know it from 16, Colonel Fitzwilliam from 30, Elizabeth from 35; every
   chapter's point of view is Elizabeth's): the same chapters unedited, and
   ``PP_KNOWLEDGE_EDITS``. A finding of an edited chapter that its unedited chapter also gives
   (same type, entry and text, outside the edit) is counted once, with the unedited chapter.
3. **Latency**: ``gen_story``'s serial (seed 3, 1,000 chapters, 10,000 entries) loaded through
   the command path (``common.load_story``, atomic batches) into a temp SQLite file, a 5,000-word
   draft submitted for chapter 1,000 naming ~100 entries, then ``Services.continuity().check``
   (the door's path: read the draft, the recall matcher, one read of the named entries' steps,
   the rules) ``--samples`` times after one warm-up (the first check, timed apart, pays the
   read models' catch-up and the matcher's build); and, in the same run, the pure rules alone
   (``continuity_rules.check`` on the steps read once) and the snapshot read alone.

Scoring: a finding is a true positive when its type and entry (kind, key) match a label of its
case; a case's findings are counted once per (type, entry). Precision = true / reported; recall
= labels found / labels. The labelled sets are checked on the pure path (``check`` on ``Step``
objects built here the way the canon read model renders them, after the recall matcher picked
the mentioned entries, as ``application.continuity.read_steps`` does), and, unless
``--no-store``, again through a SQLite store (one story per case, the door's path); the report
says whether the two agree.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (ROOT, SQLiteStores, emit, header, load_story, loadavg, log, machine_info,  # noqa: E402
                    percentiles)

from canon_ledger.application.packets import render  # noqa: E402
from canon_ledger.domain import recall  # noqa: E402
from canon_ledger.domain.canon import valid_to  # noqa: E402
from canon_ledger.domain.continuity import Step, facts_of  # noqa: E402
from canon_ledger.domain.continuity_rules import (FIELD_CONFLICT, KNOWLEDGE_LEAK, NOT_YET, RETIRED,  # noqa: E402
                                                  SPOILER, TYPES, UNAVAILABLE_CHARACTER, VOCABULARY_ENTRY, Knowledge,
                                                  Vocabulary, check)

PP_PATH = ROOT / "tests" / "fixtures" / "pride_and_prejudice.txt.gz"
GOALS = {"precision": 0.9, "recall": 0.8, "p50_ms": 100.0}
RECALL_GOAL_TYPES = (NOT_YET, RETIRED, SPOILER, FIELD_CONFLICT, KNOWLEDGE_LEAK)
WHERE = "the draft"


# -- canon as commands and as Steps ----------------------------------------------------------------
@dataclass(frozen=True)
class Version:
    kind: str
    key: str
    name: str
    aliases: tuple[str, ...]
    text: str
    fields: dict[str, Any]
    valid_from: int


@dataclass(frozen=True)
class Retire:
    kind: str
    key: str
    valid_from: int
    reason: str


Op = Version | Retire
Label = tuple[str, str, str]  # (type, kind, key)


@dataclass
class Case:
    id: str
    group: str  # "generated" or "real"
    category: str  # a finding type (a positive), or the hard-negative class
    variant: str  # the template that made the injected or trap sentence
    chapter: int
    text: str
    canon: list[Op]
    labels: list[Label] = field(default_factory=list)
    focus: str = ""  # the injected or trap sentence, for the report
    edit: tuple[int, int] | None = None  # real text: the edited character range
    baseline: str | None = None  # real text: the id of the unedited chapter's case
    povs: tuple[str, ...] = ()  # the chapter's point-of-view characters (scene cards' ``pov``)
    known: tuple[tuple[str, str, str, int], ...] = ()  # record_knowledge: (character, kind, key, from chapter)
    who: str = ""  # a knowledge_leak label: the name of the character the finding must name

    def knowledge(self) -> Knowledge:
        """What the check is given of who knows what at the case's chapter."""
        return Knowledge(frozenset(self.povs),
                         frozenset((c, k, key) for c, k, key, ch in self.known if ch <= self.chapter))


class _Row(NamedTuple):  # what ``LoreIndex`` reads of a canon row
    kind: str
    key: str
    step: int
    name: str
    aliases: list[str]
    recall: dict[str, Any] | None


def steps_of(canon: list[Op]) -> list[Step]:
    """Every timeline step of ``canon`` (its ops in confirmation order) as the canon read model
    holds it (``projections.canon``): rendered text, recall keys, facts, ``valid_to``."""
    by: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in canon:
        by[(op.kind, op.key)].append(op)
    out: list[Step] = []
    source = 0
    for (kind, key), ops in by.items():
        ends = valid_to([op.valid_from for op in ops])
        for step, (op, end) in enumerate(zip(ops, ends, strict=True), 1):
            source += 1
            if isinstance(op, Retire):
                out.append(Step(kind, key, step, op.valid_from, end, True, key, (), (), None, None,
                                render.retirement(kind, key, op.valid_from, op.reason), source, {}))
                continue
            version = {"name": op.name, "aliases": list(op.aliases), "text": op.text, "fields": op.fields,
                       "valid_from": op.valid_from}
            rule = recall.rule(op.name, list(op.aliases), op.fields) or recall.default_rule(op.name, op.aliases)
            keys = tuple(k for k in rule.keys if recall.regex_key(k, False) is None)
            out.append(Step(kind, key, step, op.valid_from, end, False, op.name, op.aliases, keys,
                            op.fields.get("state"), op.fields.get("hidden_until"),
                            render.canon_version(kind, key, version), source, facts_of(op.fields),
                            op.fields.get("secret") is True))
    return out


def lore_rows(steps: list[Step], canon: list[Op]) -> list[_Row]:
    rules = {}
    by: dict[tuple[str, str], int] = Counter()
    for op in canon:
        by[(op.kind, op.key)] += 1
        if isinstance(op, Version):
            rule = recall.rule(op.name, list(op.aliases), op.fields)
            rules[(op.kind, op.key, by[(op.kind, op.key)])] = rule.as_dict() if rule is not None else None
    return [_Row(s.kind, s.key, s.step, s.name, list(s.aliases), rules.get((s.kind, s.key, s.step)))
            for s in steps if not s.retired]


def pure_findings(case: Case) -> list[dict[str, Any]]:
    """The pure path: the recall matcher picks the entries the draft names (as
    ``application.continuity.read_steps``), then ``continuity_rules.check``."""
    from canon_ledger.projections.lore_index import LoreIndex

    steps = steps_of(case.canon)
    index = LoreIndex(lore_rows(steps, case.canon))
    mentioned = {(m.kind, m.key) for m in index.match([(WHERE, case.text)], spaceless=True)} | {VOCABULARY_ENTRY}
    read = [s for s in steps if (s.kind, s.key) in mentioned]
    found = check(case.id, case.text, case.chapter, read, Vocabulary.of(read, case.chapter), case.knowledge())
    return [f.as_dict() for f in found]


def commands_of(case: Case, story: str) -> list[dict[str, Any]]:
    """The case as commands of its own story: canon proposed and confirmed (retirements
    retired) in order, the draft's chapter planned, a scene card per point-of-view character,
    the knowledge recorded and the draft submitted."""
    out: list[dict[str, Any]] = [
        {"type": "start_story", "title": f"Continuity case {case.id}", "style_guardrails": [],
         "output_contract": "Prose."},
        {"type": "plan_chapter", "chapter": case.chapter, "volume": 1, "goals": []}]
    for i, op in enumerate(case.canon):
        if isinstance(op, Retire):
            out.append({"type": "retire_canon", "kind": op.kind, "key": op.key, "valid_from": op.valid_from,
                        "reason": op.reason})
            continue
        pid = f"p{i}"
        out.append({"type": "propose_canon", "proposal_id": pid, "kind": op.kind, "key": op.key, "name": op.name,
                    "aliases": list(op.aliases), "text": op.text, "fields": op.fields, "valid_from": op.valid_from})
        out.append({"type": "confirm_canon", "proposal_id": pid})
    for i, pov in enumerate(case.povs, 1):
        out.append({"type": "add_scene_card", "chapter": case.chapter, "scene_id": f"s{i}",
                    "summary": "The scene the draft tells.", "characters": [pov], "locations": [], "threads": [],
                    "callbacks": [], "items": [], "pov": pov})
    for character, kind, key, chapter in case.known:
        out.append({"type": "record_knowledge", "character": character, "kind": kind, "key": key, "chapter": chapter,
                    "how": "told by a friend"})
    out.append({"type": "submit_draft", "chapter": case.chapter, "draft_id": "d", "text": case.text})
    return [{**c, "command_id": f"{story}/{n}", "story_id": story} for n, c in enumerate(out)]


def store_findings(cases: list[Case], batch: int = 500) -> tuple[dict[str, list[dict[str, Any]]], dict[str, float]]:
    """The door's path: every case a story of one temp SQLite store, each draft checked by
    ``Services.continuity().check``."""
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap

    stores = SQLiteStores()
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        with stores.fresh() as url:
            services = bootstrap(url, embedder="hashing")
            try:
                t0 = time.perf_counter()
                commands = [parse_command(c) for case in cases for c in commands_of(case, f"c-{case.id}")]
                for i in range(0, len(commands), batch):
                    results = services.ledger.apply(commands[i:i + batch], atomic=True)
                    bad = [r for r in results if r.status != "applied"]
                    if bad:
                        raise RuntimeError(f"not applied: {bad[0].as_dict()}")
                loaded = time.perf_counter() - t0
                t0 = time.perf_counter()
                checker = services.continuity()
                for case in cases:
                    out[case.id] = checker.check(f"c-{case.id}", "d").findings
                checked = time.perf_counter() - t0
            finally:
                services.close()
    finally:
        stores.close()
    return out, {"load_s": round(loaded, 2), "check_s": round(checked, 2), "commands": len(commands)}


# -- prose helpers -------------------------------------------------------------------------------
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens - 2] + (f"-{_ONES[ones]}" if ones else "")


FEMALE = ("Mira Sela Ysolde Tamsin Odile Linnet Greta Ilse Nell Wren Brisa Maren Petra Anneka Calla Dagny Elspeth "
          "Fenna Hester Iona Jessamy Kerra Liesel Morwen Nadia Orla Priya Rosalind Saoirse Thea Una Vesna Yara "
          "Zofia Agnes Beatrix Clemence Delphine").split()
MALE = ("Harl Tobin Oren Idris Aldous Perrin Rafe Corwin Bram Jory Emeric Anselm Benedek Cato Dario Ewan Gideon "
        "Hakon Ivo Jasper Kasimir Lorcan Matthias Niall Osric Piet Quentin Ruben Silas Teodor Ulric Viktor Wystan "
        "Alban Crispin Dunstan").split()
SURNAMES = ("Vale Ashdown Marrow Kestrel Hale Crane Thorne Dunmore Pell Quill Harrow Blackwood Fairweather Greaves "
            "Holloway Ibbotson Jessop Kettering Lockhart Merriman Norcross Oakes Penhallow Radley Stroud Tallis "
            "Underhill Voss Whitlock Yardley Aldane Brisco Carrow Delacourt Esterly Fenwick Gorse Hatherly").split()
TITLES = ("Captain", "Master", "Mother", "Brother", "Sergeant", "Doctor", "Warden")
TOWNS = ("Harrowgate Eastmere Coldwater Saltmarsh Greyhaven Thornbury Kettleford Ashcombe Brackenhollow Fellmouth "
         "Oxley Redwater Stonebridge Wexcombe Larkmoor Dunharrow Pennick Marlow Quarrington Hillbrook Tollesby Windle "
         "Corvey Addlestrop Hembury Ravensholm Sallowfield Tarnby Upwater Vellacott Yewdale").split()
PLACE_KINDS = ("market town on the river", "fishing village under the cliffs", "walled town on the old road",
               "mill town in the valley", "harbour town at the estuary", "hill village above the marshes")
ITEMS = ("Amber Key", "Silver Compass", "Raven Seal", "Tide Lantern", "Ember Crown", "Glass Ledger", "Iron Charter",
         "Salt Chalice", "Bone Flute", "Wren Brooch", "Copper Astrolabe", "Pilgrim's Ring", "Blackthorn Staff",
         "Lantern Map", "Orrery of Vess")
ITEM_TEXT = ("An heirloom kept in a locked box.", "Said to have been made for the first warden.",
             "Small enough to hide in a sleeve.", "Its maker's mark is worn almost smooth.")
FACTIONS = ("Salt Guild", "Grey Wardens", "Lantern Society", "Order of the Tide", "Ferrymen's Union",
            "Brotherhood of the Quay", "River Court", "Company of Ash")
EYES = ("grey", "green", "brown", "blue", "hazel", "amber", "black")
HAIR = ("black", "brown", "red", "auburn", "blond", "grey", "white", "chestnut", "copper")
OCCUPATIONS = ("ferrywoman", "smith", "clerk", "lamplighter", "cartographer", "weaver", "bookbinder",
               "harbourmaster", "apothecary", "schoolteacher", "innkeeper", "priest", "soldier", "sailor")
TRAITS = ("Quick to laugh and slow to forgive.", "Keeps accounts for half the street.",
          "Owes money to the wrong people.", "Has not left the valley in ten years.",
          "Reads everything, trusts nobody.", "Sings badly and often.", "Walks with a stick since the flood.")
UNAVAILABLE_STATES = ("dead", "missing", "imprisoned", "exiled", "drowned", "captured")
STATE_REASONS = {"dead": "died of the fever", "missing": "vanished on the marsh road", "imprisoned":
                 "locked in the customs tower", "exiled": "banished beyond the river", "drowned": "lost in the flood",
                 "captured": "taken by the river pirates", "sleeping": "fell into the enchanted sleep"}


@dataclass
class Char:
    key: str
    first: str
    surname: str
    female: bool
    title: str | None
    eyes: str
    hair: str
    age: int
    home: str
    occupation: str
    status: str = "alive"
    valid_from: int = 1
    filler: bool = True  # may the draft's filler sentences name it (in force, alive, not the case's subject)

    @property
    def full(self) -> str:
        return f"{self.first} {self.surname}"

    def __str__(self) -> str:
        return self.first

    @property
    def he(self) -> str:
        return "she" if self.female else "he"

    @property
    def He(self) -> str:
        return self.he.capitalize()

    @property
    def his(self) -> str:
        return "her" if self.female else "his"

    @property
    def him(self) -> str:
        return "her" if self.female else "him"

    @property
    def age_w(self) -> str:
        return number_words(self.age)

    def fields(self, **change: Any) -> dict[str, Any]:
        out = {"eyes": self.eyes, "hair": self.hair, "age": self.age, "home": self.home,
               "occupation": self.occupation, "status": self.status}
        out.update(change)
        return out

    def version(self, valid_from: int | None = None, text: str | None = None, **change: Any) -> Version:
        aliases = (self.first,) + ((f"{self.title} {self.surname}",) if self.title else ())
        return Version("character", self.key, self.full, aliases,
                       text or f"{self.full} is {an(self.occupation)} of {self.home}.",
                       self.fields(**change), self.valid_from if valid_from is None else valid_from)


def an(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def say(template: str, **names: Any) -> str:
    """A template filled, its first letter capitalised."""
    text = template.format(**names)
    return text[0].upper() + text[1:]


# -- the generated set ---------------------------------------------------------------------------
FILLERS = (
    "{A} pulled the boat up onto the shingle and wiped {A.his} hands on {A.his} coat.",
    "Rain drummed on the slates of {P} all afternoon.",
    "{A} counted the coins twice before putting them away.",
    "The market at {P} was half empty, and the fishwives were packing up early.",
    "{A} poured two cups of tea and pushed one across the table to {B}.",
    "A gull screamed somewhere above the harbour.",
    "{A} folded the letter into quarters and slipped it inside {A.his} coat.",
    "{B} laughed at that, a short dry sound.",
    "The road out of {P} climbed steeply through the beeches.",
    "{A} took the long way round, past the chandler's and the old chapel.",
    "{B} leaned on the rail and watched the tide turn.",
    "There was bread, cheese and a jug of cider on the table.",
    "{A} stamped the snow from {A.his} boots at the door.",
    "The innkeeper at {P} brought them a second candle and a plate of eels.",
    "{A} spread the map across the table and weighted its corners with stones.",
    "Smoke from the tannery hung low over the roofs of {P}.",
    "{B} rubbed {B.his} eyes and reached for the ledger.",
    "By the third bell the street below was empty.",
    "{A} asked {B} about the price of rope.",
    "Somewhere in {P} a dog was barking at the carts.",
)
OPENERS = (
    "The fog lay thick over {P} that morning.",
    "It was market day in {P}, and the square was loud with geese.",
    "The wind had turned in the night, and {P} smelled of salt.",
    "Evening came early to {P} in the last weeks of the year.",
    "The bells of {P} were ringing for the noon service.",
)

# positives: (variant, template); the names each template uses are filled by the case maker
NOT_YET_T = {
    "character": [("new character waits", "{X} was waiting at the gate when they arrived."),
                  ("new character speaks", "\"Move aside,\" said {X}, and the crowd parted."),
                  ("new character acts", "{X} climbed down from the cart and looked around the square."),
                  ("new character named by A", "{A} nodded to {X} across the crowded room."),
                  ("cue elsewhere in the sentence", "{X} came in out of the rain and would not sit down.")],
    "location": [("new place reached", "They reached {L} before dusk and took rooms above the stables."),
                 ("new place named", "{A} had a cousin in {L} who owed {A.him} money."),
                 ("new place as origin", "The carter said he had come up from {L} that morning.")],
    "item": [("new item taken", "{A} took the {I} down from the shelf and turned it over in {A.his} hands."),
             ("new item given, cue 'without'", "{A} gave the {I} to {B} without a word.")],
    "faction": [("new faction", "Riders of the {F} were camped along the river road.")],
}
RETIRED_T = {
    "item": [("retired item used", "{A} set the {I} on the table between them."),
             ("retired item pocketed", "{A} slipped the {I} into {A.his} pocket and went out."),
             ("cue elsewhere in the sentence", "{A} could not stop turning the {I} over in {A.his} hands.")],
    "location": [("retired place visited", "They rode into {L} at noon, and the streets were busy."),
                 ("retired place as destination", "{A} bought a ticket for the coach to {L}.")],
    "character": [("retired character present", "{X} was waiting for them by the boats."),
                  ("retired character greeted", "{A} shook hands with {X} at the door.")],
    "faction": [("retired faction", "A courier from the {F} was waiting in the yard.")],
}
EYES_T = [("eyes: possessive adjective", "{A}'s {c} eyes narrowed as the boat drew in."),
          ("eyes: absolute phrase", "{A} looked up, {c} eyes bright in the lamplight."),
          ("eyes: object of the light", "The lamplight caught {A}'s {c} eyes."),
          ("eyes: apposition", "{A} turned from the window, {A.his} eyes {c} and steady."),
          ("eyes: had", "{A} had {c} eyes, like {A.his} mother."),
          ("eyes: hyphenated -eyed", "{A} was {c}-eyed and quick to smile."),
          ("eyes: met across table", "{B} met {A}'s {c} eyes across the table."),
          ("eyes: cue elsewhere in the sentence", "{A}'s {c} eyes did not leave the door.")]
HAIR_T = [("hair: tied back", "{A} tied back {A.his} {c} hair with a strip of leather."),
          ("hair: possessive", "{A}'s {c} hair was plaited tight for the journey."),
          ("hair: wind", "Wind off the water tugged at {A}'s {c} hair."),
          ("hair: lock", "{A} pushed a lock of {c} hair out of {A.his} face."),
          ("hair: hyphenated -haired", "{A}, {c}-haired and sunburnt, jumped down onto the quay.")]
AGE_T = [("age: years old clause", "{A}, who was {nw} years old, kept the ferry accounts."),
         ("age: N-year-old", "{A} was a {nw}-year-old {occ} with a quick tongue."),
         ("age: years of age", "At {n} years of age, {A} was the youngest warden in {P}."),
         ("age: gave age", "{A} gave {A.his} age as {nw}."),
         ("age: bare number", "{A} was {nw} that winter, and felt older.")]
HOME_T = [("home: lives in", "{A} lives in {Q} now, above the chandler's shop."),
          ("home: came home to", "{A} came home to {Q} for the winter."),
          ("home: back home in", "{A} was glad to be back home in {Q}."),
          ("home: place then apposition", "{A} rode back to {Q}, {A.his} home since childhood."),
          ("home: unknown town", "{A} lives in {U} these days, with {A.his} sister.")]
STATUS_T = [("status: was dead", "By nightfall {A} was dead.", "alive", "dead"),
            ("status: was missing", "{A} was missing when the boats came in.", "alive", "missing"),
            ("status: is imprisoned", "{A} is imprisoned in the customs tower, and the wardens keep the key.",
             "alive", "imprisoned"),
            ("status: dead one alive", "{A} was alive, thin and filthy, in the cellar of the customs house.",
             "dead", "alive")]
UNAVAILABLE_T = [("walked into", "{A} walked into the kitchen and sat down by the fire."),
                 ("speech tag said A", "\"We ride at dawn,\" said {A}."),
                 ("adverb then verb", "{A} slowly opened the door and looked out at the rain."),
                 ("laughed", "{A} laughed and poured another cup."),
                 ("returned", "Later that night {A} returned to the forge."),
                 ("handed", "{A} handed {B} the lantern."),
                 ("nodded", "{A} nodded to {B} and went out."),
                 ("appositive before verb", "{A}, pale and silent, stood at the door."),
                 ("A and B subject", "{A} and {B} crossed the bridge together."),
                 ("inverted subject", "Beside the well stood {A}, waiting."),
                 ("irregular verb not listed", "{A} kept watch on the wall until dawn."),
                 ("cue elsewhere in the sentence", "{A} walked into the kitchen as if nothing had happened.")]
SECRETS = [  # (hidden text, strong reveals, weak reveals, near-miss sentence); {A} the entry
    ("{A} is the lost heir of House Varen, smuggled out of the burning palace as an infant.",
     ["{A} was the lost heir of House Varen, smuggled out of the burning palace as a baby.",
      "\"{A} is the heir of House Varen,\" {B} whispered. \"They smuggled {A.him} out of the palace.\""],
     ["The blood of the old Varen kings ran in {A}'s veins."],
     "{A} walked past the old palace on the hill."),
    ("{A} poisoned the old harbourmaster with foxglove taken from the chapel garden.",
     ["It was {A} who poisoned the harbourmaster, with foxglove from the chapel garden.",
      "{A} stood in the chapel garden, where the foxglove grew. That was where {A.he} had picked the leaves "
      "that poisoned the harbourmaster."],
     ["{A}'s hands had put something in the old man's cup."],
     "{A} stopped in the chapel garden to rest."),
    ("{A} is a spy for the Salt Guild and reports every sailing to its masters in Corve.",
     ["{A}, a spy for the Salt Guild, sent word of every sailing to the masters in Corve.",
      "Every sailing from the harbour went into {A}'s reports to the Salt Guild's masters in Corve."],
     ["{A} had been selling the harbour's secrets all along."],
     "{A} checked the list of sailings pinned by the harbour door."),
    ("{A} survived the wreck of the Marigold and lives under the name Brother Ansel at the abbey.",
     ["{A} had survived the wreck of the Marigold; at the abbey they called {A.him} Brother Ansel.",
      "The monk they called Brother Ansel was {A}, who had survived the Marigold."],
     ["{A} had not drowned after all."],
     "{A} watched the bells of the abbey swing."),
    ("{A} set the warehouse fire to destroy the missing tax ledgers.",
     ["{A} had set the warehouse fire, and the tax ledgers burned with it.",
      "\"You set that fire,\" {B} told {A}. \"The tax ledgers were in the warehouse.\""],
     ["{A} knew exactly how the blaze on the docks had started."],
     "{A} walked past the burned warehouse on the quay."),
    ("{A} and the magistrate were married in secret at Saint Brannoc's chapel.",
     ["{A} had married the magistrate in secret, at Saint Brannoc's.",
      "Nobody at the wedding at Saint Brannoc's chapel would ever speak of it: {A} and the magistrate, married "
      "in secret."],
     ["{A} wore a ring on a cord round {A.his} neck and never said whose it was."],
     "{A} waited outside the magistrate's office all morning."),
    ("{A} carries the grey fever but shows no sign of it yet.",
     ["{A} carried the grey fever, though no sign of it showed yet.",
      "The grey fever was in {A} already; there was just no sign of it."],
     ["{A} was sicker than anyone knew."],
     "{A} had heard that the fever was back in the low town."),
    ("{A} killed Captain Dorne on the night of the flood and sank the body in the lock.",
     ["{A} had killed Captain Dorne on the night of the flood and sunk the body in the lock.",
      "On the night of the flood, {A} killed Dorne. The captain's body went into the lock."],
     ["{A} knew why Dorne had never come home."],
     "{A} looked down into the black water of the lock."),
]
THING_SECRETS = {  # for an item ({I}), a location ({L}), a faction ({F})
    "item": ("The {I} is a forgery; the true one was melted down during the siege of Corve.",
             ["The {I} was a forgery; the true one had been melted down in the siege of Corve."],
             ["Nobody looked closely enough at the {I} to see what it really was."],
             "The {I} lay on the table, dull under the lamp."),
    "location": ("A tunnel under {L} runs to the old mint, where the stolen bullion lies buried.",
                 ["Under {L} a tunnel ran to the old mint, and the stolen bullion was buried there."],
                 ["There was more under {L} than cellars."],
                 "The old mint at {L} had been shut for years."),
    "faction": ("The {F} is paid by the Duke of Essery, who wants the river tolls for himself.",
                ["The {F} took the Duke of Essery's money; the Duke wanted the river tolls for himself."],
                ["Someone powerful was paying the {F}'s bills."],
                "The {F} met on the first Tuesday of the month."),
}

NEGATIVES: dict[str, list[tuple[str, str]]] = {
    # class -> [(variant, template)]; {A}: a character; {D}: a character unavailable since before K
    "paraphrase": [("eyes agree", "{A}'s {A.eyes} eyes narrowed as the boat drew in."),
                   ("hair agrees", "{A} pushed {A.his} {A.hair} hair out of {A.his} face."),
                   ("age agrees", "{A}, who was {A.age_w} years old, kept the ferry accounts."),
                   ("age agrees N-year-old", "{A} was a {A.age_w}-year-old {A.occupation} with a quick tongue."),
                   ("home agrees", "{A} was glad to be back home in {H}."),
                   ("lives in agrees", "{A} lives in {H}, above the chandler's shop."),
                   ("status agrees", "{A} was alive, and that was something."),
                   ("gray for grey", "{G}'s gray eyes gave nothing away.")],
    "memory": [("remembered D laughing", "{B} remembered {D} laughing at the forge."),
               ("recalled D used to", "{B} recalled how {D} used to sing on the quay."),
               ("dreams", "In {B.his} dreams {D} still walked the quay at dawn."),
               ("years ago", "Years ago {D} walked these streets every morning."),
               ("once old colour", "{A}'s hair was {c} once, before the fever."),
               ("memory of old home", "{B} remembered {A} in {Q}, laughing in the square.")],
    "quoted_speech": [("says A dead", "\"{A} is dead,\" {B} said flatly."),
                      ("quoted eye colour", "\"{A}'s eyes are {c},\" {B} lied."),
                      ("quoted: D walked", "\u2018I saw {D} walk into the tavern,\u2019 {B} insisted."),
                      ("quoted: tell D", "\"Tell {D} I said so,\" said {B}."),
                      ("quoted: lives in", "\"{A} lives in {Q} now,\" said the carter, who was wrong."),
                      ("quoted: D laughed", "\"{D} laughed at the whole thing,\" {B} told them.")],
    "negation": [("never colour", "{A}'s eyes were never {c}."),
                 ("did not live in", "{A} did not live in {Q}, whatever the clerk had written."),
                 ("no one saw D", "No one saw {D} leave the house."),
                 ("D never walked", "{D} never walked into that forge again."),
                 ("was not dead", "{A} was not dead, whatever the rumours said."),
                 ("nor hair", "{A}'s hair was not {c}, nor had it ever been.")],
    "past_perfect": [("had walked", "{D} had walked these streets every morning before the fever."),
                     ("had lived in", "{A} had lived in {Q} as a child."),
                     ("had been N", "{A} had been {nw} years old when the war began."),
                     ("had worn (irregular)", "{A} had worn {A.his} hair {c} in those days."),
                     ("had left", "{D} had left the harbour on the morning tide.")],
    "possessive": [("D's hammer", "{D}'s hammer still hung above the hearth."),
                   ("A's daughter eyes", "{A}'s daughter had {c} eyes."),
                   ("D's horse walked", "{D}'s horse walked on without its rider."),
                   ("A's brother lived in", "{A}'s brother, who lived in {Q}, sent no word."),
                   ("D's chair", "{D}'s chair stood empty by the window.")],
    "two_characters": [("whose eyes", "{A} stood beside {B}, whose eyes were {B.eyes}."),
                       ("B's eyes met A", "{B}'s {B.eyes} eyes met {A}'s."),
                       ("watched B tie hair", "{A} watched {B} tie back {B.his} {B.hair} hair."),
                       ("B years old", "{A} handed the cup to {B}, who was {B.age_w} years old and already a captain."),
                       ("B lives in", "{A} wrote to {B}, who lives in {BH} now."),
                       ("D and A object", "{A} spoke to the priest about {D}.")],
    "hypothetical": [("if D were here", "If {D} were here, {D.he} would know what to do."),
                     ("wished D could", "{B} wished {D} could see the harbour now."),
                     ("perhaps", "Perhaps {D} walked these streets once."),
                     ("might have", "{D} might have laughed at that."),
                     ("as if", "{B} kept glancing at the door, as if {D} walked in every evening.")],
    "timeline": [("acts before death", "{E} walked into the kitchen and sat down by the fire."),
                 ("dies this chapter", "{C} walked into the kitchen and sat down by the fire."),
                 ("hair before change", "{F0} pushed {F0.his} {F0.hair} hair out of {F0.his} face."),
                 ("age after birthday", "{F1}, who was {nw} years old, kept the ferry accounts."),
                 ("introduced this chapter", "{N} was waiting at the gate when they arrived."),
                 ("secret already revealed", "{R} was the lost heir of House Varen, smuggled out of the burning "
                                             "palace as a baby."),
                 ("brought back after retirement", "They rode into {L} at noon, and the streets were busy.")],
    "spoiler_near_miss": [("one shared term", "{S}"), ("shown facts only", "{T}")],
    "common_word_name": [("will", "They will ride north at first light."),
                         ("hope", "There was little hope of rain before the harvest."),
                         ("rose", "{B} rose from the chair and went to the window."),
                         ("mark", "The mark on the door was fresh."),
                         ("grace", "{B} bowed with a certain grace.")],
    "object_not_actor": [("stared at D", "{B} stared at {D} for a long moment."),
                         ("named after D", "They named the new boat after {D}."),
                         ("letter to D", "The letter on the table was addressed to {D}."),
                         ("asked about D", "{B} asked the warden about {D}.")],
}
COMMON_NAMES = {"will": "Will", "hope": "Hope", "rose": "Rose", "mark": "Mark", "grace": "Grace"}


class Generator:
    """The labelled set, deterministic for a seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    # -- canon ------------------------------------------------------------------------------------
    def cast(self, chapter: int, count: int, towns: list[str]) -> list[Char]:
        rng = self.rng
        firsts = rng.sample(FEMALE + MALE, count)
        surnames = rng.sample(SURNAMES, count)
        out = []
        for i, (first, surname) in enumerate(zip(firsts, surnames, strict=True)):
            occ = rng.choice(OCCUPATIONS)
            title = rng.choice(TITLES) if rng.random() < 0.3 else None
            out.append(Char(f"char-{i + 1}", first, surname, first in FEMALE, title, rng.choice(EYES), rng.choice(HAIR),
                            rng.randint(14, 68), rng.choice(towns), occ,
                            valid_from=rng.randint(1, max(1, chapter - 3))))
        return out

    def base(self, variant_chapter: int | None = None) -> dict[str, Any]:
        """A case's ordinary canon: 4-5 characters in force and alive, 3 towns, 1-2 items."""
        rng = self.rng
        chapter = variant_chapter or rng.randint(12, 400)
        names = rng.sample(TOWNS, 7)
        towns, spare = names[:3], names[3:]
        chars = self.cast(chapter, rng.randint(4, 5), towns)
        canon: list[Op] = []
        for t, town in enumerate(towns):
            canon.append(Version("location", f"loc-{t + 1}", town, (), f"{town} is a {rng.choice(PLACE_KINDS)}.",
                                 {"region": rng.choice(["north", "river quarter", "the marsh", "the hills"])},
                                 rng.randint(1, chapter - 1)))
        for c in chars:
            canon.append(c.version(text=f"{c.full} is {an(c.occupation)} of {c.home}. {rng.choice(TRAITS)}"))
        items = rng.sample(ITEMS, 3)
        for i, name in enumerate(items[:rng.randint(1, 2)]):
            canon.append(Version("item", f"item-{i + 1}", name, (), rng.choice(ITEM_TEXT), {},
                                 rng.randint(1, chapter - 1)))
        return {"chapter": chapter, "chars": chars, "towns": towns, "spare": spare, "items": items, "canon": canon}

    def draft(self, b: dict[str, Any], focus: str, *, avoid: Iterable[str] = ()) -> str:
        """A few sentences of prose around ``focus``: an opener, 2-4 fillers about characters in
        force and alive (none of ``avoid``), the focus sentence at a random place."""
        rng = self.rng
        live = [c for c in b["chars"] if c.key not in set(avoid) and c.filler]
        sentences = []
        for template in rng.sample(FILLERS, rng.randint(2, 4)):
            a, bb = rng.sample(live, 2)
            sentences.append(say(template, A=a, B=bb, P=rng.choice(b["towns"])))
        sentences.insert(rng.randint(0, len(sentences)), focus)
        opener = say(rng.choice(OPENERS), P=rng.choice(b["towns"]))
        body = [opener, *sentences]
        if len(body) > 4 and rng.random() < 0.5:
            cut = rng.randint(2, len(body) - 2)
            return " ".join(body[:cut]) + "\n\n" + " ".join(body[cut:])
        return " ".join(body)

    def case(self, category: str, variant: str, b: dict[str, Any], focus: str, labels: list[Label],
             avoid: Iterable[str] = ()) -> Case:
        self.n += 1
        return Case(f"g{self.n:04d}", "generated", category, variant, b["chapter"], self.draft(b, focus, avoid=avoid),
                    b["canon"], labels, focus)

    def other(self, b: dict[str, Any], *not_these: Char) -> Char:
        return self.rng.choice([c for c in b["chars"] if c not in not_these and c.filler])

    def unavailable(self, b: dict[str, Any], *, state: str | None = None, vocabulary: bool = False) -> Char:
        """A new character of ``b`` unavailable since before its chapter (alive first, then not)."""
        rng, k = self.rng, b["chapter"]
        d = self.cast(k, 1, b["towns"])[0]
        taken = {c.first for c in b["chars"]} | {c.surname for c in b["chars"]}
        while d.first in taken or d.surname in taken:
            d = self.cast(k, 1, b["towns"])[0]
        d.key = f"char-{len(b['chars']) + 1}"
        d.valid_from = rng.randint(1, max(1, k - 6))
        state = state or ("sleeping" if vocabulary else rng.choice(UNAVAILABLE_STATES))
        b["canon"].append(d.version())
        b["canon"].append(d.version(rng.randint(d.valid_from + 1, k - 1), status=state,
                                    text=f"{d.full} {STATE_REASONS[state]}."))
        if vocabulary:
            b["canon"].insert(0, Version("world_rule", "continuity", "Continuity vocabulary", (),
                                         "Words that keep a character from acting.", {"unavailable": "sleeping"}, 1))
        d.status, d.filler = state, False
        b["chars"].append(d)
        return d

    def new_char(self, b: dict[str, Any], valid_from: int) -> Char:
        taken = {c.first for c in b["chars"]} | {c.surname for c in b["chars"]}
        while True:
            x = self.cast(b["chapter"], 1, b["towns"])[0]
            if x.first not in taken and x.surname not in taken:
                break
        x.key = f"char-{len(b['chars']) + 1}"
        x.valid_from, x.filler = valid_from, False
        b["chars"].append(x)
        return x

    def colour(self, values: tuple[str, ...], not_this: str) -> str:
        return self.rng.choice([v for v in values if v != not_this])

    # -- positives --------------------------------------------------------------------------------
    def not_yet(self) -> Case:
        rng = self.rng
        b = self.base()
        k = b["chapter"]
        later = k + rng.randint(1, 120)
        kind = rng.choices(list(NOT_YET_T), weights=[4, 3, 2, 1])[0]
        variant, template = rng.choice(NOT_YET_T[kind])
        a, bb = rng.sample(b["chars"], 2)
        names: dict[str, Any] = {"A": a, "B": bb}
        if kind == "character":
            x = self.new_char(b, later)
            b["canon"].append(x.version())
            names["X"] = x.full if rng.random() < 0.5 else x.first
            key = x.key
        elif kind == "location":
            town = b["spare"][0]
            b["canon"].append(Version("location", "loc-new", town, (), f"{town} is a {rng.choice(PLACE_KINDS)}.",
                                      {}, later))
            names["L"], key = town, "loc-new"
        elif kind == "item":
            name = b["items"][2]
            the = rng.random() < 0.25
            b["canon"].append(Version("item", "item-new", f"The {name}" if the else name, (),
                                      rng.choice(ITEM_TEXT), {}, later))
            names["I"], key = name, "item-new"
            variant += " (named 'The ...')" if the else ""
        else:
            name = rng.choice(FACTIONS)
            b["canon"].append(Version("faction", "fac-new", name, (), f"The {name}, a sworn company.", {}, later))
            names["F"], key = name, "fac-new"
        return self.case(NOT_YET, variant, b, say(template, **names), [(NOT_YET, kind, key)])

    def retired(self) -> Case:
        rng = self.rng
        b = self.base()
        k = b["chapter"]
        kind = rng.choices(list(RETIRED_T), weights=[3, 3, 3, 1])[0]
        variant, template = rng.choice(RETIRED_T[kind])
        a, bb = rng.sample(b["chars"], 2)
        names: dict[str, Any] = {"A": a, "B": bb}
        gone = rng.randint(2, k - 1)
        if kind == "character":
            x = self.new_char(b, rng.randint(1, gone - 1))
            b["canon"].append(x.version())
            b["canon"].append(Retire("character", x.key, gone, "died of the fever; out of the story"))
            names["X"], key = (x.full if rng.random() < 0.5 else x.first), x.key
        elif kind == "location":
            town = b["spare"][0]
            b["canon"].append(Version("location", "loc-gone", town, (), f"{town} is a {rng.choice(PLACE_KINDS)}.",
                                      {}, rng.randint(1, gone - 1)))
            b["canon"].append(Retire("location", "loc-gone", gone, "razed in the river war"))
            names["L"], key = town, "loc-gone"
        elif kind == "item":
            name = b["items"][2]
            the = rng.random() < 0.25
            b["canon"].append(Version("item", "item-gone", f"The {name}" if the else name, (),
                                      rng.choice(ITEM_TEXT), {}, rng.randint(1, gone - 1)))
            b["canon"].append(Retire("item", "item-gone", gone, "destroyed in the fire at the customs house"))
            names["I"], key = name, "item-gone"
            variant += " (named 'The ...')" if the else ""
        else:
            name = rng.choice(FACTIONS)
            b["canon"].append(Version("faction", "fac-gone", name, (), f"The {name}, a sworn company.", {},
                                      rng.randint(1, gone - 1)))
            b["canon"].append(Retire("faction", "fac-gone", gone, "dissolved by the River Court"))
            names["F"], key = name, "fac-gone"
        return self.case(RETIRED, variant, b, say(template, **names), [(RETIRED, kind, key)])

    def spoiler(self) -> Case:
        rng = self.rng
        b = self.base()
        k = b["chapter"]
        until = k + rng.randint(1, 150)
        if rng.random() < 0.75:
            a, bb = rng.sample(b["chars"], 2)
            hidden, strong, weak, _ = rng.choice(SECRETS)
            names: dict[str, Any] = {"A": a, "B": bb}
            # the secret joins the entry as a later version, hidden until a later chapter
            b["canon"].append(a.version(rng.randint(a.valid_from, k),
                                        text=f"{a.full} is {an(a.occupation)} of {a.home}. " + say(hidden, A=a.full),
                                        hidden_until=until))
            kind, key = "character", a.key
        else:
            kind = rng.choice(list(THING_SECRETS))
            hidden, strong, weak, _ = THING_SECRETS[kind]
            a, bb = rng.sample(b["chars"], 2)
            names = {"A": a, "B": bb}
            if kind == "item":
                name = b["items"][0]
                first = next(op for op in b["canon"] if isinstance(op, Version) and op.key == "item-1")
                b["canon"].append(Version("item", "item-1", name, (), first.text + " " + say(hidden, I=name),
                                          {"hidden_until": until}, rng.randint(first.valid_from, k)))
                names["I"], key = name, "item-1"
            elif kind == "location":
                name = b["towns"][0]
                first = next(op for op in b["canon"] if isinstance(op, Version) and op.key == "loc-1")
                b["canon"].append(Version("location", "loc-1", name, (), first.text + " " + say(hidden, L=name),
                                          {**first.fields, "hidden_until": until}, rng.randint(first.valid_from, k)))
                names["L"], key = name, "loc-1"
            else:
                name = rng.choice(FACTIONS)
                vf = rng.randint(1, k - 1)
                b["canon"].append(Version("faction", "fac-1", name, (), f"The {name}, a sworn company.", {}, vf))
                b["canon"].append(Version("faction", "fac-1", name, (), f"The {name}, a sworn company. "
                                          + say(hidden, F=name), {"hidden_until": until}, rng.randint(vf, k)))
                names["F"], key = name, "fac-1"
        strong_or_weak = "strong" if rng.random() < 0.8 else "weak"
        pool = strong if strong_or_weak == "strong" else weak
        i = rng.randrange(len(pool))
        variant = f"{strong_or_weak} reveal {i + 1} ({kind})"
        return self.case(SPOILER, variant, b, say(pool[i], **names), [(SPOILER, kind, key)])

    def field_conflict(self) -> Case:
        rng = self.rng
        b = self.base()
        a = rng.choice(b["chars"])
        bb = self.other(b, a)
        which = rng.choices(["eyes", "hair", "age", "home", "status"], weights=[3, 3, 3, 3, 2])[0]
        names: dict[str, Any] = {"A": a, "B": bb, "P": rng.choice(b["towns"]), "occ": a.occupation}
        if which == "eyes":
            variant, template = rng.choice(EYES_T)
            names["c"] = self.colour(EYES, a.eyes)
        elif which == "hair":
            variant, template = rng.choice(HAIR_T)
            names["c"] = self.colour(HAIR, a.hair)
        elif which == "age":
            variant, template = rng.choice(AGE_T)
            n = rng.choice([x for x in range(14, 70) if abs(x - a.age) >= 2])
            names.update(n=n, nw=number_words(n))
        elif which == "home":
            variant, template = rng.choice(HOME_T)
            names["Q"] = rng.choice([t for t in b["towns"] if t != a.home])
            names["U"] = b["spare"][1]
        else:
            variant, template, canon_state, _ = rng.choice(STATUS_T)
            if canon_state != "alive":  # the character is dead in canon, and the draft says alive
                a = self.unavailable(b, state=canon_state)
                names["A"] = a
        return self.case(FIELD_CONFLICT, variant, b, say(template, **names),
                         [(FIELD_CONFLICT, "character", a.key)], avoid=[a.key])

    def unavailable_character(self) -> Case:
        rng = self.rng
        b = self.base()
        d = self.unavailable(b, vocabulary=rng.random() < 0.1)
        variant, template = rng.choice(UNAVAILABLE_T)
        bb = self.other(b, d)
        if d.status == "sleeping":
            variant += " (story vocabulary)"
        return self.case(UNAVAILABLE_CHARACTER, variant, b, say(template, A=d, B=bb),
                         [(UNAVAILABLE_CHARACTER, "character", d.key)], avoid=[d.key])

    # -- hard negatives ---------------------------------------------------------------------------
    def negative(self, klass: str) -> Case:
        rng = self.rng
        b = self.base()
        k = b["chapter"]
        variant, template = rng.choice(NEGATIVES[klass])
        a = rng.choice(b["chars"])
        bb = self.other(b, a)
        names: dict[str, Any] = {"A": a, "B": bb, "H": a.home, "Q": rng.choice([t for t in b["towns"] if t != a.home]),
                                 "BH": bb.home, "c": self.colour(EYES if "eye" in variant else HAIR, a.eyes
                                                                   if "eye" in variant else a.hair)}
        names["n"] = n = rng.choice([x for x in range(14, 70) if abs(x - a.age) >= 2])
        names["nw"] = number_words(n)
        if "{D" in template:
            names["D"] = self.unavailable(b)
        if klass == "paraphrase" and variant == "gray for grey":
            a.eyes = "grey"
            b["canon"] = [a.version(text=op.text) if isinstance(op, Version) and op.key == a.key else op
                          for op in b["canon"]]
            names["G"] = a
        if klass == "timeline":
            names.update(self._timeline(b, variant, a))
        if klass == "spoiler_near_miss":
            hidden, _, _, near = rng.choice(SECRETS)
            b["canon"].append(a.version(rng.randint(a.valid_from, k),
                                        text=f"{a.full} is {an(a.occupation)} of {a.home}. " + say(hidden, A=a.full),
                                        hidden_until=k + rng.randint(1, 100)))
            names["S"] = say(near, A=a)
            names["T"] = say(f"{{A}}, the {a.occupation} from {a.home}, was in no hurry.", A=a)
        if klass == "common_word_name":
            first = COMMON_NAMES[variant]
            x = self.new_char(b, rng.randint(1, k - 2))
            x.first, x.female = first, first in ("Hope", "Rose", "Grace")
            b["canon"].append(x.version())
            b["canon"].append(x.version(rng.randint(x.valid_from + 1, k - 1), status="dead",
                                        text=f"{x.full} died of the fever."))
            x.status = "dead"
        avoid = [names["D"].key] if "D" in names else []
        return self.case(klass, variant, b, say(template, **names), [], avoid=avoid)

    def _timeline(self, b: dict[str, Any], variant: str, a: Char) -> dict[str, Any]:
        rng, k = self.rng, b["chapter"]
        if variant == "acts before death":
            e = self.new_char(b, rng.randint(1, k - 1))
            b["canon"] += [e.version(), e.version(k + rng.randint(1, 40), status="dead", text=f"{e.full} drowned.")]
            return {"E": e}
        if variant == "dies this chapter":
            e = self.new_char(b, rng.randint(1, k - 1))
            b["canon"] += [e.version(), e.version(k, status="dead", text=f"{e.full} is killed at the ford.")]
            return {"C": e}
        if variant == "hair before change":
            b["canon"].append(a.version(k + rng.randint(1, 30), hair=self.colour(HAIR, a.hair),
                                        text=f"{a.full} dyes {a.his} hair to hide from the wardens."))
            return {"F0": a}
        if variant == "age after birthday":
            b["canon"].append(a.version(rng.randint(a.valid_from + 1, k), age=a.age + 1))
            return {"F1": a, "nw": number_words(a.age + 1)}
        if variant == "introduced this chapter":
            x = self.new_char(b, k)
            b["canon"].append(x.version())
            return {"N": x.full}
        if variant == "secret already revealed":
            b["canon"].append(a.version(rng.randint(a.valid_from, k), hidden_until=rng.randint(a.valid_from, k),
                                        text=f"{a.full} is the lost heir of House Varen, smuggled out of the "
                                             "burning palace as an infant."))
            return {"R": a}
        # brought back after retirement
        town = b["spare"][0]
        first = rng.randint(1, k - 3)
        gone = rng.randint(first + 1, k - 2)
        back = rng.randint(gone + 1, k)
        b["canon"] += [Version("location", "loc-back", town, (), f"{town} is a walled town.", {}, first),
                       Retire("location", "loc-back", gone, "razed in the river war"),
                       Version("location", "loc-back", town, (), f"{town}, rebuilt after the war.", {}, back)]
        return {"L": town}

    def build(self, per_type: int, per_class: int) -> list[Case]:
        makers: list[tuple[str, Callable[[], Case]]] = [
            (NOT_YET, self.not_yet), (RETIRED, self.retired), (SPOILER, self.spoiler),
            (FIELD_CONFLICT, self.field_conflict), (UNAVAILABLE_CHARACTER, self.unavailable_character)]
        out = [make() for _, make in makers for _ in range(per_type)]
        out += [self.negative(klass) for klass in NEGATIVES for _ in range(per_class)]
        return out


# -- who knows what (issue 43): the knowledge_leak set --------------------------------------------
# Per SECRETS entry (same order): the secret as a character says it of {A} (no closing stop), and
# as {A} says it of itself.
SPOKEN = [
    ("{A} is the lost heir of House Varen, smuggled out of the burning palace as a baby",
     "I am the lost heir of House Varen; they smuggled me out of the burning palace as a baby"),
    ("{A} poisoned the old harbourmaster with foxglove from the chapel garden",
     "I poisoned the old harbourmaster with foxglove from the chapel garden"),
    ("{A} is a spy for the Salt Guild and sends word of every sailing to the masters in Corve",
     "I am a spy for the Salt Guild, and I send word of every sailing to the masters in Corve"),
    ("{A} survived the wreck of the Marigold and hides at the abbey as Brother Ansel",
     "I survived the wreck of the Marigold, and at the abbey they call me Brother Ansel"),
    ("{A} set the warehouse fire to burn the missing tax ledgers",
     "I set the warehouse fire to burn the missing tax ledgers"),
    ("{A} married the magistrate in secret at Saint Brannoc's chapel",
     "I married the magistrate in secret at Saint Brannoc's chapel"),
    ("{A} carries the grey fever, and no sign of it shows yet",
     "I carry the grey fever, though no sign of it shows yet"),
    ("{A} killed Captain Dorne on the night of the flood and sank the body in the lock",
     "I killed Captain Dorne on the night of the flood and sank the body in the lock"),
]
THING_SPOKEN = {
    "item": "The {I} is a forgery; the true one was melted down in the siege of Corve",
    "location": "There is a tunnel under {L} to the old mint, and the stolen bullion is buried there",
    "faction": "The {F} takes the Duke of Essery's money; the Duke wants the river tolls for himself",
}
# A character speaks the secret ({S}: its words; {s}: the same with a lower-case first letter
# unless it opens with a name); {B} the speaker, {C} another character.
LEAK_SPEECH = [
    ("said B, after", '"{S}," said {B}.'),
    ("B said, after", '"{S}," {B} said.'),
    ("B whispered to C", '"{S}," {B} whispered to {C}.'),
    ("B said, before", '{B} said quietly, "{S}."'),
    ("asked B, a question", '"Is it true that {s}?" asked {B}.'),
    ("B told C", '"{S}," {B} told {C}.'),
    ("B muttered", '"{S}," {B} muttered.'),
    ("pronoun speech tag", '{B} leaned across the table. "{S}," {B.he} said.'),
]
# The point-of-view character named in narration that holds the secret ({N}: the secret told in
# narration, ``SECRETS``' first strong reveal; {Nc}: without its closing stop).
LEAK_POV = [
    ("P knew the truth", "{P} knew the truth: {N}"),
    ("P watched A and thought", "{P} watched {A} across the room and thought of it again: {n}"),
    ("N, and P knew it", "{Nc}, and {P} knew it."),
    ("P remembered", "{P} remembered the night {P.he} found out: {N}"),
]
KNOWLEDGE_NEGATIVES = {
    # class -> variants; what the case records and which character speaks or narrates is set by
    # ``KnowledgeGenerator.negative``
    "knows_before": ["speech, B known before the chapter", "POV narration, P known before the chapter"],
    "own_secret": ["A says it of itself", "A is the POV and holds it"],
    "near_miss": ["B says the near-miss", "POV narration of the near-miss"],
    "narration_no_pov": ["B named, no POV in the chapter", "no character but A named, no POV"],
    "pov_not_named": ["POV in the sentence before", "B named, the POV elsewhere"],
    "pov_told_by_knower": ["C who knows tells the POV"],
    "pov_unaware": ["P had no idea that"],
}


def _lower_first(text: str, name: str) -> str:
    return text if text.startswith(name) else text[:1].lower() + text[1:]


class KnowledgeGenerator(Generator):
    """The knowledge_leak positives and hard negatives: each case a canon (as ``base``) in which
    a character's entry (or an item's, a place's, a faction's) has a version in force with
    ``fields.secret``, knowledge records, and a chapter point of view. Its own random stream
    (the other types' cases do not change with it)."""

    def __init__(self, seed: int, start: int) -> None:
        super().__init__(seed)
        self.rng = random.Random(f"knowledge-{seed}")
        self.n = start

    def secret(self, b: dict[str, Any], thing: bool) -> tuple[str, str, dict[str, Any], Any]:
        """A secret added to ``b``'s canon: (kind, key, names for the templates, its holder
        character or None)."""
        rng, k = self.rng, b["chapter"]
        a = rng.choice(b["chars"])
        if not thing:
            i = rng.randrange(len(SECRETS))
            hidden, strong, _, near = SECRETS[i]
            b["canon"].append(a.version(rng.randint(a.valid_from, k - 1),
                                        text=f"{a.full} is {an(a.occupation)} of {a.home}. " + say(hidden, A=a.full),
                                        secret=True))
            spoken, own = SPOKEN[i]
            names = {"A": a, "S": say(spoken, A=a), "I": own, "N": say(strong[0], A=a), "near": say(near, A=a)}
            return "character", a.key, names, a
        kind = rng.choice(list(THING_SECRETS))
        hidden, strong, _, near = THING_SECRETS[kind]
        if kind == "item":
            name = b["items"][0]
            key = "item-1"
            first = next(op for op in b["canon"] if isinstance(op, Version) and op.key == key)
            fields: dict[str, Any] = {"secret": True}
            text = first.text + " " + say(hidden, I=name)
            vf = rng.randint(first.valid_from, k - 1) if first.valid_from < k else k
            sub = {"I": name}
        elif kind == "location":
            name = b["towns"][0]
            key = "loc-1"
            first = next(op for op in b["canon"] if isinstance(op, Version) and op.key == key)
            fields = {**first.fields, "secret": True}
            text = first.text + " " + say(hidden, L=name)
            vf = rng.randint(first.valid_from, k - 1) if first.valid_from < k else k
            sub = {"L": name}
        else:
            name = rng.choice(FACTIONS)
            key = "fac-1"
            first_vf = rng.randint(1, k - 2)
            b["canon"].append(Version("faction", key, name, (), f"The {name}, a sworn company.", {}, first_vf))
            fields, text = {"secret": True}, f"The {name}, a sworn company. " + say(hidden, F=name)
            vf = rng.randint(first_vf, k - 1)
            sub = {"F": name}
        b["canon"].append(Version(kind, key, name, (), text, fields, vf))
        names = {"A": a, "S": say(THING_SPOKEN[kind], **sub), "N": say(strong[0], **sub), "near": say(near, **sub)}
        return kind, key, names, None

    def knows(self, b: dict[str, Any], who: Char, kind: str, key: str, lo: int, hi: int) -> tuple[str, str, str, int]:
        """A knowledge record of ``who`` for the entry, from a chapter in [lo, hi] at which both
        are in canon."""
        first = min(op.valid_from for op in b["canon"] if isinstance(op, Version) and op.key == key)
        lo = max(lo, first, who.valid_from)
        return (who.key, kind, key, self.rng.randint(lo, max(lo, hi)))

    def _fill(self, names: dict[str, Any], template: str) -> str:
        first = names["A"].first
        return say(template, **{**names, "s": _lower_first(names["S"], first), "n": _lower_first(names["N"], first),
                                "Nc": names["N"].rstrip(".")})

    def knowledge_leak(self) -> Case:
        rng = self.rng
        b = self.base()
        k = b["chapter"]
        kind, key, names, holder = self.secret(b, thing=rng.random() < 0.25)
        others = [c for c in b["chars"] if c is not holder]
        speaker, listener, pov = rng.sample(others, 3) if len(others) >= 3 else (others[0], others[1], others[0])
        names.update(B=speaker, C=listener, P=pov)
        mode = rng.choices(["speech", "pov", "learns later", "knows another entry"], weights=[5, 3, 1, 1])[0]
        known: list[tuple[str, str, str, int]] = []
        povs: tuple[str, ...] = ()
        if mode == "pov":
            variant, template = rng.choice(LEAK_POV)
            who, povs = pov, (pov.key,)
        else:
            variant, template = rng.choice(LEAK_SPEECH)
            who = speaker
            if rng.random() < 0.4 and pov is not speaker:
                povs = (pov.key,)  # a point of view who is not the speaker
            if mode == "learns later":
                known.append((speaker.key, kind, key, k + rng.randint(1, 30)))
            elif mode == "knows another entry":
                known.append(self.knows(b, speaker, "character", listener.key, 1, k - 1))
            if mode != "speech":
                variant = f"{variant} ({mode})"
        if mode == "pov" and kind != "character":
            variant += f" ({kind})"
        elif kind != "character":
            variant += f" ({kind})"
        c = self.case(KNOWLEDGE_LEAK, variant, b, self._fill(names, template), [(KNOWLEDGE_LEAK, kind, key)])
        c.povs, c.known, c.who = povs, tuple(known), who.full
        return c

    def negative(self, klass: str) -> Case:
        rng = self.rng
        b = self.base()
        k = b["chapter"]
        variant = rng.choice(KNOWLEDGE_NEGATIVES[klass])
        thing = rng.random() < 0.25 and klass not in ("own_secret",)
        kind, key, names, holder = self.secret(b, thing=thing)
        others = [c for c in b["chars"] if c is not holder]
        speaker, listener, pov = rng.sample(others, 3) if len(others) >= 3 else (others[0], others[1], others[0])
        names.update(B=speaker, C=listener, P=pov)
        vf = max(op.valid_from for op in b["canon"] if isinstance(op, Version) and op.key == key)
        known: list[tuple[str, str, str, int]] = []
        povs: tuple[str, ...] = ()
        if klass == "knows_before":
            if variant.startswith("speech"):
                focus_t = rng.choice([t for v, t in LEAK_SPEECH if v != "pronoun speech tag"])
                known.append(self.knows(b, speaker, kind, key, vf, k - 1))
            else:
                focus_t = rng.choice(LEAK_POV)[1]
                known.append(self.knows(b, pov, kind, key, vf, k - 1))
                povs = (pov.key,)
            assert known[0][3] < k, known
        elif klass == "own_secret":
            names["B"] = names["P"] = holder
            if variant == "A says it of itself":
                focus_t = rng.choice(['"{I}," said {A}.', '{A} said quietly, "{I}."', '"{I}," {A} whispered to {C}.'])
            else:
                focus_t = rng.choice([t for v, t in LEAK_POV if v != "P watched A and thought"])
                povs = (holder.key,)
        elif klass == "near_miss":
            names["near_c"] = names["near"].rstrip(".")
            if variant.startswith("B says"):
                focus_t = rng.choice(['"{near_c}," said {B}.', '{B} said, "{near_c}."', '"{near_c}," {B} told {C}.'])
            else:
                focus_t = rng.choice(["{P} saw it: {near}", "{P} looked away. {near}", "{near_c}, and {P} saw it."])
                povs = (pov.key,)
        elif klass == "narration_no_pov":
            focus_t = "{B} knew the truth: {N}" if variant.startswith("B named") else "{N}"
        elif klass == "pov_not_named":
            povs = (pov.key,)
            focus_t = ("{P} came in out of the rain. {N}" if variant.startswith("POV in the sentence before")
                       else "{B} knew the truth: {N}")
        elif klass == "pov_told_by_knower":
            povs = (pov.key,)
            known.append(self.knows(b, listener, kind, key, vf, k - 1))
            focus_t = rng.choice(['"{S}," said {C} to {P}.', '{C} took {P} aside. "{S}," said {C}.',
                                  '"{S}," {C} said, and {P} stared at {C.him}.'])
        else:  # pov_unaware
            povs = (pov.key,)
            focus_t = rng.choice(["{P} had no idea that {n}", "{P} did not know that {n}",
                                  "{P} never guessed that {n}"])
        c = self.case(klass, variant + (f" ({kind})" if kind != "character" else ""), b,
                      self._fill(names, focus_t), [])
        c.povs, c.known = povs, tuple(known)
        return c

    def build(self, per_type: int, per_class: int) -> list[Case]:
        out = [self.knowledge_leak() for _ in range(per_type)]
        out += [self.negative(klass) for klass in KNOWLEDGE_NEGATIVES for _ in range(per_class)]
        return out


# -- the real text: Pride and Prejudice ----------------------------------------------------------
def _ch(name: str, key: str, aliases: tuple[str, ...], text: str, fields: dict[str, Any], vf: int) -> Version:
    return Version("character", key, name, aliases, text, fields, vf)


def _loc(name: str, key: str, aliases: tuple[str, ...], text: str, vf: int) -> Version:
    return Version("location", key, name, aliases, text, {}, vf)


ELIZABETH = {"home": "Longbourn", "eyes": "dark", "age": 20, "status": "alive"}
LYDIA = {"home": "Longbourn", "age": 15, "status": "alive"}
WICKHAM_TEXT = "An officer newly commissioned in the militia at Meryton; handsome, with easy, pleasing manners."
DARCY_TEXT = "Mr. Bingley's friend, of Pemberley in Derbyshire; ten thousand a year; proud and reserved."
PP_CANON: list[Op] = [  # chapters as ``domain.manuscript.split`` numbers them (1-61)
    _ch("Elizabeth Bennet", "elizabeth", ("Elizabeth", "Lizzy", "Eliza"),
        "Second daughter of Mr. and Mrs. Bennet of Longbourn; quick, lively, fond of walking.", ELIZABETH, 1),
    _ch("Jane Bennet", "jane", ("Jane",), "Eldest of the Bennet daughters; beautiful, gentle, thinks well of all.",
        {"home": "Longbourn", "age": 22, "status": "alive"}, 1),
    _ch("Lydia Bennet", "lydia", ("Lydia",), "Youngest Bennet daughter; loud, idle, mad about officers.", LYDIA, 1),
    _ch("Charles Bingley", "bingley", ("Bingley", "Mr. Bingley"), "A young man of large fortune from the north of "
        "England; has taken Netherfield Park.", {"home": "Netherfield", "status": "alive"}, 1),
    _ch("Fitzwilliam Darcy", "darcy", ("Darcy", "Mr. Darcy"), DARCY_TEXT, {"home": "Pemberley", "status": "alive"}, 3),
    _ch("Charlotte Lucas", "charlotte", ("Charlotte",), "Eldest daughter of Sir William Lucas; sensible, plain, "
        "Elizabeth's intimate friend.", {"home": "Lucas Lodge", "age": 27, "status": "alive"}, 5),
    _ch("Georgiana Darcy", "georgiana", ("Georgiana", "Miss Darcy"), "Mr. Darcy's sister, much younger than he.",
        {"home": "Pemberley", "status": "alive"}, 8),
    _ch("William Collins", "collins", ("Mr. Collins",), "Mr. Bennet's cousin and heir to Longbourn; rector of "
        "Hunsford.", {"home": "Hunsford", "status": "alive"}, 13),
    _ch("Lady Catherine de Bourgh", "lady-catherine", ("Lady Catherine",), "Mr. Collins's patroness; Mr. Darcy's "
        "aunt.", {"home": "Rosings", "status": "alive"}, 13),
    _ch("George Wickham", "wickham", ("Wickham", "Mr. Wickham"), WICKHAM_TEXT, {"status": "alive"}, 15),
    # the secret Darcy's letter tells (chapter 35)
    _ch("George Wickham", "wickham", ("Wickham", "Mr. Wickham"), WICKHAM_TEXT + " He tried to persuade Georgiana "
        "Darcy, then fifteen, to elope with him from Ramsgate, for the sake of her fortune of thirty thousand pounds, "
        "and was stopped only when Darcy arrived.", {"status": "alive", "hidden_until": 35}, 16),
    _ch("Mary King", "mary-king", (), "A young lady of Meryton who has lately come into ten thousand "
        "pounds; Mr. Wickham pays her his attentions.", {"home": "Meryton", "status": "alive"}, 26),
    Retire("character", "mary-king", 40, "carried off to her uncle at Liverpool; out of the story"),
    _ch("Colonel Fitzwilliam", "fitzwilliam", ("Colonel Fitzwilliam",), "Younger son of an earl; Mr. Darcy's "
        "cousin.", {"status": "alive"}, 30),
    Retire("character", "fitzwilliam", 48, "returned to his regiment; out of the story"),
    _ch("Lydia Bennet", "lydia", ("Lydia",), "Gone to Brighton as the particular friend of Mrs. Forster.",
        {**LYDIA, "home": "Brighton", "age": 16}, 41),
    _ch("Lydia Bennet", "lydia", ("Lydia",), "Eloped from Brighton with Wickham; not found.",
        {**LYDIA, "home": "Brighton", "age": 16, "status": "missing"}, 46),
    _ch("George Wickham", "wickham", ("Wickham", "Mr. Wickham"), WICKHAM_TEXT + " Eloped from Brighton with Lydia "
        "Bennet; not found.", {"status": "missing"}, 46),
    _ch("Lydia Bennet", "lydia", ("Lydia",), "Found in London with Wickham by her uncle Gardiner.",
        {**LYDIA, "home": "London", "age": 16, "status": "alive"}, 49),
    _ch("George Wickham", "wickham", ("Wickham", "Mr. Wickham"), WICKHAM_TEXT + " Found in London.",
        {"status": "alive"}, 49),
    # the secret Mrs. Gardiner's letter tells (chapter 52)
    _ch("Fitzwilliam Darcy", "darcy", ("Darcy", "Mr. Darcy"), DARCY_TEXT + " Darcy himself found Wickham and Lydia "
        "in London, paid his debts and purchased his commission, so that he would marry her.",
        {"home": "Pemberley", "status": "alive", "hidden_until": 52}, 49),
    _loc("Longbourn", "longbourn", (), "The Bennets' estate in Hertfordshire, entailed on Mr. Collins.", 1),
    _loc("Netherfield", "netherfield", ("Netherfield Park",), "A large house near Longbourn, let to Mr. Bingley.", 1),
    _loc("Meryton", "meryton", (), "The market town a mile from Longbourn; the militia's winter quarters.", 1),
    _loc("Lucas Lodge", "lucas-lodge", (), "Sir William Lucas's house near Meryton.", 5),
    _loc("Pemberley", "pemberley", (), "Mr. Darcy's estate in Derbyshire.", 6),
    _loc("Hunsford", "hunsford", (), "Mr. Collins's parish in Kent, near Rosings.", 13),
    _loc("Rosings", "rosings", ("Rosings Park",), "Lady Catherine de Bourgh's estate in Kent.", 13),
    _loc("Brighton", "brighton", (), "The seaside camp where the regiment spends the summer.", 39),
    _loc("Lambton", "lambton", (), "The Derbyshire village where Mrs. Gardiner grew up, five miles from Pemberley.",
         42),
]
PP_CHAPTERS = (3, 6, 9, 12, 16, 18, 22, 29, 33, 35, 41, 43, 47, 50, 51, 52, 55)
# (chapter, label or None, how, text, where): how "insert" puts text before paragraph ``where``
# (a number) ; "replace" replaces the string ``where`` with text. A label-less edit is an
# injected hard negative.
PP_EDITS: list[tuple[int, Label | None, str, str, Any]] = [
    (3, (NOT_YET, "character", "wickham"), "insert",
     "Mr. Wickham, in his red coat, stood laughing by the door with two of the officers.", 4),
    (6, (NOT_YET, "character", "lady-catherine"), "insert",
     "Lady Catherine sent her compliments and a haunch of venison to Netherfield.", 6),
    (12, (NOT_YET, "character", "collins"), "insert",
     "Mr. Collins bowed very low to Mr. Bingley and begged leave to introduce himself.", 3),
    (9, (NOT_YET, "location", "brighton"), "insert",
     "Lydia talked of nothing but the sea-bathing at Brighton, and of the camp there.", 5),
    (9, (FIELD_CONFLICT, "character", "lydia"), "replace", "a stout, well-grown girl of seventeen",
     "a stout, well-grown girl of fifteen"),
    (22, (FIELD_CONFLICT, "character", "charlotte"), "insert",
     "Charlotte, who was thirty-two years old, had never been handsome.", 6),
    (43, (FIELD_CONFLICT, "character", "elizabeth"), "insert",
     "Elizabeth turned to the window, her blue eyes fixed on the woods across the valley.", 8),
    (33, (FIELD_CONFLICT, "character", "darcy"), "insert",
     "Mr. Darcy, whose home was at Netherfield, spoke of going back there before the summer.", 6),
    (55, (FIELD_CONFLICT, "character", "jane"), "insert",
     "Jane, who was now twenty-six years old, had begun to fear that she would never marry.", 5),
    (16, (SPOILER, "character", "wickham"), "insert",
     "Everyone at Longbourn would learn soon enough that Wickham had tried to elope with Miss Darcy at Ramsgate, "
     "for the sake of her thirty thousand pounds.", 10),
    (18, (SPOILER, "character", "wickham"), "insert",
     "\"Mr. Wickham once persuaded Georgiana to elope with him from Ramsgate,\" whispered Charlotte, \"for her "
     "fortune, and he was stopped only when her brother arrived.\"", 12),
    (29, (SPOILER, "character", "wickham"), "insert",
     "Elizabeth did not yet know that Wickham had tried to carry off Darcy's young sister from Ramsgate, or that "
     "her thirty thousand pounds had been the prize.", 7),
    (50, (SPOILER, "character", "darcy"), "insert",
     "It was Mr. Darcy who had found Wickham and Lydia in London, paid his debts and purchased his commission.", 6),
    (41, (RETIRED, "character", "mary-king"), "insert",
     "Mary King walked with Lydia and Kitty to the camp that afternoon.", 6),
    (50, (RETIRED, "character", "mary-king"), "insert",
     "Mary King sent her congratulations from Liverpool, in a very pretty letter.", 4),
    (3, (FIELD_CONFLICT, "character", "jane"), "insert",
     "Jane, who was nineteen years old, danced twice with Mr. Bingley.", 6),
    (33, (NOT_YET, "location", "lambton"), "insert",
     "Colonel Fitzwilliam spoke of the inn at Lambton and its excellent dinners.", 5),
    (47, (UNAVAILABLE_CHARACTER, "character", "lydia"), "insert",
     "\"We are off to Gretna Green,\" said Lydia, tying on her bonnet.", 11),
    (16, (FIELD_CONFLICT, "character", "elizabeth"), "insert",
     "Elizabeth came home to Netherfield that evening with her head full of Mr. Wickham.", 12),
    (55, (RETIRED, "character", "fitzwilliam"), "insert",
     "Colonel Fitzwilliam rode over from Rosings to wish them joy.", 7),
    (47, (UNAVAILABLE_CHARACTER, "character", "lydia"), "insert",
     "Lydia laughed and ran down the stairs to meet them.", 9),
    (47, (UNAVAILABLE_CHARACTER, "character", "wickham"), "insert",
     "Wickham strode into the breakfast-room at Longbourn as if nothing had happened.", 14),
    (47, None, "insert", "Elizabeth remembered Lydia laughing on the stairs at Longbourn.", 9),
    (47, None, "insert", "Lydia's room was just as she had left it, her bonnet still on the chair.", 12),
    (47, None, "insert", "\"Lydia is dead to us,\" said Mary, with great solemnity.", 15),
    (43, None, "insert", "Elizabeth's dark eyes were fixed on the woods across the valley.", 8),
    (16, None, "insert", "Wickham walked beside her as far as the shops of Meryton.", 10),
    (47, None, "insert", "Lydia's letter lay open on the table where Jane had left it.", 6),
    (47, None, "insert", "If Lydia walked in now, her mother would faint away.", 16),
    (16, None, "insert", "Charlotte, who was twenty-seven years old, thought Mr. Wickham very agreeable.", 8),
    (43, None, "insert", "Mr. Darcy was glad to be home at Pemberley again.", 10),
    (35, None, "insert", "So Wickham had tried to elope with Miss Darcy at Ramsgate, for the sake of her thirty "
                         "thousand pounds.", 8),
]


def pp_chapters() -> dict[int, str]:
    from canon_ledger.domain.manuscript import split

    book = split(gzip.decompress(PP_PATH.read_bytes()).decode("utf-8-sig"))
    return {c.number: c.text for c in book.chapters}


# Who knows what (issue 43) on the same chapters: the canon above, but Wickham's Ramsgate attempt
# a secret (``fields.secret``, not hidden) from chapter 16, known to Darcy and Georgiana from 16,
# to Colonel Fitzwilliam from 30 and to Elizabeth from 35 (Darcy's letter); every chapter's point
# of view is Elizabeth's. The real chapters unedited are negatives; each edit one case.
PP_KNOWLEDGE_CANON: list[Op] = [
    Version(op.kind, op.key, op.name, op.aliases, op.text, {"status": "alive", "secret": True}, op.valid_from)
    if isinstance(op, Version) and op.key == "wickham" and op.fields.get("hidden_until") == 35 else op
    for op in PP_CANON]
PP_KNOWN = (("darcy", "character", "wickham", 16), ("georgiana", "character", "wickham", 16),
            ("fitzwilliam", "character", "wickham", 30), ("elizabeth", "character", "wickham", 35))
PP_POVS = ("elizabeth",)
PP_KNOWLEDGE_EDITS: list[tuple[int, Label | None, str, str, Any]] = [
    (18, (KNOWLEDGE_LEAK, "character", "wickham"), "insert",
     "\"Mr. Wickham once tried to persuade Miss Darcy to elope with him from Ramsgate, for her thirty thousand "
     "pounds,\" said Elizabeth.", 12),
    (29, (KNOWLEDGE_LEAK, "character", "wickham"), "insert",
     "Elizabeth knew very well that Wickham had tried to elope with Georgiana Darcy from Ramsgate, for the sake of "
     "her fortune.", 7),
    (22, (KNOWLEDGE_LEAK, "character", "wickham"), "insert",
     "\"They say Wickham tried to carry Miss Darcy off from Ramsgate when she was fifteen, for her fortune,\" "
     "Charlotte whispered.", 6),
    (41, (KNOWLEDGE_LEAK, "character", "wickham"), "insert",
     "\"Wickham tried to elope with Miss Darcy from Ramsgate, for her thirty thousand pounds,\" said Jane.", 6),
    (33, (KNOWLEDGE_LEAK, "character", "wickham"), "insert",
     "Elizabeth thought of Ramsgate, and of how Wickham had tried to persuade Georgiana, then fifteen, to elope "
     "with him.", 5),
    (43, None, "insert", "\"Wickham once persuaded my sister to elope with him from Ramsgate, for her thirty "
                         "thousand pounds,\" said Mr. Darcy.", 8),
    (41, None, "insert", "\"Wickham tried to persuade Georgiana Darcy to elope with him from Ramsgate, for her "
                         "fortune,\" Elizabeth said.", 6),
    (43, None, "insert", "Elizabeth knew now what Wickham had tried at Ramsgate with Miss Darcy, for the sake of her "
                         "thirty thousand pounds.", 10),
    (16, None, "insert", "Wickham had once tried to elope with Georgiana Darcy from Ramsgate, for the sake of her "
                         "thirty thousand pounds.", 10),
    (18, None, "insert", "\"Miss Darcy is at Pemberley, and Mr. Wickham was brought up there,\" said Elizabeth.", 12),
    (33, None, "insert", "\"Wickham once tried to elope with Georgiana from Ramsgate, for her fortune,\" said "
                         "Colonel Fitzwilliam to Elizabeth.", 5),
]


def real_cases(canon: list[Op] | None = None, edits: list[tuple[int, Label | None, str, str, Any]] | None = None,
               prefix: str = "pp", group: str = "real", povs: tuple[str, ...] = (),
               known: tuple[tuple[str, str, str, int], ...] = ()) -> list[Case]:
    """The real chapters unedited and each edit (``PP_EDITS`` against ``PP_CANON`` by default)."""
    texts = pp_chapters()
    canon = list(PP_CANON if canon is None else canon)
    edits = PP_EDITS if edits is None else edits
    out = []
    for ch in PP_CHAPTERS:
        out.append(Case(f"{prefix}-ch{ch:02d}", "real", f"{group}: unedited chapter", "unedited", ch, texts[ch], canon,
                        povs=povs, known=known))
    for n, (ch, label, how, text, where) in enumerate(edits, 1):
        base = texts[ch]
        if how == "replace":
            at = base.find(where)
            assert at >= 0, f"chapter {ch}: {where!r} not found"
            edited = base[:at] + text + base[at + len(where):]
        else:
            starts = [0] + [m.end() for m in re.finditer(r"\n\s*\n", base)]
            at = starts[min(where, len(starts) - 1)]
            text += "\n\n"
            edited = base[:at] + text + base[at:]
        category = label[0] if label else f"{group}: injected hard negative"
        out.append(Case(f"{prefix}-e{n:02d}", "real", category, f"ch {ch} edit", ch, edited, canon,
                        [label] if label else [], text.strip(), (at, at + len(text)), f"{prefix}-ch{ch:02d}",
                        povs=povs, known=known))
    return out


def real_knowledge_cases() -> list[Case]:
    return real_cases(PP_KNOWLEDGE_CANON, PP_KNOWLEDGE_EDITS, "ppk", "real, who knows", PP_POVS, PP_KNOWN)


def pp_canon_warnings(texts: dict[int, str]) -> list[str]:
    """Entries the unedited real chapters name before they are in canon (a canon mistake here,
    not a finding)."""
    out = []
    first: dict[tuple[str, str], int] = {}
    for op in PP_CANON:
        if isinstance(op, Version):
            first.setdefault((op.kind, op.key), op.valid_from)
    for op in PP_CANON:
        if isinstance(op, Version) and first[(op.kind, op.key)] == op.valid_from:
            for ch in PP_CHAPTERS:
                if ch < op.valid_from and any(re.search(rf"\b{re.escape(k)}\b", texts[ch]) for k in
                                              (op.name, *op.aliases)):
                    out.append(f"{op.name} named in chapter {ch}, in canon from {op.valid_from}")
    return out


# -- scoring ---------------------------------------------------------------------------------------
def _sentence(text: str, start: int, end: int) -> str:
    a = max(text.rfind(". ", 0, start), text.rfind("\n", 0, start), text.rfind("? ", 0, start),
            text.rfind("! ", 0, start))
    b = min([i for i in (text.find(". ", end), text.find("\n", end), text.find("? ", end)) if i >= 0] or [len(text)])
    s = " ".join(text[a + 1:b + 1].split())
    return s if len(s) <= 300 else s[:297] + "..."


def score(cases: list[Case], found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Precision and recall per type; the false positives (with their text) and the misses."""
    by_id = {c.id: c for c in cases}
    tp: Counter[str] = Counter()
    reported: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    hit: Counter[str] = Counter()
    fps, fns = [], []
    negatives: Counter[str] = Counter()
    negatives_fired: Counter[str] = Counter()
    who_found = who_right = 0
    for case in cases:
        findings = found[case.id]
        if case.baseline is not None:  # an edited real chapter: its unedited chapter's findings are counted there
            base = {(f["type"], f["entry"]["kind"], f["entry"]["key"], f["span"]["text"])
                    for f in found[case.baseline]}
            a, b = case.edit or (0, 0)
            findings = [f for f in findings if (f["type"], f["entry"]["kind"], f["entry"]["key"]) in case.labels
                        or not ((f["type"], f["entry"]["kind"], f["entry"]["key"], f["span"]["text"]) in base
                                and not (a <= f["span"]["start"] < b))]
        seen: dict[Label, dict[str, Any]] = {}
        for f in findings:
            seen.setdefault((f["type"], f["entry"]["kind"], f["entry"]["key"]), f)
        if case.who:  # a knowledge_leak found: does it name the character who leaks?
            leak = [f for f in findings if (f["type"], f["entry"]["kind"], f["entry"]["key"]) in case.labels]
            if leak:
                who_found += 1
                who_right += any(f["message"].startswith(case.who + " ") for f in leak)
        for lab, f in seen.items():
            reported[lab[0]] += 1
            if lab in case.labels:
                tp[lab[0]] += 1
            else:
                fps.append({"case": case.id, "category": case.category, "variant": case.variant,
                            "chapter": case.chapter, "type": lab[0], "entry": f"{lab[1]} {lab[2]}",
                            "span": f["span"]["text"], "sentence": _sentence(by_id[case.id].text, f["span"]["start"],
                                                                             f["span"]["end"]),
                            "message": f["message"]})
        for lab in case.labels:
            labels[lab[0]] += 1
            if lab in seen:
                hit[lab[0]] += 1
            else:
                fns.append({"case": case.id, "category": case.category, "variant": case.variant,
                            "chapter": case.chapter, "type": lab[0], "entry": f"{lab[1]} {lab[2]}",
                            "sentence": case.focus, "other_findings": sorted({f["type"] for f in findings})})
        if not case.labels:
            negatives[case.category] += 1
            negatives_fired[case.category] += bool(seen)
    per_type = {}
    for t in TYPES:
        per_type[t] = {"labels": labels[t], "found": hit[t], "reported": reported[t], "true": tp[t],
                       "precision": tp[t] / reported[t] if reported[t] else None,
                       "recall": hit[t] / labels[t] if labels[t] else None}
    all_rep, all_tp, all_lab, all_hit = (sum(x.values()) for x in (reported, tp, labels, hit))
    per_type["all"] = {"labels": all_lab, "found": all_hit, "reported": all_rep, "true": all_tp,
                       "precision": all_tp / all_rep if all_rep else None,
                       "recall": all_hit / all_lab if all_lab else None}
    return {"cases": len(cases), "positives": sum(1 for c in cases if c.labels),
            "negatives": sum(1 for c in cases if not c.labels), "per_type": per_type,
            "negatives_with_a_finding": {k: f"{negatives_fired[k]}/{negatives[k]}" for k in negatives},
            "knowledge_leak_names_the_character": f"{who_right}/{who_found}" if who_found else None,
            "false_positives": fps, "false_negatives": fns,
            "fp_classes": _classes(fps, lambda x: f"{x['type']} on {x['category']}: {x['variant']}"),
            "fn_classes": _classes(fns, lambda x: f"{x['type']}: {x['variant']}")}


def _classes(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    return [{"class": k, "count": len(v), "example": v[0]} for k, v in
            sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


def _agreement(cases: list[Case], pure: dict[str, list[dict[str, Any]]],
               store: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def keyed(fs: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
        return {(f["type"], f["entry"]["kind"], f["entry"]["key"], f["span"]["start"], f["span"]["end"]) for f in fs}

    differ = [c.id for c in cases if keyed(pure[c.id]) != keyed(store[c.id])]
    return {"cases": len(cases), "same_findings": len(cases) - len(differ), "differ": differ[:20]}


# -- latency ---------------------------------------------------------------------------------------
LATENCY_TEMPLATES = (
    "{A} walked along the quay toward {L}, counting the boats.", "{A} and {B} argued about the {I} until late.",
    "The road from {L} to {M} was flooded again.", "{A} said nothing when {B} came in from {L}.",
    "A letter from {A} reached {L} two days late.", "{B} remembered {C} at the fair in {M}.",
    "{A}'s eyes were on the door; {B} kept {B_his} hands on the table.", "They spoke of the {F} and of {C}.",
    "{A} had the {I} in a satchel, wrapped in oilcloth.", "\"{C} will not come,\" said {A}.",
)


def latency_draft(dicts: list[dict[str, Any]], chapter: int, words: int, seed: int) -> tuple[str, int]:
    """A ``words``-word draft for ``chapter`` of the generated serial: the serial's prose with
    sentences naming ~100 of its entries in force (and a few retired), as a chapter would."""
    import gen_story

    rng = random.Random(seed)
    names: dict[str, dict[str, str]] = defaultdict(dict)
    retired: set[str] = set()
    for d in dicts:
        if d["type"] == "propose_canon" and d["valid_from"] <= chapter:
            names[d["kind"]][d["key"]] = d["name"]
        elif d["type"] == "retire_canon":
            retired.add(d["key"])
    pick = {kind: [n for k, n in sorted(v.items()) if k not in retired or rng.random() < 0.02]
            for kind, v in names.items()}
    chosen = {"character": rng.sample(pick["character"], 60), "location": rng.sample(pick["location"], 20),
              "item": rng.sample(pick["item"], 12), "faction": rng.sample(pick["faction"], 8)}
    out: list[str] = []
    count = 0
    while count < words:
        if rng.random() < 0.45:
            t = rng.choice(LATENCY_TEMPLATES)
            s = t.format(A=rng.choice(chosen["character"]), B=rng.choice(chosen["character"]),
                         C=rng.choice(chosen["character"]), B_his=rng.choice(["his", "her"]),
                         L=rng.choice(chosen["location"]), M=rng.choice(chosen["location"]),
                         I=rng.choice(chosen["item"]).removeprefix("The "), F=rng.choice(chosen["faction"])
                         .removeprefix("The "))
        else:
            s = gen_story.prose(rng.randint(8, 20), seed=rng.randrange(1 << 30))
        out.append(s)
        count += len(s.split())
        if rng.random() < 0.15:
            out.append("\n\n")
    text = " ".join(out).replace(" \n\n ", "\n\n")
    return text, len(text.split())


def latency(args: argparse.Namespace) -> dict[str, Any]:
    import gen_story

    from canon_ledger.application.continuity import read_steps
    from canon_ledger.domain.commands import parse_command
    from canon_ledger.infrastructure.bootstrap import bootstrap

    chapters, entries = (200, 2_000) if args.quick else (gen_story.CHAPTERS, gen_story.ENTRIES)
    story = gen_story.STORY
    t0 = time.perf_counter()
    dicts = gen_story.generate(seed=3, chapters=chapters, entries=entries)
    totals = gen_story.totals(dicts)
    text, words = latency_draft(dicts, chapters, 5_000, args.seed)
    commands = [parse_command(d) for d in dicts]
    draft = parse_command({"type": "submit_draft", "command_id": "bench-continuity-draft", "story_id": story,
                           "chapter": chapters, "draft_id": "bench-check", "text": text})
    log(f"latency story: {totals['commands']:,} commands, {totals['canon_entries']:,} entries, generated in "
        f"{time.perf_counter() - t0:.1f} s; draft of {words:,} words for chapter {chapters}")
    stores = SQLiteStores()
    try:
        with stores.fresh() as url:
            loaded = load_story(url, "sqlite", commands + [draft], args.batch_size)
            log(f"loaded in {loaded['seconds']:.1f} s")
            services = bootstrap(url, embedder="hashing")
            try:
                checker = services.continuity()
                t = time.perf_counter()
                first = checker.check(story, "bench-check")
                first_s = time.perf_counter() - t
                log(f"first check (catch-up, matcher build) {first_s:.1f} s: {len(first.findings)} findings")
                for _ in range(3):
                    checker.check(story, "bench-check")
                door, pure, read = [], [], []
                reader = services.packets.reader
                with reader.snapshot(story) as snap:
                    steps = read_steps(snap, story, text)
                vocabulary = Vocabulary.of(steps, chapters)
                for i in range(args.samples):  # the three, alternated
                    t = time.perf_counter()
                    report = checker.check(story, "bench-check")
                    door.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    found = check("bench-check", text, chapters, steps, vocabulary)
                    pure.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    with reader.snapshot(story) as snap:
                        read_steps(snap, story, text)
                    read.append(time.perf_counter() - t)
                assert len(found) == len(report.findings)
                stages = {s.step: s.detail for s in report.stages}
            finally:
                services.close()
    finally:
        stores.close()
    by_type = Counter(f["type"] for f in report.findings)
    return {"chapters": chapters, "entries": totals["canon_entries"], "commands": totals["commands"],
            "events": loaded["events"], "load_s": round(loaded["seconds"], 1), "draft_words": words,
            "draft_chars": len(text), "entries_named": len({(s.kind, s.key) for s in steps}) - 0,
            "steps_read": len(steps), "findings": len(report.findings), "findings_by_type": dict(by_type),
            "first_check_s": round(first_s, 2), "check": percentiles(door), "rules_alone": percentiles(pure),
            "read_alone": percentiles(read), "samples": args.samples, "last_stages": stages}


# -- report ----------------------------------------------------------------------------------------
def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(s: dict[str, Any]) -> list[str]:
    out = ["| type | labels | found | reported | true | precision | recall |", "|---|--:|--:|--:|--:|--:|--:|"]
    for t, r in s["per_type"].items():
        out.append(f"| {t} | {r['labels']} | {r['found']} | {r['reported']} | {r['true']} | "
                   f"{_f(r['precision'])} | {_f(r['recall'])} |")
    return out


def _examples(s: dict[str, Any], show: int) -> list[str]:
    out = ["", "False positives by class (count, one example):", ""]
    for c in s["fp_classes"] or [{"class": "none", "count": 0, "example": None}]:
        e = c["example"]
        out.append(f"- {c['class']}: {c['count']}" + (f" — {e['case']} ch {e['chapter']}, {e['entry']}, span "
                                                       f"\"{e['span']}\": \"{e['sentence']}\"" if e else ""))
    out += ["", "False negatives by class (count, one example):", ""]
    for c in s["fn_classes"] or [{"class": "none", "count": 0, "example": None}]:
        e = c["example"]
        out.append(f"- {c['class']}: {c['count']}" + (f" — {e['case']} ch {e['chapter']}, {e['entry']}: "
                                                       f"\"{e['sentence']}\"" if e else ""))
    if show:
        out += ["", f"Every false positive (first {show}):", ""]
        for e in s["false_positives"][:show]:
            out.append(f"- {e['case']} [{e['category']} / {e['variant']}] {e['type']} {e['entry']} "
                       f"\"{e['span']}\": {e['sentence']}")
    return out


def markdown(report: dict[str, Any], argv: list[str], show: int) -> str:
    g, r = report["generated"], report["real"]
    out = [*header("bench_continuity.py", argv, report["machine"]), "",
           f"Generated set (seed {report['seed']}): {g['cases']} cases, {g['positives']} positives, "
           f"{g['negatives']} hard negatives; pure rules" + (f", store path agrees on {report['store']['generated']}"
                                                              if report.get("store") else ""), "", *table(g), "",
           "Hard negatives with any finding: " + ", ".join(f"{k} {v}" for k, v in g["negatives_with_a_finding"]
                                                           .items()),
           *([f"knowledge_leak findings that name the character who leaks: "
              f"{g['knowledge_leak_names_the_character']}."] if g.get("knowledge_leak_names_the_character") else []),
           *_examples(g, show), "",
           f"Real text (Pride and Prejudice, chapters {', '.join(map(str, PP_CHAPTERS))}; "
           f"{r['words']:,} words unedited): {r['cases']} cases, {r['positives']} edits labelled, "
           f"{r['negatives']} negatives (unedited chapters and injected hard negatives)"
           + (f", store path agrees on {report['store']['real']}" if report.get("store") else ""), "", *table(r),
           "", "Negatives with any finding: " + ", ".join(f"{k} {v}" for k, v in r["negatives_with_a_finding"].items()),
           *_examples(r, show)]
    if report.get("pp_canon_warnings"):
        out += ["", "Canon warnings: " + "; ".join(report["pp_canon_warnings"])]
    lat = report.get("latency")
    if lat:
        out += ["", f"Latency: chapter {lat['chapters']:,} of the {lat['entries']:,}-entry serial "
                    f"({lat['commands']:,} commands, {lat['events']:,} events, loaded in {lat['load_s']} s), a "
                    f"{lat['draft_words']:,}-word draft naming {lat['entries_named']} entries ({lat['steps_read']} "
                    f"steps read), {lat['findings']} findings {lat['findings_by_type']}; first check "
                    f"{lat['first_check_s']} s (catch-up and matcher build); {lat['samples']} samples, alternated:",
                "", "| path | p50 ms | p90 ms | p99 ms | min ms |", "|---|--:|--:|--:|--:|"]
        for name, key in (("`Services.continuity().check` (door path)", "check"),
                          ("snapshot read alone (matcher + steps)", "read_alone"),
                          ("pure rules alone (`continuity_rules.check`)", "rules_alone")):
            p = lat[key]
            out.append(f"| {name} | {p['p50']:.1f} | {p['p90']:.1f} | {p['p99']:.1f} | {p['min']:.1f} |")
        out += ["", f"Goal p50 <= {GOALS['p50_ms']:.0f} ms: "
                    f"{'met' if lat['check']['p50'] <= GOALS['p50_ms'] else 'missed'}."]
    out += ["", "Goals (precision >= 0.9 every type; recall >= 0.8 not-yet, retired, spoiler, field conflict, "
                "knowledge leak): "
                + "; ".join(f"{k}: {v}" for k, v in report["verdicts"].items())]
    return "\n".join(out)


def verdicts(report: dict[str, Any]) -> dict[str, str]:
    out = {}
    for part in ("generated", "real"):
        s = report[part]["per_type"]
        missed = [f"{t} precision {s[t]['precision']:.2f}" for t in TYPES
                  if s[t]["precision"] is not None and s[t]["precision"] < GOALS["precision"]]
        missed += [f"{t} recall {s[t]['recall']:.2f}" for t in RECALL_GOAL_TYPES
                   if s[t]["recall"] is not None and s[t]["recall"] < GOALS["recall"]]
        out[part] = "met" if not missed else "missed (" + ", ".join(missed) + ")"
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (< 30 s): 12 cases per type and 4 per class, the store path on 40 of "
                             "them, latency on a 200-chapter, 2,000-entry serial with 20 samples")
    parser.add_argument("--seed", type=int, default=42, help="the generated set's seed (default 42)")
    parser.add_argument("--per-type", type=int, help="positives per finding type (default 60)")
    parser.add_argument("--per-class", type=int, help="hard negatives per class (default 20)")
    parser.add_argument("--samples", type=int, help="latency samples (default 100; 20 with --quick)")
    parser.add_argument("--batch-size", type=int, default=200, help="commands per atomic batch when loading")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--no-store", action="store_true", help="the labelled sets on the pure path only")
    parser.add_argument("--show", type=int, default=0, help="also list the first N false positives one by one")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    parser.add_argument("--save-json", metavar="PATH")
    args = parser.parse_args(argv)
    args.per_type = args.per_type or (12 if args.quick else 60)
    args.per_class = args.per_class or (4 if args.quick else 20)
    args.samples = args.samples or (20 if args.quick else 100)
    started = time.perf_counter()
    info = machine_info()

    generated = Generator(args.seed).build(args.per_type, args.per_class)
    generated += KnowledgeGenerator(args.seed, len(generated)).build(args.per_type, args.per_class)
    real = real_cases() + real_knowledge_cases()
    t0 = time.perf_counter()
    pure = {c.id: pure_findings(c) for c in generated + real}
    pure_s = time.perf_counter() - t0
    log(f"{len(generated)} generated and {len(real)} real cases checked on the pure path in {pure_s:.1f} s")
    report: dict[str, Any] = {"machine": info, "seed": args.seed, "pure_path_s": round(pure_s, 2)}
    texts = pp_chapters()
    report["generated"] = score(generated, pure)
    report["real"] = score(real, pure)
    report["real"]["words"] = sum(len(texts[ch].split()) for ch in PP_CHAPTERS)
    report["pp_canon_warnings"] = pp_canon_warnings(texts)
    if not args.no_store:
        subset = generated[::max(1, len(generated) // 40)] if args.quick else generated
        store, timing = store_findings(subset + real)
        report["store"] = {"generated": _agreement(subset, pure, store)["same_findings"].__str__() + f"/{len(subset)}",
                           "real": _agreement(real, pure, store)["same_findings"].__str__() + f"/{len(real)}",
                           "differ": _agreement(subset + real, pure, store)["differ"], **timing}
        log(f"store path: {report['store']}")
    if not args.skip_latency:
        report["latency"] = latency(args)
    report["verdicts"] = verdicts(report)
    info["loadavg_end"] = loadavg()
    info["wall_seconds"] = round(time.perf_counter() - started, 1)
    emit(report, args, markdown(report, argv, args.show))
    return 0


if __name__ == "__main__":
    sys.exit(main())
