"""``canon secrets`` and ``canon knowledge`` (issue 43) as a user runs them, on both stores: who
knows a secret as of a chapter, and what one character knows, as a readable table and as the
read's JSON; an unknown character or a chapter out of bounds is the usual structured refusal."""

from __future__ import annotations

import json

from tests.cli_runner import canon
from tests.integration.test_who_knows import STORY, commands


def test_secrets_and_knowledge_as_of_a_chapter(store_url: str) -> None:
    applied = canon("--db", store_url, "apply", "-", "--format", "json",
                    stdin="".join(json.dumps(c) + "\n" for c in commands()))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    db = ("--db", store_url)

    early = json.loads(canon(*db, "secrets", "--story", STORY, "--as-of", "8", "--format", "json").stdout)
    late = json.loads(canon(*db, "secrets", "--story", STORY, "--as-of", "9", "--format", "json").stdout)
    assert [s["key"] for s in late["secrets"]] == ["harl", "vault"] and late["as_of"] == 9
    assert early["secrets"][0]["known_by"] == []
    assert [(k["character"], k["chapter"], k["how"]) for k in late["secrets"][0]["known_by"]] == [
        ("mira", 9, "told by Orrin")]
    text = canon(*db, "secrets", "--story", STORY, "--as-of", "9")
    assert text.returncode == 0 and text.stdout.splitlines()[0] == f"secrets of {STORY} as of chapter 9: 2"
    assert "  character harl (Harl), secret from ch. 5" in text.stdout
    assert any(line.split()[:4] == ["mira", "(Mira)", "since", "ch."] and "told by Orrin" in line
               for line in text.stdout.splitlines())

    mira = json.loads(canon(*db, "knowledge", "--story", STORY, "--character", "mira", "--format", "json").stdout)
    assert (mira["as_of"], mira["name"]) == (12, "Mira")  # the default: the latest planned chapter
    assert [(k["key"], k["secret"], k["chapter"]) for k in mira["knows"]] == [("harl", True, 9)]
    before = canon(*db, "knowledge", "--story", STORY, "--character", "mira", "--as-of", "8")
    assert before.returncode == 0 and before.stdout.splitlines() == [f"what mira (Mira) knows in {STORY} as of "
                                                                     "chapter 8: 0 entries"]
    table = canon(*db, "knowledge", "--story", STORY, "--character", "mira").stdout.splitlines()
    assert table[1].split() == ["since", "entry", "secret", "how"]
    assert table[2].split()[:6] == ["ch.", "9", "character", "harl", "(Harl)", "yes"] and "told by Orrin" in table[2]

    nobody = canon(*db, "knowledge", "--story", STORY, "--character", "nobody", "--format", "json")
    assert nobody.returncode == 1 and json.loads(nobody.stdout)["error"]["code"] == "unknown_character"
    bounds = canon(*db, "secrets", "--story", STORY, "--as-of", "0", "--format", "json")
    assert bounds.returncode == 2 and json.loads(bounds.stdout)["error"]["field"] == "as_of"
    unknown = canon(*db, "secrets", "--story", "nope")
    assert unknown.returncode == 1 and "unknown_story" in unknown.stderr
