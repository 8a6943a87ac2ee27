"""A series as a user runs it from the command line: a real SillyTavern lorebook imported as a
series bible (``canon import lorebook --series``), a book added to it; ``canon stories`` says
who is in which series, ``canon canon`` where each entry comes from, and the book's packet
brings in the bible's entries its goals mention (their recall rules), labelled, and audits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests import cli_runner
from tests.shared_data import LOREBOOKS

ELDORIA = LOREBOOKS / "sillytavern-world-info-eldoria.json"


def canon(db: str, *args: str, stdin: str | None = None, fmt: str = "json") -> subprocess.CompletedProcess[str]:
    return cli_runner.canon("--db", db, "--format", fmt, *args, stdin=stdin, env={"CANON_EMBEDDER": "hashing"},
                            timeout=120)


BOOK = [{"type": "start_story", "command_id": "b1", "story_id": "b1", "title": "The Wood", "style_guardrails": [],
         "output_contract": ""},
        {"type": "plan_chapter", "command_id": "p1", "story_id": "b1", "chapter": 1, "volume": 1,
         "goals": ["Lyra walks into the magical forest at dusk and hears a shadowfang."]},
        {"type": "add_book", "command_id": "join", "story_id": "b1", "series_id": "saga"}]


def test_a_lorebook_as_a_series_bible_reaches_the_books_packets(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert canon(db, "init").returncode == 0
    imported = canon(db, "import", "lorebook", str(ELDORIA), "--series", "saga", "--confirm", "--title", "Eldoria")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["story_id"] == "saga"
    applied = canon(db, "apply", "-", stdin="\n".join(json.dumps(c) for c in BOOK))
    assert applied.returncode == 0 and all(json.loads(line)["status"] == "applied" for line in applied.stdout.splitlines())

    stories = {s["story_id"]: s for s in json.loads(canon(db, "stories").stdout)["stories"]}
    assert stories["saga"]["series"] == {"series_id": "saga", "role": "bible", "ordinal": 0}
    assert stories["b1"]["series"] == {"series_id": "saga", "role": "book", "ordinal": 1}
    text = canon(db, "stories", fmt="text").stdout
    assert "bible of series saga" in text and "book 1 of series saga" in text

    entries = json.loads(canon(db, "canon", "--story", "b1", "--as-of", "1").stdout)["entries"]
    assert entries and all(e["inherited_from"]["story_id"] == "saga" for e in entries)
    own = json.loads(canon(db, "canon", "--story", "saga", "--as-of", "1").stdout)["entries"]
    assert {e["key"] for e in own} == {e["key"] for e in entries} and all(e["inherited_from"] is None for e in own)

    packet = json.loads(canon(db, "packet", "--story", "b1", "--role", "writer", "--chapter", "1").stdout)
    lore = [i for i in packet["items"] if "from the series bible" in i["reason"]]
    assert {i["key"] for i in lore} >= {"eldoria", "shadowfang"}, [(i["key"], i["reason"]) for i in packet["items"]]
    assert all('mentioned in the chapter goals' in i["reason"] for i in lore)
    audit = json.loads(canon(db, "audit", packet["packet_id"]).stdout)
    assert audit["verdict"] == "ok", audit["differences"]

    again = canon(db, "import", "lorebook", str(ELDORIA), "--series", "saga", "--confirm", "--title", "Eldoria")
    assert again.returncode == 0, again.stderr  # the series exists: the same entries again change nothing
    assert json.loads(canon(db, "packet", "--story", "b1", "--role", "writer", "--chapter", "1").stdout)[
        "packet_id"] == packet["packet_id"]
    exported = canon(db, "export", "lorebook", "--story", "saga", "--as-of", "1", "--as", "sillytavern",
                     "-o", str(tmp_path / "w.json"))
    assert exported.returncode == 0, exported.stderr
    assert len(json.loads((tmp_path / "w.json").read_text(encoding="utf-8"))["entries"]) == len(own)


SERAPHINA = LOREBOOKS / "sillytavern-card-seraphina.png"
HOLY = {"entries": {"0": {"uid": 0, "key": ["圣光"], "comment": "圣光", "content": "圣光是森林的力量。", "order": 100}}}


def test_a_real_card_and_a_chinese_lorebook_in_one_bible_reach_a_chinese_book(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    assert canon(db, "init").returncode == 0
    world = tmp_path / "holy.json"
    world.write_text(json.dumps(HOLY, ensure_ascii=False), encoding="utf-8")
    for source in (str(SERAPHINA), str(world)):
        done = canon(db, "import", "lorebook", source, "--series", "森林", "--confirm", "--title", "森林之书")
        assert done.returncode == 0, done.stderr
    book = [{"type": "start_story", "command_id": "b", "story_id": "第一卷", "title": "第一卷", "style_guardrails": [],
             "output_contract": ""},
            {"type": "plan_chapter", "command_id": "p", "story_id": "第一卷", "chapter": 1, "volume": 1,
             "goals": ["塞拉菲娜在林间空地用圣光治好了旅人。"]},
            {"type": "add_book", "command_id": "j", "story_id": "第一卷", "series_id": "森林"}]
    assert canon(db, "apply", "-", stdin="\n".join(json.dumps(c, ensure_ascii=False) for c in book)).returncode == 0
    packet = json.loads(canon(db, "packet", "--story", "第一卷", "--role", "writer", "--chapter", "1").stdout)
    holy = [i for i in packet["items"] if i["key"] == "圣光"]
    assert holy and "圣光是森林的力量。" in holy[0]["text"] and "from the series bible" in holy[0]["reason"]
    assert json.loads(canon(db, "audit", packet["packet_id"]).stdout)["verdict"] == "ok"
    entries = json.loads(canon(db, "canon", "--story", "第一卷", "--as-of", "1").stdout)["entries"]
    assert len(entries) > 1 and {e["inherited_from"]["story_id"] for e in entries} == {"森林"}
