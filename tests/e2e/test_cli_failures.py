"""Friendly failures and honest help: a mistyped store path is refused (and not created), a JSON
error names where the line breaks, every failing verb answers JSON with ``--format json``, and
every verb and option says what it is for."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from canon_ledger.domain.story import DEFAULT_BUDGETS
from canon_ledger.infrastructure.cli import build_parser
from tests.cli_runner import canon
from tests.conftest import initialised

VERBS_WITH_A_STORE = {
    "apply": ["apply", "-"],
    "events": ["events"],
    "packet": ["packet", "--story", "s", "--role", "writer", "--chapter", "1"],
    "audit": ["audit", "pkt_000000000000000000000000"],
    "rebuild": ["rebuild"],
    "ingest": ["ingest", "--collection", "c", "notes.md"],
    "search": ["search", "--collection", "c", "words"],
    "compile": ["compile"],
    "lint": ["lint"],
    "quota": ["quota"],
    "quarantine": ["quarantine"],
    "status": ["status"],
    "worker": ["worker", "--once"],
    "stories": ["stories"],
    "canon": ["canon", "--story", "s"],
    "chapter": ["chapter", "--story", "s", "1"],
    "proposals": ["proposals", "--story", "s"],
    "drafts": ["drafts", "--story", "s"],
    "key": ["key", "list"],
    "serve": ["serve", "--port", "0"],
    "mcp": ["mcp"],
    "import": ["import", "manuscript", "book.md", "--story", "s"],
    "export": ["export", "lorebook", "--story", "s", "--as-of", "1", "--as", "sillytavern"],
    "summarize": ["summarize", "--story", "s"],
    "check": ["check", "--story", "s", "--draft", "d"],
    "secrets": ["secrets", "--story", "s"],
    "knowledge": ["knowledge", "--story", "s", "--character", "c"],
}


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_every_verb_that_opens_a_store_is_listed_here() -> None:
    assert set(_verbs(build_parser())) - {"init", "demo", "schema"} == set(VERBS_WITH_A_STORE)


@pytest.mark.parametrize("verb", sorted(VERBS_WITH_A_STORE))
def test_a_sqlite_store_that_does_not_exist_is_refused_and_not_created(tmp_path: Path, verb: str) -> None:
    typo = tmp_path / "typo.db"
    result = canon("--db", f"sqlite:///{typo}", "--format", "json", *VERBS_WITH_A_STORE[verb], cwd=tmp_path,
                   stdin="")
    assert result.returncode == 3, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "store_not_found" and error["field"] == "db"
    assert "canon init" in error["message"] and "canon init" in result.stderr
    assert not typo.exists()


def test_init_and_demo_still_create_their_store(tmp_path: Path) -> None:
    assert canon("--db", f"sqlite:///{tmp_path / 'new.db'}", "init").returncode == 0
    assert (tmp_path / "new.db").is_file()


def test_a_json_line_missing_its_closing_brace_is_placed_where_it_ends(tmp_path: Path) -> None:
    url = initialised(f"sqlite:///{tmp_path / 'j.db'}")
    line = ('{"type": "start_story", "command_id": "c1", "story_id": "s1", "title": "T", "style_guardrails": [], '
            '"output_contract": "md"')
    for ending in ("\n", "\r\n", "   \n"):
        result = canon("--db", url, "--format", "json", "apply", "-", stdin=f'{line}{ending}')
        assert result.returncode == 1
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "malformed_json"
        assert f"line 1 column {len(line) + 1}" in error["message"], error["message"]


def test_usage_errors_answer_json_on_stdout_with_the_option_named(tmp_path: Path) -> None:
    result = canon("--format", "json", "packet", "--story", "s", "--role", "novelist", "--chapter", "1", cwd=tmp_path)
    assert result.returncode == 2
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "usage_error" and error["field"] == "role" and "novelist" in error["message"]
    assert len(result.stdout.splitlines()) == 1  # one JSON line, and only the reason on stderr (issue 38)
    assert result.stderr.splitlines() == [f"canon: error: {error['message']}"]
    text = canon("packet", "--story", "s", "--role", "novelist", "--chapter", "1", cwd=tmp_path)
    assert text.returncode == 2 and text.stdout == "" and "usage: canon packet" in text.stderr


def test_search_of_an_unknown_collection_answers_json(tmp_path: Path) -> None:
    url = initialised(f"sqlite:///{tmp_path / 's.db'}")
    result = canon("--db", url, "--format", "json", "search", "--collection", "nope", "words")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"]["code"] == "unknown_collection"


def _parsers(parser: argparse.ArgumentParser, path: str = "canon"):
    for name, sub in _verbs(parser).items():
        yield f"{path} {name}", sub
        if any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
            yield from _parsers(sub, f"{path} {name}")


def test_every_verb_has_a_description_and_every_option_a_help_text() -> None:
    missing = []
    for path, parser in _parsers(build_parser()):
        if not (parser.description or "").strip():
            missing.append(f"{path}: no description")
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}: no help")
    assert missing == []


def test_the_default_budget_of_every_role_is_in_the_help() -> None:
    for args in (["--help"], ["packet", "--help"]):
        shown = canon(*args).stdout
        for role, budget in DEFAULT_BUDGETS.items():
            assert f"{role} {budget:,}" in shown, (args, role)
