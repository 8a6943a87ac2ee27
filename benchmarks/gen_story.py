#!/usr/bin/env python
"""A synthetic serial for the packet benchmarks (issue 3): ~100,000 events of one story.

    python benchmarks/gen_story.py --out story.jsonl [--seed 3] [--chapters 1000] [--entries 10000]

As a module: ``generate()`` returns the command dicts (valid input for ``parse_command``,
in the order an authoring app would send them) and ``totals(commands)`` counts what they
make, including the events the ledger will write. Deterministic for a given seed and size.

At the default size (1,000 chapters in 10 volumes of 100, 10,000 canon entries):

* 10,000 **confirmed canon entries** (one ``propose_canon`` + ``confirm_canon`` each):
  characters 3,000, timeline events 1,760, locations 1,800, items 1,500, threads 1,250,
  factions 400, world rules 250, development chains 40. Each kind has an opening set in
  chapter 1; the rest are introduced at random chapters (valid_from = that chapter).
  ~3% of characters, items and factions carry ``fields.hidden_until`` (a secret kept until a
  later chapter); chains have 3-6 nodes, most with a payoff node hidden until later.
* **Revisions** (a second proposal for an existing key, confirmed: a progression with a later
  valid_from; ~5% are dated 1-3 chapters ahead): ~4.6 per chapter, 60% of them characters,
  half of those the 40-strong main cast. Threads open (``state: open``) and most are
  **resolved** by a revision (``state: resolved``) 3-60 chapters later; 10% run 100-400
  chapters; 2% never close.
* **Retirements**: ~0.3 per chapter (deaths, destroyed items, razed places, dissolved factions).
* Per chapter: ``plan_chapter``; 3-6 **scene cards** that together tag 5-15 confirmed keys in
  force at that chapter (3-6 characters, 1-3 locations, 0-2 items, 1-3 open threads, 0-2
  callbacks to world rules, factions, timeline events or chains), biased to the main cast and
  to recent introductions; a short **accepted draft** (120-220 words); in 15% of chapters a
  **rejected draft** first; a **chapter summary**. Volume summaries at mid-volume and at each
  volume's end. ~0.4 **rejected proposals** per chapter.

Each applied command also writes a receipt event: ``totals`` counts them.

The benchmarks' other stories live here too, so that there is one story generator:

* ``flat(n)``: the command-throughput workload of ``bench_apply.py`` (issue 2; also
  ``bench_worker.py``'s steady state): ``n`` commands of one story, per chapter a plan, 1-3
  canon proposals each confirmed (~30% revising an existing entry), three scene cards, a
  draft of ``draft_words`` words, its acceptance and a summary (``--flat N`` writes it);
* ``read_novel()`` and ``novel_commands()``: War and Peace (``../shared/data/novels``) as
  ``canon import manuscript`` splits it, one story of 365 chapters in 17 volumes, each chapter
  planned, submitted, accepted and summarised by its first sentence, each book summarised
  (``bench_import.py``, ``bench_manuscript.py``, ``bench_cranfield.py``'s scale run).
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

STORY = "synthetic-serial"
DEFAULT_SEED = 3
CHAPTERS = 1000
CHAPTERS_PER_VOLUME = 100
ENTRIES = 10_000

# kind -> (entries at 10,000, entries in chapter 1 at full scale, key prefix)
KIND_PLAN: dict[str, tuple[int, int, str]] = {
    "character": (3000, 12, "char"),
    "location": (1800, 5, "loc"),
    "item": (1500, 4, "item"),
    "faction": (400, 3, "fac"),
    "world_rule": (250, 20, "rule"),
    "thread": (1250, 5, "thread"),
    "timeline_event": (1760, 2, "event"),
    "development_chain": (40, 1, "chain"),
}
MAIN_CAST = 40
REVISIONS_PER_CHAPTER = 4.6
REVISION_KINDS = {"character": 0.60, "location": 0.10, "item": 0.10, "faction": 0.08, "thread": 0.07,
                  "development_chain": 0.03, "world_rule": 0.02}
RETIREMENTS_PER_CHAPTER = 0.3
RETIRE_KINDS = {"character": 0.50, "item": 0.27, "location": 0.13, "faction": 0.10}
REJECTED_PROPOSALS_PER_CHAPTER = 0.4
REJECTED_DRAFT_SHARE = 0.15
FUTURE_REVISION_SHARE = 0.05
HIDDEN_SHARE = 0.03

# Events per applied command, receipt included (the domain's events: docs/commands.md).
EVENTS_PER_COMMAND = {
    "start_story": 2, "plan_chapter": 2, "add_scene_card": 2, "propose_canon": 2,
    "confirm_canon": 3,  # Confirmed + Established/Revised + receipt
    "reject_canon": 2, "retire_canon": 2, "submit_draft": 2,
    "accept_draft": 3,  # Accepted + Chapter.TextAccepted + receipt
    "reject_draft": 2, "record_chapter_summary": 2,
    "record_volume_summary": 2,  # + Volume.Opened the first time for a volume
}

WORDS = (
    "lamp quay river salt night bell ledger wick guild flood shadow lantern ward ink brass harbour fog "
    "silver memory cost debt rope tide window stair coin letter candle ash smoke glass rain bridge market "
    "clock whisper oath stone iron thread map key door archive tower canal barge ferry warden clerk "
    "captain widow heir sister brother mother father rival mentor thief smuggler priest scholar envoy "
    "storm winter harvest festival fever plague famine treaty siege rebellion verdict trial ransom "
    "betrayal secret promise wager bargain debt inheritance portrait mirror compass dagger seal crown "
    "ring banner chart journal cipher lens furnace forge mill granary chapel crypt garden orchard "
    "quarry mine harbourmaster lamplighter apprentice cartographer alchemist bookbinder ferryman "
    "watchman magistrate courier dockhand weaver tanner glassblower bellringer archivist north south "
    "east west old new quiet cold bright grey hollow burning drowned broken hidden borrowed stolen "
    "forgotten sworn cursed silent distant near early late slow quick careful reckless patient bitter "
    "gentle stubborn loyal false true walks waits remembers forgets carries hides finds loses trades "
    "pays owes follows leaves returns answers refuses signs burns mends opens closes watches counts"
).split()
SYLLABLES = "an bel cor dra el fen gar hal is jor ka lin mar nor os pel quin ros sel tam ul var wen yr zo".split()


class _Story:
    def __init__(self, seed: int, chapters: int, entries: int) -> None:
        self.rng = random.Random(seed)
        self.chapters = chapters
        # Canon activity per chapter (revisions, retirements, rejections) follows entries per chapter.
        self.density = (entries / chapters) / (ENTRIES / CHAPTERS)
        self.scale = entries / ENTRIES
        self.cmds: list[dict[str, Any]] = []
        self.keys: dict[str, list[str]] = {k: [] for k in KIND_PLAN}  # in introduction order
        self.intros: dict[str, list[int]] = {k: [] for k in KIND_PLAN}  # parallel: chapter of introduction
        self.entry: dict[str, dict[str, Any]] = {}  # key -> kind, name, aliases, last valid_from, nodes
        self.retired: set[str] = set()
        self.open_threads: set[str] = set()
        self.resolutions: dict[int, list[str]] = {}
        self.proposals = 0
        self.rejected_keys = 0

    # -- text ------------------------------------------------------------------------------------
    def prose(self, lo: int, hi: int) -> str:
        rng, n, out = self.rng, self.rng.randint(lo, hi), []
        while len(out) < n:
            sentence = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
            sentence[0] = sentence[0].capitalize()
            sentence[-1] += "."
            out.extend(sentence)
        text = " ".join(out[:n])
        return text if text.endswith(".") else text + "."

    def name(self, words: int = 2) -> str:
        return " ".join("".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(2, 3))).capitalize()
                        for _ in range(words))

    def add(self, command_type: str, /, **fields: Any) -> None:
        self.cmds.append({"type": command_type, "command_id": f"syn-{len(self.cmds) + 1:07d}",
                          "story_id": STORY, **fields})

    # -- canon -----------------------------------------------------------------------------------
    def _fields(self, kind: str, chapter: int, key: str) -> dict[str, Any]:
        rng = self.rng
        if kind == "character":
            fields: dict[str, Any] = {"status": rng.choice(["alive", "wounded", "missing", "exiled", "sworn"]),
                                      "role": rng.choice(["ally", "rival", "mentor", "witness", "suspect", "kin"])}
        elif kind == "location":
            fields = {"region": rng.choice(["north ward", "river quarter", "old city", "the marsh", "the hills"])}
        elif kind == "item":
            owners = self.keys["character"]
            fields = {"owner": rng.choice(owners) if owners else "none"}
        elif kind == "faction":
            fields = {"stance": rng.choice(["hostile", "neutral", "allied", "divided"])}
        elif kind == "thread":
            fields = {"state": "open", "stakes": rng.choice(["life", "honour", "money", "the city", "a secret"])}
        elif kind == "timeline_event":
            fields = {"when": f"chapter {chapter}"}
        elif kind == "development_chain":
            fields = {"nodes": self._nodes(chapter, 0, rng.randint(3, 6))}
        else:
            fields = {}
        if kind in ("character", "item", "faction") and rng.random() < HIDDEN_SHARE:
            fields["hidden_until"] = chapter + rng.randint(10, 150)
        return fields

    def _nodes(self, chapter: int, first: int, count: int) -> list[dict[str, Any]]:
        rng, nodes = self.rng, []
        for i in range(first, first + count):
            last = i == first + count - 1
            node: dict[str, Any] = {"id": f"n{i + 1}", "kind": "payoff" if last else rng.choice(["foreshadow", "echo"]),
                                    "text": self.prose(12, 28)}
            if (last and rng.random() < 0.6) or (not last and rng.random() < 0.1):
                node["hidden_until"] = chapter + rng.randint(30, 300)
            nodes.append(node)
        return nodes

    def _propose(self, kind: str, key: str, name: str, aliases: list[str], text: str, fields: dict[str, Any],
                 valid_from: int, *, confirm: bool = True, reason: str = "") -> None:
        self.proposals += 1
        pid = f"p{self.proposals:06d}"
        self.add("propose_canon", proposal_id=pid, kind=kind, key=key, name=name, aliases=aliases, text=text,
                 fields=fields, valid_from=valid_from, tags=[self.rng.choice(WORDS)])
        if confirm:
            self.add("confirm_canon", proposal_id=pid)
        else:
            self.add("reject_canon", proposal_id=pid, reason=reason)

    def introduce(self, kind: str, chapter: int) -> None:
        prefix = KIND_PLAN[kind][2]
        key = f"{prefix}-{len(self.keys[kind]) + 1:04d}"
        if kind == "character":
            name = self.name(2)
            aliases = [f"the {self.rng.choice(WORDS)} {self.rng.choice(['girl', 'man', 'woman', 'boy'])}"] \
                if self.rng.random() < 0.2 else []
        else:
            name = f"The {self.rng.choice(WORDS).capitalize()} {self.rng.choice(WORDS).capitalize()}"
            aliases = []
        fields = self._fields(kind, chapter, key)
        self._propose(kind, key, name, aliases, self.prose(20, 45), fields, chapter)
        self.keys[kind].append(key)
        self.intros[kind].append(chapter)
        self.entry[key] = {"kind": kind, "name": name, "aliases": aliases, "last_vf": chapter,
                           "nodes": fields.get("nodes")}
        if kind == "thread":
            self.open_threads.add(key)
            roll = self.rng.random()
            if roll < 0.88:
                end = chapter + self.rng.randint(3, 60)
            elif roll < 0.98:
                end = chapter + self.rng.randint(100, 400)
            else:
                end = None
            if end is not None and end <= self.chapters:
                self.resolutions.setdefault(end, []).append(key)

    def _eligible(self, key: str, chapter: int) -> bool:
        e = self.entry[key]
        return key not in self.retired and e["last_vf"] <= chapter

    def _pick(self, kind: str, chapter: int, *, before: bool = True, tries: int = 30) -> str | None:
        """A uniformly chosen live entry of ``kind`` (introduced before ``chapter`` if ``before``)."""
        keys = self.keys[kind]
        limit = bisect.bisect_left(self.intros[kind], chapter) if before else len(keys)
        for _ in range(tries):
            if not limit:
                return None
            key = keys[self.rng.randrange(limit)]
            if self._eligible(key, chapter) and not (kind == "thread" and key not in self.open_threads):
                return key
        return None

    def revise(self, chapter: int) -> None:
        rng = self.rng
        kind = rng.choices(list(REVISION_KINDS), weights=list(REVISION_KINDS.values()))[0]
        key = None
        if kind == "character" and rng.random() < 0.5:
            cast = [k for k in self.keys["character"][:MAIN_CAST] if self.entry[k]["last_vf"] < chapter
                    and k not in self.retired]
            key = rng.choice(cast) if cast else None
        key = key or self._pick(kind, chapter)
        if key is None:
            return
        e = self.entry[key]
        valid_from = chapter
        if rng.random() < FUTURE_REVISION_SHARE:
            valid_from = min(self.chapters, chapter + rng.randint(1, 3))
        fields = self._fields(kind, valid_from, key)
        fields.pop("hidden_until", None)
        if kind == "development_chain":
            old = e["nodes"] or []
            fields["nodes"] = old + self._nodes(valid_from, len(old), rng.randint(1, 2))
            e["nodes"] = fields["nodes"]
        text = f"From chapter {valid_from}: " + self.prose(18, 40)
        self._propose(kind, key, e["name"], e["aliases"], text, fields, valid_from)
        e["last_vf"] = valid_from

    def resolve(self, key: str, chapter: int) -> None:
        e = self.entry[key]
        if key not in self.open_threads or e["last_vf"] > chapter:
            return
        fields = {"state": "resolved", "outcome": self.rng.choice(["paid", "broken", "kept", "revealed", "lost"])}
        self._propose("thread", key, e["name"], e["aliases"], "Resolved: " + self.prose(15, 30), fields, chapter)
        e["last_vf"] = chapter
        self.open_threads.discard(key)

    def retire(self, chapter: int) -> None:
        kind = self.rng.choices(list(RETIRE_KINDS), weights=list(RETIRE_KINDS.values()))[0]
        key = self._pick(kind, chapter)
        if key is None or (kind == "character" and key in self.keys["character"][:MAIN_CAST]):
            return
        reason = {"character": "died", "item": "destroyed", "location": "razed", "faction": "dissolved"}[kind]
        self.add("retire_canon", kind=kind, key=key, valid_from=chapter, reason=f"{reason}: {self.prose(6, 14)}")
        self.retired.add(key)

    def reject_proposal(self, chapter: int) -> None:
        kind = self.rng.choice(list(KIND_PLAN))
        existing = self._pick(kind, chapter) if self.rng.random() < 0.5 else None
        if existing is None:
            self.rejected_keys += 1
            key, name = f"{KIND_PLAN[kind][2]}-rejected-{self.rejected_keys:04d}", self.name(2)
        else:
            key, name = existing, self.entry[existing]["name"]
        fields = {"state": "open"} if kind == "thread" else {}
        self._propose(kind, key, name, [], self.prose(15, 35), fields, chapter, confirm=False,
                      reason="Contradicts established canon: " + self.prose(5, 12))

    # -- scene cards -----------------------------------------------------------------------------
    def _weighted(self, kind: str, chapter: int, n: int, *, cast: float, recent: float) -> list[str]:
        """``n`` distinct live keys: from the main cast (characters), recent introductions, or anywhere."""
        rng, chosen = self.rng, []
        keys, intros = self.keys[kind], self.intros[kind]
        live_cast = [k for k in keys[:MAIN_CAST] if k not in self.retired] if kind == "character" else []
        recent_from = bisect.bisect_left(intros, chapter - 30)
        limit = bisect.bisect_right(intros, chapter)
        for _ in range(n * 8):
            if len(chosen) == n:
                break
            roll = rng.random()
            if roll < cast and live_cast:
                key = rng.choice(live_cast)
            elif roll < cast + recent and recent_from < limit:
                key = keys[rng.randrange(recent_from, limit)]
            elif limit:
                key = keys[rng.randrange(limit)]
            else:
                break
            if key not in chosen and key not in self.retired:
                chosen.append(key)
        return chosen

    def scene_cards(self, chapter: int) -> int:
        rng = self.rng
        tags = {
            "characters": self._weighted("character", chapter, rng.randint(3, 6), cast=0.5, recent=0.3),
            "locations": self._weighted("location", chapter, rng.randint(1, 3), cast=0, recent=0.4),
            "items": self._weighted("item", chapter, rng.randint(0, 2), cast=0, recent=0.4),
            "threads": rng.sample(sorted(self.open_threads), min(len(self.open_threads), rng.randint(1, 3))),
        }
        callbacks: list[str] = []
        for _ in range(rng.randint(0, 2)):
            kind = rng.choice(["world_rule", "faction", "timeline_event", "development_chain"])
            callbacks += [k for k in self._weighted(kind, chapter, 1, cast=0, recent=0.5) if k not in callbacks]
        tags["callbacks"] = callbacks
        total = sum(map(len, tags.values()))
        for name in ("callbacks", "items", "locations", "threads"):  # at most 15 keys per chapter
            while total > 15 and len(tags[name]) > (1 if name in ("locations", "threads") else 0):
                tags[name].pop()
                total -= 1
        scenes = rng.randint(3, 6)
        per_scene: list[dict[str, list[str]]] = [{n: [] for n in tags} for _ in range(scenes)]
        for name, keys in tags.items():
            for key in keys:
                for s in rng.sample(range(scenes), rng.randint(1, 2) if name == "characters" else 1):
                    per_scene[s][name].append(key)
        for s, scene in enumerate(per_scene):
            if not scene["characters"]:
                scene["characters"].append(rng.choice(tags["characters"]))
            self.add("add_scene_card", chapter=chapter, scene_id=f"s{s + 1}", summary=self.prose(25, 45),
                     characters=scene["characters"], locations=scene["locations"], threads=scene["threads"],
                     callbacks=scene["callbacks"], items=scene["items"])
        return len({k for keys in tags.values() for k in keys})

    # -- the serial ------------------------------------------------------------------------------
    def build(self) -> list[dict[str, Any]]:
        rng, n_ch = self.rng, self.chapters
        self.add("start_story", title="The Synthetic Serial",
                 style_guardrails=["Close third person; past tense.", "No modern slang.",
                                   "Magic is quiet and costly: never a spectacle."],
                 output_contract="Markdown prose, 1,800-2,400 words, scene breaks marked with a centred asterism.",
                 budgets={"writer": 12000, "planner": 12000})
        # Introduction schedule: the opening set in chapter 1, the rest at random chapters.
        plan: dict[int, list[str]] = {c: [] for c in range(1, n_ch + 1)}
        for kind, (count, opening, _) in KIND_PLAN.items():
            total = max(1, round(count * self.scale))
            first = min(total, opening)
            plan[1] += [kind] * first
            plan_rest = [rng.randint(2, n_ch) if n_ch > 1 else 1 for _ in range(total - first)]
            for c in plan_rest:
                plan[c].append(kind)
        for c in plan:
            rng.shuffle(plan[c])
        for c in range(1, n_ch + 1):
            volume = (c - 1) // CHAPTERS_PER_VOLUME + 1
            self.add("plan_chapter", chapter=c, volume=volume, goals=[self.prose(8, 16) for _ in range(rng.randint(2, 4))])
            for kind in plan[c]:
                self.introduce(kind, c)
            if c > 1:
                for key in self.resolutions.pop(c, []):
                    self.resolve(key, c)
                for _ in range(_count(rng, REVISIONS_PER_CHAPTER * self.density)):
                    self.revise(c)
                for _ in range(_count(rng, RETIREMENTS_PER_CHAPTER * self.density)):
                    self.retire(c)
            for _ in range(_count(rng, REJECTED_PROPOSALS_PER_CHAPTER * self.density)):
                self.reject_proposal(c)
            self.scene_cards(c)
            if rng.random() < REJECTED_DRAFT_SHARE:
                self.add("submit_draft", chapter=c, draft_id=f"d{c}-r1", text=self.prose(80, 160))
                self.add("reject_draft", draft_id=f"d{c}-r1", reason="Out of voice: " + self.prose(6, 14))
            self.add("submit_draft", chapter=c, draft_id=f"d{c}", text=self.prose(120, 220))
            self.add("accept_draft", draft_id=f"d{c}")
            self.add("record_chapter_summary", chapter=c, text=self.prose(50, 90))
            if c % CHAPTERS_PER_VOLUME in (CHAPTERS_PER_VOLUME // 2, 0) or c == n_ch:
                self.add("record_volume_summary", volume=volume, text=self.prose(120, 200))
        return self.cmds


def _count(rng: random.Random, mean: float) -> int:
    """A small non-negative integer with the given mean (whole part plus a Bernoulli remainder)."""
    whole = int(mean)
    return whole + (rng.random() < mean - whole) + (rng.randint(-1, 1) if whole >= 2 else 0)


def generate(*, seed: int = DEFAULT_SEED, chapters: int = CHAPTERS, entries: int = ENTRIES) -> list[dict[str, Any]]:
    """The story's commands, in order. ``entries`` scales every canon count (10,000 by default)."""
    if chapters < 1 or entries < len(KIND_PLAN):
        raise ValueError("need chapters >= 1 and entries >= 8")
    return _Story(seed, chapters, entries).build()


def for_story(story: str, *, seed: int = DEFAULT_SEED, chapters: int = CHAPTERS,
              entries: int = ENTRIES) -> list[dict[str, Any]]:
    """``generate``'s commands as story ``story``: its story id, and command ids prefixed with
    it, so several generated stories share one store."""
    out = []
    for c in generate(seed=seed, chapters=chapters, entries=entries):
        c = {**c, "command_id": f"{story}/{c['command_id']}"}
        if "story_id" in c:
            c["story_id"] = story
        out.append(c)
    return out


def totals(commands: list[dict[str, Any]]) -> dict[str, Any]:
    """What the commands make, derived from the commands alone (events include receipts)."""
    by_type = Counter(c["type"] for c in commands)
    proposals: dict[str, tuple[str, str]] = {}
    confirmed: dict[tuple[str, str], int] = {}
    volumes: set[int] = set()
    events = 0
    for c in commands:
        events += EVENTS_PER_COMMAND[c["type"]]
        if c["type"] == "propose_canon":
            proposals[c["proposal_id"]] = (c["kind"], c["key"])
        elif c["type"] == "confirm_canon":
            kk = proposals[c["proposal_id"]]
            confirmed[kk] = confirmed.get(kk, 0) + 1
        elif c["type"] == "record_volume_summary" and c["volume"] not in volumes:
            volumes.add(c["volume"])
            events += 1  # Volume.Opened
    by_kind = Counter(kind for kind, _ in confirmed)
    return {
        "story_id": STORY,
        "commands": len(commands),
        "events": events,
        "chapters": by_type["plan_chapter"],
        "volumes": len(volumes),
        "canon_entries": len(confirmed),
        "canon_entries_by_kind": dict(sorted(by_kind.items())),
        "revisions": sum(confirmed.values()) - len(confirmed),
        "retirements": by_type["retire_canon"],
        "rejected_proposals": by_type["reject_canon"],
        "rejected_drafts": by_type["reject_draft"],
        "scene_cards": by_type["add_scene_card"],
        "commands_by_type": dict(by_type),
    }


def prose(words: int, seed: int = 7) -> str:
    """``words`` words of the serial's prose (a fixed seed: the same text every call)."""
    return _Story(seed, 1, 8).prose(words, words)


# -- the command-throughput workload (issue 2) -----------------------------------------------------
FLAT_STORY = "bench-story"
FLAT_KINDS = ("character", "location", "thread", "item", "world_rule", "faction")
FLAT_WORDS = (
    "lamp quay river salt night bell ledger wick guild flood shadow lantern ward ink brass "
    "harbour fog silver memory cost debt rope tide window stair coin letter candle ash smoke "
    "glass rain bridge market clock whisper oath stone iron thread map key door"
).split()


def _flat_prose(rng: random.Random, words: int) -> str:
    out: list[str] = []
    while len(out) < words:
        sentence = [rng.choice(FLAT_WORDS) for _ in range(rng.randint(6, 18))]
        sentence[0] = sentence[0].capitalize()
        out.extend(sentence)
        out[-1] += "."
    return " ".join(out[:words])


def flat(n: int, *, seed: int = 2, draft_words: int = 2000) -> list[dict[str, Any]]:
    """``n`` valid commands for one story, in an authoring app's order: per chapter a plan, a
    few canon proposals each confirmed (some revising existing entries), three scene cards
    tagging confirmed keys (callbacks may name any kind), a draft, its acceptance, a summary."""
    rng = random.Random(seed)
    cmds: list[dict[str, Any]] = []

    def add(command_type: str, /, **fields: Any) -> None:
        cmds.append({"type": command_type, "command_id": f"bench-{len(cmds) + 1:06d}", "story_id": FLAT_STORY,
                     **fields})

    add(
        "start_story",
        title="The Benchmark Ledger",
        style_guardrails=["Close third person; past tense.", "No modern slang."],
        output_contract="Markdown prose, 1,800-2,400 words.",
        budgets={"writer": 12000},
    )
    confirmed: dict[str, list[str]] = {k: [] for k in FLAT_KINDS}
    chapter = 0
    while len(cmds) < n:
        chapter += 1
        add("plan_chapter", chapter=chapter, volume=(chapter - 1) // 10 + 1,
            goals=[_flat_prose(rng, 12), _flat_prose(rng, 10)])
        kinds = ["character", "location"] if chapter == 1 else [rng.choice(FLAT_KINDS)
                                                                for _ in range(rng.randint(1, 3))]
        for i, kind in enumerate(kinds, start=1):
            revise = bool(confirmed[kind]) and rng.random() < 0.3
            key = rng.choice(confirmed[kind]) if revise else f"{kind}-{len(confirmed[kind]) + 1}"
            proposal = f"p-{chapter}-{i}"
            add(
                "propose_canon",
                proposal_id=proposal,
                kind=kind,
                key=key,
                name=key.replace("-", " ").title(),
                aliases=[],
                text=_flat_prose(rng, 40),
                fields={"status": rng.choice(["open", "active", "hidden"])},
                valid_from=chapter,
                tags=[rng.choice(FLAT_WORDS)],
            )
            add("confirm_canon", proposal_id=proposal)
            if not revise:
                confirmed[kind].append(key)
        everything = [key for keys in confirmed.values() for key in keys]
        for s in range(1, 4):

            def pick(kind: str, most: int) -> list[str]:
                keys = confirmed[kind]
                return rng.sample(keys, min(len(keys), rng.randint(0, most)))

            add(
                "add_scene_card",
                chapter=chapter,
                scene_id=f"s{s}",
                summary=_flat_prose(rng, 30),
                characters=pick("character", 3) or confirmed["character"][:1],
                locations=pick("location", 1),
                threads=pick("thread", 1),
                items=pick("item", 1),
                callbacks=rng.sample(everything, min(len(everything), rng.randint(0, 1))),
            )
        add("submit_draft", chapter=chapter, draft_id=f"d{chapter}", text=_flat_prose(rng, draft_words))
        add("accept_draft", draft_id=f"d{chapter}")
        add("record_chapter_summary", chapter=chapter, text=_flat_prose(rng, 120))
    return cmds[:n]


# -- War and Peace (issue 5) -----------------------------------------------------------------------
NOVEL_RELATIVE = "../shared/data/novels/war_and_peace.txt"  # relative to the project root
NOVEL = (Path(__file__).resolve().parents[1] / NOVEL_RELATIVE).resolve()
NOVEL_STORY = "war-and-peace"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class Chapter(NamedTuple):  # (not a dataclass: tests load this file without registering it as a module)
    number: int  # 1..365 over the whole novel
    volume: int  # book index 1..17
    heading: str  # "CHAPTER IV" (numbered per book)
    text: str


class Book(NamedTuple):
    number: int
    title: str
    chapters: list[Chapter]


def read_novel(path: str | Path = NOVEL) -> list[Book]:
    """The novel's books and chapters, as ``canon import manuscript`` splits it."""
    from canon_ledger.domain.manuscript import split

    with open(path, encoding="utf-8") as f:
        novel = split(f.read())
    return [Book(v.number, v.heading, [Chapter(c.number, c.volume, c.heading, c.text)
                                       for c in novel.chapters if c.volume == v.number]) for v in novel.volumes]


def first_sentence(text: str, limit: int = 600) -> str:
    flat_text = " ".join(text.split())
    sentence = _SENTENCE.split(flat_text, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[:limit].rsplit(" ", 1)[0] + " …"


def novel_commands(books: list[Book], chapters: int | None = None) -> list[dict[str, Any]]:
    """The novel as one story: ``start_story``; per chapter ``plan_chapter`` (volume = book),
    ``submit_draft`` (the chapter text), ``accept_draft``, ``record_chapter_summary`` (its first
    sentence); after each book's last chapter ``record_volume_summary``. ``chapters``: the
    first N only."""
    cmds: list[dict[str, Any]] = []

    def add(command_type: str, /, **fields: Any) -> None:
        cmds.append({"type": command_type, "command_id": f"wp-{len(cmds) + 1:05d}", "story_id": NOVEL_STORY,
                     **fields})

    add("start_story", title="War and Peace", style_guardrails=["Leo Tolstoy, Maude translation."],
        output_contract="Prose chapters.", budgets={})
    done = 0
    for book in books:
        for ch in book.chapters:
            if chapters is not None and done >= chapters:
                return cmds
            add("plan_chapter", chapter=ch.number, volume=ch.volume, goals=[f"{book.title}, {ch.heading}"])
            add("submit_draft", chapter=ch.number, draft_id=f"ch{ch.number:03d}", text=ch.text)
            add("accept_draft", draft_id=f"ch{ch.number:03d}")
            add("record_chapter_summary", chapter=ch.number, text=first_sentence(ch.text))
            done += 1
            if ch is book.chapters[-1]:
                add("record_volume_summary", volume=book.number,
                    text=f"{book.title} (chapters {book.chapters[0].number}-{ch.number}). "
                         f"{first_sentence(book.chapters[0].text)}")
    return cmds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSONL file to write ('-' for stdout)")
    parser.add_argument("--seed", type=int, help=f"default {DEFAULT_SEED} (2 with --flat)")
    parser.add_argument("--chapters", type=int, default=CHAPTERS)
    parser.add_argument("--entries", type=int, default=ENTRIES, help="confirmed canon entries (scales every kind)")
    parser.add_argument("--flat", type=int, metavar="N",
                        help="write bench_apply's workload of N commands instead (seed default 2)")
    args = parser.parse_args(argv)
    if args.flat:
        commands = flat(args.flat, seed=2 if args.seed is None else args.seed)
    else:
        commands = generate(seed=DEFAULT_SEED if args.seed is None else args.seed, chapters=args.chapters,
                            entries=args.entries)
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    try:
        for c in commands:
            out.write(json.dumps(c, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    if args.flat:
        print(f"{len(commands):,} commands of story {FLAT_STORY}", file=sys.stderr)
        return 0
    t = totals(commands)
    print(f"{t['commands']:,} commands, {t['events']:,} events (receipts included), {t['chapters']:,} chapters, "
          f"{t['volumes']} volumes, {t['canon_entries']:,} canon entries, {t['revisions']:,} revisions, "
          f"{t['retirements']:,} retirements, {t['rejected_proposals']:,} rejected proposals, "
          f"{t['rejected_drafts']:,} rejected drafts", file=sys.stderr)
    print("entries by kind: " + ", ".join(f"{k} {n:,}" for k, n in t["canon_entries_by_kind"].items()), file=sys.stderr)
    print("commands by type: " + ", ".join(f"{k} {n:,}" for k, n in t["commands_by_type"].items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
