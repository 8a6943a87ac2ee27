"""Fuzz harness: hostile command lines against ``canon apply`` (issue 16).

For every generated line, in-process on both stores: no exception escapes, the answer is a
structured result, a refusal leaves the log as it was, and whatever is accepted projects
into every read model without quarantine. A sample goes through the real CLI process too.

The suite's run is the ``quick`` hypothesis profile (a few seconds a store); a deep run:
``CANON_HYPOTHESIS=deep pytest tests/property/test_fuzz_commands.py`` (5,000 lines a store,
25 CLI batches).
"""

from __future__ import annotations

import json
import subprocess

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.application.command_reader import read_line as _parse
from tests.cli_runner import CANON
from tests.conftest import initialised
from tests.helpers import examples

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]

TEMPLATES = {
    "start_story": {"story_id": "s2", "title": "T", "style_guardrails": ["g"], "output_contract": "md",
                    "budgets": {"writer": 100}},
    "plan_chapter": {"story_id": "s", "chapter": 2, "volume": 1, "goals": ["g"]},
    "add_scene_card": {"story_id": "s", "chapter": 1, "scene_id": "1b", "summary": "s", "characters": ["k"],
                       "locations": [], "threads": [], "callbacks": [], "items": [], "pov": "k"},
    "propose_canon": {"story_id": "s", "proposal_id": "p2", "kind": "thread", "key": "k2", "name": "N",
                      "aliases": ["a"], "text": "t", "fields": {"state": "open"}, "valid_from": 1},
    "confirm_canon": {"story_id": "s", "proposal_id": "p2"},
    "reject_canon": {"story_id": "s", "proposal_id": "p2", "reason": "r"},
    "retire_canon": {"story_id": "s", "kind": "character", "key": "k", "valid_from": 2, "reason": "r"},
    "submit_draft": {"story_id": "s", "chapter": 1, "draft_id": "d2", "text": "Text."},
    "accept_draft": {"story_id": "s", "draft_id": "d"},
    "reject_draft": {"story_id": "s", "draft_id": "d", "reason": "r"},
    "dismiss_finding": {"story_id": "s", "draft_id": "d", "finding_id": "fnd_0123456789abcdef", "reason": "r"},
    "record_knowledge": {"story_id": "s", "character": "k", "kind": "character", "key": "k", "chapter": 1,
                         "how": "told"},
    "record_chapter_summary": {"story_id": "s", "chapter": 1, "text": "t"},
    "record_volume_summary": {"story_id": "s", "volume": 1, "text": "t"},
    "ingest_document": {"collection_id": "c", "document_id": "d.md", "title": "T", "text": "# H\n\nBody."},
    "edit_chunk": {"chunk_id": "c/d.md#h/0", "text": "new"},
}
SEED = [
    {"type": "start_story", "command_id": "seed-1", "story_id": "s", "title": "T", "style_guardrails": ["g"],
     "output_contract": "md"},
    {"type": "plan_chapter", "command_id": "seed-2", "story_id": "s", "chapter": 1, "volume": 1, "goals": ["g"]},
    {"type": "propose_canon", "command_id": "seed-3", "story_id": "s", "proposal_id": "p", "kind": "character",
     "key": "k", "name": "K", "aliases": [], "text": "t", "fields": {}, "valid_from": 1},
    {"type": "confirm_canon", "command_id": "seed-4", "story_id": "s", "proposal_id": "p"},
    {"type": "submit_draft", "command_id": "seed-5", "story_id": "s", "chapter": 1, "draft_id": "d", "text": "Draft."},
]

NASTY_TEXT = st.sampled_from([
    "", " ", "\x00", "a\x00b", "\ud800", "\udfff", "\u2028", "\ufeff", "'; DROP TABLE rm_tracking; --", '"quoted"',
    "../../etc/passwd", "a/b#c", "%s%s%n", "\\", "x" * 300, "\u0390" * 150, "\U0001F600" * 50, "NaN", "null",
])
NUMBERS = st.one_of(st.integers(), st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**53, 2**63, 10**18, 10**30, 10**300]),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans())
SCALARS = st.one_of(st.none(), NUMBERS, NASTY_TEXT, st.text(max_size=40))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)


VALID_TEXT = st.one_of(
    st.sampled_from(["'; DROP TABLE rm_tracking; --", '"quoted"', "../../etc/passwd", "a/b", "%s%n", "\\",
                     "\u2028", "\ufeff", "\u0390" * 128, "\U0001F600" * 50, "NaN", "null", "x" * 200]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=60))
NEW_ID = st.uuids().map(lambda u: f"fz-{u.hex[:12]}")
NEW_FINDING = st.uuids().map(lambda u: f"fnd_{u.hex[:16]}")
# Fields that name something new when a command is valid: so that valid commands apply.
FRESH = {"start_story": "story_id", "plan_chapter": "chapter", "propose_canon": "proposal_id",
         "submit_draft": "draft_id", "ingest_document": "document_id", "add_scene_card": "scene_id",
         "dismiss_finding": "finding_id"}


def _valid(draw, command: dict) -> dict:  # noqa: ANN001
    """The command with hostile-but-valid values: odd text everywhere text goes, new ids."""
    for field, value in list(command.items()):
        if field in ("type", "command_id", "story_id", "kind", "chunk_id", "collection_id"):
            continue
        if isinstance(value, str) and field not in ("proposal_id", "draft_id", "scene_id", "document_id", "key",
                                                    "finding_id", "character", "pov"):
            command[field] = draw(VALID_TEXT)
        elif isinstance(value, list) and value and isinstance(value[0], str) and field in ("goals", "aliases",
                                                                                         "style_guardrails"):
            command[field] = draw(st.lists(VALID_TEXT, max_size=3))
    fresh = FRESH.get(command["type"])
    if fresh == "chapter":
        command["chapter"] = draw(st.one_of(st.integers(3, 1_000_000), st.just(1_000_000)))
    elif fresh == "story_id":
        command["story_id"] = draw(NEW_ID)
    elif fresh == "finding_id":
        command["finding_id"] = draw(NEW_FINDING)
    elif fresh is not None:
        command[fresh] = draw(NEW_ID)
    return command


@st.composite
def hostile_line(draw) -> bytes:  # noqa: ANN001
    kind = draw(st.sampled_from(sorted(TEMPLATES)))
    command = {"type": kind, "command_id": draw(NEW_ID), **TEMPLATES[kind]}
    if draw(st.booleans()):  # well formed, with every odd value the bounds allow
        return json.dumps(_valid(draw, command), ensure_ascii=draw(st.booleans())).encode("utf-8")
    if draw(st.booleans()):
        command["command_id"] = draw(st.one_of(NASTY_TEXT, st.text(max_size=12)))
    deep = ""
    for _ in range(draw(st.integers(0, 3))):
        field = draw(st.sampled_from(sorted(command)))
        action = draw(st.sampled_from(["replace", "replace", "delete", "extra", "deep"]))
        if action == "replace":
            command[field] = draw(VALUES)
        elif action == "delete":
            command.pop(field, None)
        elif action == "extra":
            command[draw(st.text(max_size=10))] = draw(VALUES)
        else:
            depth = draw(st.sampled_from([10, 70, 300, 2000, 100_000]))
            command[field], deep = "__DEEP__", "[" * depth + "]" * depth  # spliced into the text below
    text = json.dumps(command, ensure_ascii=draw(st.booleans()), allow_nan=True)
    if deep:
        text = text.replace('"__DEEP__"', deep)
    raw = text.encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(["none", "none", "none", "truncate", "bytes", "prefix"]))
    if mangle == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif mangle == "bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\r"])) + raw[at:]
    elif mangle == "prefix":
        raw = draw(st.sampled_from([b"[", b"{", b"\xef\xbb\xbf", b"   ", b"1"])) + raw
    return raw.replace(b"\n", b" ")


OUTCOMES = {"applied", "unchanged", "duplicate", "rejected", "conflict"}


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fuzz_store(request, tmp_path_factory):
    from tests.conftest import create_database, drop_database

    if request.param == "sqlite":
        url, admin = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'fuzz.db'}", None
    else:
        url, admin = create_database()
    s = bootstrap(url, embedder="hashing")
    s.ledger.apply([parse_command(c) for c in SEED])
    try:
        yield s
    finally:
        s.close()
        if admin is not None:
            drop_database(url, admin)


@settings(max_examples=examples(100, 5000), deadline=None, suppress_health_check=HEALTH)
@given(line=hostile_line())
def test_no_hostile_line_escapes_as_an_exception_or_poisons_a_read_model(fuzz_store, line: bytes) -> None:
    s = fuzz_store
    before = s.ledger.event_log.position()
    item = _parse(line)  # the CLI's own reading of one line's bytes
    [result] = s.ledger.apply([item])
    assert result.status in OUTCOMES
    event(result.status if result.ok else f"{result.status}: {result.error.code if result.error else ''}")
    if not result.ok:
        assert result.error is not None and result.error.code and result.error.message
        assert s.ledger.event_log.position() == before  # a refusal writes nothing
        return
    for name in ("canon", "authoring", "knowledge", "retrieval"):
        s.read_models[name].catch_up_serving()
    assert s.quarantined() == [], f"an accepted command could not be projected: {line[:300]!r}"


@settings(max_examples=examples(2, 25), deadline=None, suppress_health_check=HEALTH)
@given(lines=st.lists(hostile_line(), min_size=40, max_size=40))
def test_the_cli_answers_every_hostile_line_with_one_strict_json_result(tmp_path_factory, lines: list[bytes]) -> None:
    db = tmp_path_factory.mktemp("cli") / "fuzz.db"
    initialised(f"sqlite:///{db}")
    body = b"".join(line + b"\n" for line in lines)
    result = subprocess.run([*CANON, "--db", f"sqlite:///{db}", "--format", "json",
                             "apply", "-"], input=body, capture_output=True, timeout=300)
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    assert result.returncode in (0, 1)

    def refuse(name: str) -> None:
        raise AssertionError(f"non-strict JSON {name}")

    # JSON lines end at \n only: a U+2028 inside a quoted message is text, not a line break
    answers = [json.loads(out, parse_constant=refuse) for out in result.stdout.decode().split("\n") if out]
    expected = [n for n, line in enumerate(lines, start=1) if line.strip(b" \t\r\n")]
    assert [a["line"] for a in answers] == expected
