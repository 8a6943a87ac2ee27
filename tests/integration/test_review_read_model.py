"""The authoring read model's v2 columns, on both stores: a proposal's whole version (aliases,
fields, tags) and the canon step its confirmation made, which the review queue's view joins to
the canon rows (``StoryViews.review``); a rebuild gives the same rows. And a packet asked at a
position where its chapter was not yet planned says the position."""

from __future__ import annotations

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.review_view import cards
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.errors import NotFound
from canon_ledger.infrastructure.demo import STORY
from tests.helpers import apply_demo


def propose(pid: str, key: str, valid_from: int, **more: object) -> dict[str, object]:
    return {"type": "propose_canon", "command_id": f"c-{pid}", "story_id": STORY, "proposal_id": pid,
            "kind": "character", "key": key, "name": more.pop("name", key.title()), "aliases": more.pop("aliases", []),
            "text": more.pop("text", f"{key} text"), "fields": more.pop("fields", {}), "valid_from": valid_from, **more}


def test_proposals_keep_their_whole_version_and_the_step_their_confirmation_made(services) -> None:
    apply_demo(services)
    results = services.ledger.apply([parse_command(c) for c in (
        propose("p-ilse-v3", "ilse", 6, aliases=["Warden Marrow"], fields={"status": "warden", "hidden_until": 7},
                tags=["lead"], text="Warden of the Quay."),
        propose("p-ferry-a", "ferry", 5), propose("p-ferry-b", "ferry", 5, aliases=["the crossing"]),
        propose("p-mira", "mira", 2, fields={"cost": 3}),
        {"type": "confirm_canon", "command_id": "c-confirm-mira", "story_id": STORY, "proposal_id": "p-mira"},
    )])
    assert {r.status for r in results} == {"applied"}, [r.error for r in results]
    views = services.views()

    pending = {p["proposal_id"]: p for p in views.proposals(STORY, "proposed")}
    assert pending["p-ilse-v3"]["aliases"] == ["Warden Marrow"] and pending["p-ilse-v3"]["tags"] == ["lead"]
    assert pending["p-ilse-v3"]["fields"] == {"status": "warden", "hidden_until": 7}
    assert pending["p-ferry-a"]["aliases"] == [] and pending["p-ferry-a"]["fields"] == {}
    confirmed = {p["proposal_id"]: p for p in views.proposals(STORY, "confirmed")}
    assert confirmed["p-mira"]["fields"] == {"cost": 3} and "p-ilse-v2" in confirmed

    queue, steps = views.review(STORY)
    assert [p["proposal_id"] for p in queue] == ["p-pending", "p-ilse-v3", "p-ferry-a", "p-ferry-b"]
    # Only the entries a pending proposal names, each step with the version its confirmation made.
    assert {(s["kind"], s["key"]) for s in steps} == {("character", "ilse")}
    assert [(s["step"], s["valid_from"], s["proposal_id"]) for s in steps] == [(1, 1, "p-ilse"), (2, 4, "p-ilse-v2")]
    assert steps[1]["text"].startswith("Licensed lamplighter") and steps[1]["aliases"] == ["the Marrow girl",
                                                                                            "Lamplighter Marrow"]
    assert steps[1]["fields"]["status"] == "licensed" and steps[1]["rendered"].startswith("Ilse Marrow (character")

    made = {c.proposal["proposal_id"]: c for c in cards(queue, steps)}
    ilse = made["p-ilse-v3"]
    assert ilse.current is not None and ilse.current["step"] == 2 and not ilse.rendered
    assert {r.name: r.change for r in ilse.rows}["hidden_until"] == "added"
    assert made["p-ferry-a"].competing == ["p-ferry-b"] and made["p-ferry-b"].competing == ["p-ferry-a"]
    assert made["p-ferry-a"].new_entry and made["p-pending"].competing == []

    before = (views.proposals(STORY), views.review(STORY))
    services.authoring.rebuild()
    assert (services.views().proposals(STORY), services.views().review(STORY)) == before


def test_a_packet_at_a_position_before_its_chapter_says_the_position(services) -> None:
    apply_demo(services)
    planned = services.views().chapter(STORY, 5)["goals_source"]
    with pytest.raises(NotFound) as refused:
        services.packet(Request(STORY, "writer", 5), at=planned - 1)
    assert refused.value.code == "unknown_chapter"
    assert refused.value.message.endswith(f"has not been planned as of position {planned - 1}")
    end = services.ledger.event_log.position()
    with pytest.raises(NotFound) as scene:
        services.packet(Request(STORY, "writer", 5, "zz"), at=end)
    assert scene.value.code == "unknown_scene" and scene.value.message.endswith(f"as of position {end}")
    with pytest.raises(NotFound) as now:  # asked now (no position): the message is as it was
        services.packet(Request(STORY, "writer", 99))
    assert "as of position" not in now.value.message
