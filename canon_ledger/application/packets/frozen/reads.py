"""What only the earlier compilers read: the mentioned and the always-on entries as two reads
(compilers 5 and 6; compiler 7 made them one, ``sources.lore_entries``), and L1's query taken
from the rendered goals and scene-card texts (compilers 2 to 4)."""

from __future__ import annotations

from typing import cast

from canon_ledger.application.packets import fetches
from canon_ledger.application.packets.reading import Candidate, Read, Reading, entry, source
from canon_ledger.application.packets.sources import (always_on_keys, constant, entries_in_force, keys_of, mentions,
                                                      step_of, untagged)
from canon_ledger.domain.tiers import Tier

QUERY_WORDS = 64  # the words L1 searched with (compilers 2 to 4)


def mentioned_keys(r: Reading, read: Read) -> tuple[str, ...]:
    return keys_of(mentions(r, read).by(r.chapter))


@source(fetches.chapter, fetches.scenes, fetches.lore, keys=mentioned_keys)
def mentioned_entries(r: Reading, read: Read) -> list[Candidate]:
    """Entries in force whose keys the goals, the scene summaries or the draft under review
    mention (no tag named them), in key order."""
    return [entry(read.tier, e, f'{read.reason} in {m.where} as "{m.said}"', r.chapter)
            for e, m in entries_in_force(r, read, untagged(r, mentions(r, read)))]


@source(fetches.lore, keys=always_on_keys, rules=True)
def always_on_entries(r: Reading, read: Read) -> list[Candidate]:
    """Entries in force whose rule includes them in every packet, at the tier it names, in key
    order; a recipe with this read also keeps out every entry whose rule says never."""
    steps = constant(r)
    return [entry(cast(Tier, a.tier), e, read.reason, r.chapter)
            for e, a in entries_in_force(r, read, lambda e: steps.get(step_of(e)))]


def rendered_query(reading: Reading, candidates: list[Candidate]) -> str:
    """The goals' items and each scene's summary, read back out of the texts the projection
    rendered ("Chapter N goals:\\n- ...", "Scene s (chapter N): summary\\n..."): the first line
    of a summary only, and a card with no summary gives its heading."""
    parts = []
    for kind in ("chapter_goals", "scene_card"):
        for c in candidates:
            if c.kind != kind or not c.fact.text:
                continue
            lines = c.fact.text.splitlines()
            if kind == "chapter_goals":
                parts += [line.removeprefix("- ") for line in lines[1:]]
            else:
                parts.append(lines[0].partition("): ")[2] or lines[0])
    return " ".join(" ".join(parts).split()[:QUERY_WORDS])
