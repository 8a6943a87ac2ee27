"""Words that help (issue 38), in-process through ``cli.main`` (no process needed): with
``--format json`` an error is one JSON line (argparse's usage errors too) and one line on
stderr; a mistyped verb or choice, a command spread over several lines, curly quotes and an
alias used as a scene-card tag each get a hint; an error written to a reader that has left
ends quietly with its own status."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from canon_ledger.domain.commands import parse_line
from canon_ledger.infrastructure import cli
from canon_ledger.infrastructure.demo import SAMPLE
from canon_ledger.infrastructure.stores import open_ledger
from tests.cli_runner import canon
from tests.conftest import initialised


def run(*argv: str, stdin: str | None = None) -> tuple[int, list[str], list[str]]:
    """(exit status, stdout lines, stderr lines) of ``canon ARGV`` (in-process: ``tests.cli_runner``)."""
    done = canon(*argv, stdin=stdin)
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


@pytest.fixture
def demo_store(tmp_path: Path) -> str:
    url = initialised(f"sqlite:///{tmp_path / 'demo.db'}")
    ledger = open_ledger(url)
    try:
        ledger.apply([parse_line(line) for line in SAMPLE.read_text().splitlines() if line.strip()])
    finally:
        ledger.close()
    return url


USAGE_ERRORS = [
    ["packet", "--story", "s", "--role", "writr", "--chapter", "1"],  # an invalid choice
    ["events", "--bogus"],  # an unknown option
    ["packet", "--story", "s"],  # required options missing
    ["pakcet"],  # an unknown verb
    ["key", "craete"],  # an unknown verb of a verb
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=lambda a: " ".join(a))
def test_with_format_json_a_usage_error_is_one_json_line_and_one_line_on_stderr(argv: list[str]) -> None:
    status, out, err = run("--format", "json", *argv)
    assert status == 2
    [line] = out
    error = json.loads(line)["error"]
    assert error["code"] == "usage_error" and error["message"]
    [said] = err  # no usage lines: the reason alone
    assert said.startswith("canon: ") and error["message"] in said
    # Without --format json a person still gets the usage lines above the reason.
    status, out, err = run(*argv)
    assert status == 2 and out == [] and err[0].startswith("usage: canon") and err[-1].startswith("canon: error: ")


@pytest.mark.parametrize(("argv", "meant"), [
    (["pakcet"], "packet"),
    (["stauts"], "status"),
    (["key", "craete"], "create"),
    (["packet", "--story", "s", "--role", "writr", "--chapter", "1"], "writer"),
    (["rebuild", "--projection", "cannon"], "canon"),
])
def test_a_mistyped_verb_or_choice_gets_a_did_you_mean(argv: list[str], meant: str) -> None:
    status, _, err = run(*argv)
    assert status == 2 and f"did you mean {meant!r}?" in err[-1], err
    status, out, _ = run("--format", "json", *argv)
    assert f"did you mean {meant!r}?" in json.loads(out[0])["error"]["message"]


def test_a_word_far_from_every_verb_gets_no_guess() -> None:
    status, _, err = run("xyzzy")
    assert status == 2 and "did you mean" not in err[-1] and "invalid choice: 'xyzzy'" in err[-1]


PRETTY = json.dumps({"type": "start_story", "command_id": "c1", "story_id": "s1", "title": "T",
                     "style_guardrails": [], "output_contract": "md"}, indent=2)


def test_a_command_spread_over_several_lines_is_told_one_object_per_line(tmp_path: Path) -> None:
    url = initialised(f"sqlite:///{tmp_path / 'j.db'}")
    status, out, err = run("--db", url, "--format", "json", "apply", "-", stdin=PRETTY + "\n")
    assert status == 1
    results = [json.loads(line) for line in out]
    assert len(results) == len(PRETTY.splitlines()) and {r["error"]["code"] for r in results} == {"malformed_json"}
    for r in results:
        assert "one JSON object per line" in r["error"]["message"], r
    # A one-line command that is merely broken is not told so.
    broken = '{"type": "start_story", "command_id": "c1", "story_id": "s1", "title": T}\n'
    status, out, _ = run("--db", url, "--format", "json", "apply", "-", stdin=broken)
    assert status == 1 and "one JSON object per line" not in json.loads(out[0])["error"]["message"]


def test_curly_quotes_in_a_command_line_get_the_straight_quotes_hint(tmp_path: Path) -> None:
    url = initialised(f"sqlite:///{tmp_path / 'q.db'}")
    line = "{\u201ctype\u201d: \u201cstart_story\u201d, \u201ccommand_id\u201d: \u201cc1\u201d}\n"
    status, out, _ = run("--db", url, "--format", "json", "apply", "-", stdin=line)
    assert status == 1
    error = json.loads(out[0])["error"]
    assert error["code"] == "malformed_json" and "curly quotes" in error["message"] and '(")' in error["message"]


@pytest.mark.parametrize(("tag", "hint"), [
    ("the Marrow girl", "did you mean key 'ilse' (alias 'the Marrow girl' of character ilse)?"),
    ("old venn", "did you mean key 'oskar' (alias 'Old Venn' of character oskar)?"),
    ("Clerk Hobb", "did you mean key 'clerk-hobb' (name 'Clerk Hobb' of character clerk-hobb)?"),
])
def test_an_alias_or_name_used_as_a_scene_card_tag_is_told_the_key(demo_store: str, tag: str, hint: str) -> None:
    card = {"type": "add_scene_card", "command_id": "card-5b", "story_id": "lamplight", "chapter": 5,
            "scene_id": "5b", "summary": "Ilse again.", "characters": ["ilse", tag], "locations": [], "threads": [],
            "callbacks": [], "items": []}
    status, out, _ = run("--db", demo_store, "--format", "json", "apply", "-",
                         stdin=json.dumps(card) + "\n")
    assert status == 1
    error = json.loads(out[0])["error"]
    assert error["code"] == "scene_card_tags_must_be_confirmed_canon" and error["field"] == "characters"
    assert hint in error["message"], error["message"]
    status, out, err = run("--db", demo_store, "apply", "-", stdin=json.dumps(card) + "\n")
    assert status == 1 and any(hint in line for line in out), out


def test_a_tag_that_names_nothing_gets_no_guess(demo_store: str) -> None:
    card = {"type": "add_scene_card", "command_id": "card-5c", "story_id": "lamplight", "chapter": 5,
            "scene_id": "5c", "summary": ".", "characters": ["nobody-at-all"], "locations": [], "threads": [],
            "callbacks": [], "items": []}
    status, out, _ = run("--db", demo_store, "--format", "json", "apply", "-",
                         stdin=json.dumps(card) + "\n")
    assert status == 1 and "did you mean" not in json.loads(out[0])["error"]["message"]


class Gone(io.StringIO):
    """A stream whose reader has left: every write and flush is a broken pipe."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize(("argv", "expected"), [
    (["pakcet"], 2),  # argparse's usage error
    (["--format", "json", "pakcet"], 2),
    (["--db", "sqlite:///{tmp}/none.db", "events"], 3),  # store_not_found: a CanonError
    (["--db", "sqlite:///{tmp}/none.db", "--format", "json", "events"], 3),
    (["--db", "sqlite:///{tmp}/store.db", "packet", "--story", "nowhere", "--role", "writer", "--chapter", "1"], 1),
    (["--db", "sqlite:///{tmp}/store.db", "search", "--collection", "c", " "], 2),  # a Failure (empty query)
])
def test_an_error_written_to_a_reader_that_has_left_ends_quietly_with_its_status(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str], expected: int) -> None:
    initialised(f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.delenv("CANON_DATABASE_URL", raising=False)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    for stdout_gone in (False, True):
        monkeypatch.setattr(sys, "stderr", Gone())
        if stdout_gone:
            monkeypatch.setattr(sys, "stdout", Gone())
        assert cli.main(argv) == expected


def test_proposals_have_one_vocabulary_and_pending_is_read_as_proposed(demo_store: str) -> None:
    status, out, _ = run("--db", demo_store, "--format", "json", "proposals", "--story",
                         "lamplight", "--status", "proposed")
    proposed = json.loads(out[0])["proposals"]
    assert status == 0 and [p["proposal_id"] for p in proposed] == ["p-pending"]  # the demo's one undecided
    status, out, _ = run("--db", demo_store, "--format", "json", "proposals", "--story",
                         "lamplight", "--status", "pending")
    assert status == 0 and json.loads(out[0])["proposals"] == proposed
    status, out, _ = run("--db", demo_store, "stories")
    assert status == 0 and "proposals proposed 1," in out[0] and "pending" not in out[0]
    status, out, _ = run("--db", demo_store, "--format", "json", "stories")
    [row] = json.loads(out[0])["stories"]
    assert row["proposals_proposed"] == 1 == row["pending_proposals"]  # the old name kept for old clients
