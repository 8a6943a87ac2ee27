"""Property: over random histories, no unconfirmed, rejected or later-chapter text ever reaches
a packet, and every confirmed fact a scene card asks for, or its summary mentions by name, is
there when the budget allows (mention recall admits only what is in force at the chapter).

Every proposal and draft text carries a unique marker. A qa packet asked to review a
submitted draft holds that draft's marker, once, as its ``draft_under_review`` item, and no
other draft's; a decided draft is refused for review; the canon its text mentions comes in
under the same rule (confirmed, in force at the chapter) and no other packet holds any draft. The history mixes proposals,
confirmations, rejections, revisions (later valid_from), drafts, acceptances and draft
rejections in random order; the domain refuses what is illegal (confirming a rejected
proposal, accepting a rejected draft), and the model below follows only what was applied.
50 examples by default; CANON_HYPOTHESIS=deep runs 1,000 (200 before the profiles).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import examples

CHAPTERS = 4
TAGGABLE = {"character": "characters", "location": "locations", "thread": "threads", "item": "items"}
KINDS = (*TAGGABLE, "world_rule", "timeline_event")
ROLES = ("planner", "writer", "qa", "summarizer", "chat")

proposal = st.tuples(st.sampled_from(KINDS), st.integers(0, 2), st.integers(1, CHAPTERS),
                     st.sampled_from(["confirm", "reject", "pending", "reject-then-confirm"]))
draft = st.tuples(st.integers(1, CHAPTERS), st.sampled_from(["accept", "reject", "pending", "reject-then-accept"]))
history = st.tuples(st.lists(proposal, min_size=1, max_size=12), st.lists(draft, max_size=6), st.randoms(use_true_random=False))


@dataclass
class Model:
    story: str
    commands: list[dict] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)
    proposals: dict[str, tuple[str, str, int, str]] = field(default_factory=dict)  # pid -> kind, key, valid_from, marker


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    s = bootstrap(f"sqlite:///{tmp_path_factory.mktemp('prop') / 'canon.db'}")
    yield s
    s.close()


def _marker(kind: str) -> str:
    return f"MK{kind}{uuid.uuid4().hex[:12]}"


def _apply(services, story: str, command: dict) -> str:
    [result] = services.ledger.apply([parse_command({"story_id": story, "command_id": uuid.uuid4().hex, **command})])
    assert result.status in ("applied", "rejected"), result.as_dict()
    if result.status == "rejected":
        assert result.error.code in ("rejected_proposal_cannot_be_confirmed", "rejected_draft_cannot_be_accepted"), result.as_dict()
    return result.status


@settings(max_examples=examples(50, 1000), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history)
def test_packets_hold_only_confirmed_canon(services, spec) -> None:
    proposals, drafts, rnd = spec
    story = "prop-" + uuid.uuid4().hex[:10]
    _apply(services, story, {"type": "start_story", "title": "P", "style_guardrails": ["g"], "output_contract": "md"})
    for n in range(1, CHAPTERS + 1):
        _apply(services, story, {"type": "plan_chapter", "chapter": n, "volume": 1, "goals": [f"goal {n}"]})

    # Build every step, then interleave them randomly, keeping each item's own order.
    steps: list[list[tuple[str, dict, str | None]]] = []
    for i, (kind, k, valid_from, fate) in enumerate(proposals):
        pid, marker = f"p{i}", _marker("P")
        seq = [("propose", {"type": "propose_canon", "proposal_id": pid, "kind": kind, "key": f"{kind}-{k}",
                            "name": f"{kind} {k}", "aliases": [], "text": marker, "fields": {}, "valid_from": valid_from},
                (pid, kind, f"{kind}-{k}", valid_from, marker))]
        if fate in ("reject", "reject-then-confirm"):
            seq.append(("reject", {"type": "reject_canon", "proposal_id": pid, "reason": "no"}, None))
        if fate in ("confirm", "reject-then-confirm"):
            seq.append(("confirm", {"type": "confirm_canon", "proposal_id": pid}, pid))
        steps.append(seq)
    reasons: set[str] = set()  # why findings were dismissed or overridden: kept with drafts, never in a packet
    for j, (chapter, fate) in enumerate(drafts):
        did, marker = f"d{j}", _marker("D")
        names = [f"{kind} {k}" for kind, k, _, _ in proposals if rnd.random() < 0.3]  # what the draft mentions
        seq = [("submit", {"type": "submit_draft", "chapter": chapter, "draft_id": did,
                           "text": " ".join([marker, *names])}, marker)]
        if rnd.random() < 0.5:
            reasons.add(why := _marker("W"))
            seq.append(("dismiss", {"type": "dismiss_finding", "draft_id": did,
                                    "finding_id": f"fnd_{uuid.uuid4().hex[:16]}", "reason": why}, None))
        if fate in ("reject", "reject-then-accept"):
            seq.append(("reject_draft", {"type": "reject_draft", "draft_id": did, "reason": "no"}, None))
        if fate in ("accept", "reject-then-accept"):
            override = {"override_reason": reasons.add(why := _marker("O")) or why} if rnd.random() < 0.5 else {}
            seq.append(("accept", {"type": "accept_draft", "draft_id": did, **override}, marker))
        steps.append(seq)

    unconfirmed: dict[str, str] = {}  # pid -> marker, until a confirmation is applied
    confirmed: list[tuple[str, str, int, str]] = []  # kind, key, valid_from, marker, in confirmation order
    info: dict[str, tuple[str, str, int, str]] = {}
    draft_markers: dict[str, bool] = {}  # marker -> accepted
    draft_chapter: dict[str, int] = {}
    draft_of: dict[str, str] = {}  # marker -> draft id
    draft_texts = [cmd["text"] for seq in steps for _, cmd, _ in seq if cmd["type"] == "submit_draft"]
    decided: set[str] = set()  # markers of drafts accepted or rejected
    accepted_text: dict[int, str] = {}  # chapter -> the marker of its latest accepted draft
    while any(steps):
        seq = rnd.choice([s for s in steps if s])
        action, command, extra = seq.pop(0)
        status = _apply(services, story, command)
        if action == "propose":
            pid, kind, key, valid_from, marker = extra
            info[pid] = (kind, key, valid_from, marker)
            unconfirmed[pid] = marker
        elif action == "confirm" and status == "applied":
            confirmed.append(info[extra])
            unconfirmed.pop(extra)
        elif action == "submit":
            draft_markers[extra] = False
            draft_chapter[extra] = command["chapter"]
            draft_of[extra] = command["draft_id"]
        elif action == "accept" and status == "applied":
            draft_markers[extra] = True
            accepted_text[draft_chapter[extra]] = extra
            decided.add(extra)
        elif action == "reject_draft" and status == "applied":
            decided.add(next(m for m, d in draft_of.items() if d == command["draft_id"]))

    # Scene cards tag what was confirmed (tags of unconfirmed keys are refused by the domain), and
    # their summaries name entries of any fate (confirmed, pending or rejected, in force or later).
    confirmed_keys = sorted({(kind, key) for kind, key, _, _ in confirmed if kind in TAGGABLE})
    every_key = sorted({(kind, key) for kind, key, _, _ in info.values()})
    tagged: dict[int, list[tuple[str, str]]] = {}
    mentioned: dict[int, list[tuple[str, str]]] = {}
    for n in range(1, CHAPTERS + 1):
        chosen = [ck for ck in confirmed_keys if rnd.random() < 0.6]
        tagged[n] = chosen
        mentioned[n] = [ck for ck in every_key if rnd.random() < 0.5]
        summary = "scene: " + "; ".join(f"{kind} {key.rsplit('-', 1)[1]}" for kind, key in mentioned[n])
        tags = {name: [key for kind, key in chosen if TAGGABLE[kind] == name] for name in TAGGABLE.values()}
        _apply(services, story, {"type": "add_scene_card", "chapter": n, "scene_id": f"s{n}", "summary": summary,
                                 "callbacks": [], **tags})

    forbidden = set(unconfirmed.values()) | {m for m, accepted in draft_markers.items() if not accepted} | reasons
    for n in range(1, CHAPTERS + 1):
        for role in ROLES:
            if role == "summarizer" and not any(draft_markers.get(m) for m in draft_markers):
                continue
            try:
                packet = services.packets.packet(Request(story, role, n, budget=1_000_000), record=False)
            except Exception as e:  # only "no accepted text" is an acceptable refusal here
                assert getattr(e, "code", None) == "chapter_has_no_accepted_text", e
                continue
            body = packet.to_json()
            later = {marker for _, _, valid_from, marker in confirmed if valid_from > n}
            leaked = [m for m in forbidden | later if m in body]
            assert not leaked, (role, n, leaked)
            for item in packet.items:
                if item.reason.startswith("mentioned"):
                    assert (item.kind, item.key) in mentioned[n] and (item.kind, item.key) not in tagged[n], item
            # L1 retrieval offers only the latest accepted text of earlier chapters.
            for item in packet.items:
                if item.kind in ("chunk", "wiki_page"):
                    found = [m for m in draft_markers if m in item.text]
                    assert all(draft_chapter[m] < n and accepted_text.get(draft_chapter[m]) == m for m in found), \
                        (role, n, item.key, found)
            if role == "writer" and any(c < n for c in accepted_text):
                assert any(st.step == "keyword" and st.status == "done" for st in packet.stages), packet.stages
            if role == "writer":
                for kind, key in tagged[n] + mentioned[n]:
                    in_force = [c for c in confirmed if (c[0], c[1]) == (kind, key) and c[2] <= n]
                    if in_force:
                        latest = max(range(len(in_force)), key=lambda i: (in_force[i][2], i))
                        assert in_force[latest][3] in body, (kind, key, n)

    # The review: each submitted draft in its own qa packet only; a decided one is refused.
    for marker, did in draft_of.items():
        n = draft_chapter[marker]
        request = Request(story, "qa", n, budget=1_000_000, draft=did)
        if marker in decided:
            with pytest.raises(Exception) as refused:
                services.packets.packet(request, record=False)
            assert getattr(refused.value, "code", None) == "draft_not_under_review"
            continue
        packet = services.packets.packet(request, record=False)
        body = packet.to_json()
        later = {m for _, _, valid_from, m in confirmed if valid_from > n}
        leaked = [m for m in (forbidden - {marker}) | later if m in body]
        assert not leaked, (did, n, leaked)
        holding = [i for i in packet.items if marker in i.text]
        assert [(i.tier, i.kind, i.key) for i in holding] == [("P0", "draft_under_review", did)], holding
        text = next(d for d in draft_texts if d.startswith(marker))
        for item in packet.items:
            if item.reason.startswith("mentioned in the draft under review"):
                kind, k = item.key.rsplit("-", 1)
                assert f"{kind} {k}" in text and (item.kind, item.key) not in tagged[n], item
