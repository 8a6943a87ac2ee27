"""docs/first-story.md runs as written (issue 21): its commands, through the installed `canon`.

Every ```` ```jsonl file=NAME ```` block is saved as NAME, every ```` ```sh ```` block is run by
bash (``set -euo pipefail``) in one scratch folder, in document order, with the installed
``canon`` first on ``PATH`` and no ``CANON_DATABASE_URL`` (so the doc's default store, the
embedded ``canon.db`` of that folder, is the one used). Each ```` ```text ```` block must be
output of the sh block before it. Then the chapter-5 packets are checked against what the
doc's own commands say: every tagged entry packed as of chapter 5, nothing hidden or drafted in
any packet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import cli_runner

DOC = Path(__file__).resolve().parents[2] / "docs" / "first-story.md"
CANON = Path(sys.executable).parent / "canon"  # the console script the package installs
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.S | re.M)
APPLIED = re.compile(r"^line (\d+): (\w+) (\w+) (\S+)", re.M)


@dataclass
class Block:
    lang: str
    info: str
    body: str


@dataclass
class Run:
    folder: Path
    files: dict[str, list[dict]] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)  # stdout of each sh block, in order

    @property
    def commands(self) -> list[dict]:
        return [c for lines in self.files.values() for c in lines]

    def canon(self, *args: str) -> subprocess.CompletedProcess:
        """``canon ARGS`` in the doc's folder, in-process (the doc's own blocks ran the installed
        console script; these only read what they made)."""
        return cli_runner.canon(*args, cwd=self.folder, env={"CANON_EMBEDDER": _env()["CANON_EMBEDDER"]})

    def packet(self, role: str, chapter: int) -> tuple[str, dict]:
        done = self.canon("packet", "--story", STORY, "--role", role, "--chapter", str(chapter), "--format", "json")
        assert done.returncode == 0, done.stderr
        return done.stdout, json.loads(done.stdout)


STORY = "tidelib"


def blocks(text: str) -> list[Block]:
    return [Block(lang, info.strip(), body) for lang, info, body in BLOCK.findall(text)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CANON_DATABASE_URL"}
    env["PATH"] = f"{CANON.parent}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env.setdefault("CANON_EMBEDDER", "hashing")  # L1 needs vectors, not a model: keeps the run small
    return env


def _masked(line: str) -> str:
    """A line with what a log position or packet id may shift masked, and spaces collapsed."""
    line = re.sub(r"pkt_[0-9a-f]+", "pkt_*", line)
    line = re.sub(r"\b[0-9a-f]{64}\b", "HASH", line)
    line = re.sub(r"@ \d+", "@ N", line)
    line = re.sub(r"events [\d, ]+\)", "events N)", line)
    line = re.sub(r"position \d+", "position N", line)
    line = re.sub(r"^<- \d+ ", "<- N ", line.strip())
    return " ".join(line.split())


def run_doc(text: str, folder: Path) -> Run:
    """Follow the walk-through in ``folder``; fails at the first command that does not work."""
    assert CANON.exists(), f"the installed canon console script is missing: {CANON}"
    run = Run(folder)
    for block in blocks(text):
        if block.lang == "jsonl":
            name = re.fullmatch(r"file=(\S+)", block.info)
            assert name, f"a jsonl block must say file=NAME: {block.info!r}"
            lines = [json.loads(line) for line in block.body.splitlines() if line.strip()]
            assert lines, f"{name[1]} is empty"
            assert name[1] not in run.files, f"{name[1]} is written twice"
            run.files[name[1]] = lines
            (folder / name[1]).write_text(block.body, encoding="utf-8")
        elif block.lang == "sh":
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=folder, env=_env(),
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"this block failed ({done.returncode}):\n{block.body}\n{done.stderr}"
            run.outputs.append(done.stdout)
        elif block.lang == "text":
            assert run.outputs, "a text block before any sh block"
            printed = {_masked(line) for line in run.outputs[-1].splitlines()}
            for line in block.body.splitlines():
                if line.strip() and line.strip() != "...":
                    assert _masked(line) in printed, f"the doc shows a line the commands do not print: {line!r}"
    return run


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_doc(DOC.read_text(encoding="utf-8"), tmp_path_factory.mktemp("first-story"))


def test_every_command_of_the_doc_is_applied(walked: Run) -> None:
    commands = walked.commands
    ids = [c["command_id"] for c in commands]
    assert len(ids) == len(set(ids)), "command ids repeat"
    answers = [m for out in walked.outputs for m in APPLIED.findall(out)]
    assert {status for _, status, _, _ in answers} == {"applied"}, answers
    assert sorted(cid for *_, cid in answers) == sorted(ids), "some command of the doc was never applied"
    applied_types = {t for _, _, t, _ in answers}
    assert {"start_story", "plan_chapter", "add_scene_card", "propose_canon", "confirm_canon", "submit_draft",
            "accept_draft", "record_chapter_summary"} <= applied_types
    assert (walked.folder / "canon.db").exists()  # the default store: embedded SQLite in the folder
    schema = json.loads((walked.folder / "schema.json").read_text())
    assert "start_story" in schema["discriminator"]["mapping"]


def _confirmed(run: Run) -> list[dict]:
    """The doc's confirmed proposals, in log order."""
    confirmed = {c["proposal_id"] for c in run.commands if c["type"] == "confirm_canon"}
    return [c for c in run.commands if c["type"] == "propose_canon" and c["proposal_id"] in confirmed]


def _in_force(run: Run, chapter: int) -> dict[tuple[str, str], dict]:
    versions: dict[tuple[str, str], dict] = {}
    for p in _confirmed(run):
        key = (p["kind"], p["key"])
        if p["valid_from"] <= chapter and (key not in versions or p["valid_from"] >= versions[key]["valid_from"]):
            versions[key] = p
    return versions


def _hidden(p: dict, chapter: int) -> bool:
    until = p["fields"].get("hidden_until")
    return until is not None and until > chapter


def _unseen_texts(run: Run, chapter: int) -> list[str]:
    """Texts no chapter-``chapter`` packet may hold: hidden canon, drafts never accepted."""
    accepted = {c["draft_id"] for c in run.commands if c["type"] == "accept_draft"}
    drafts = [c["text"] for c in run.commands if c["type"] == "submit_draft" and c["draft_id"] not in accepted]
    hidden = [p["text"] for p in _confirmed(run) if _hidden(p, chapter)]
    return drafts + hidden


@pytest.mark.parametrize("role", ["writer", "qa"])
def test_the_chapter_5_packet_holds_the_confirmed_canon_the_doc_says(walked: Run, role: str) -> None:
    raw, packet = walked.packet(role, 5)
    assert packet["role"] == role and packet["chapter"] == 5 and packet["packet_id"].startswith("pkt_")
    start = next(c for c in walked.commands if c["type"] == "start_story")
    assert packet["budget"] == start["budgets"][role]
    items = {(i["kind"], i["key"]): i for i in packet["items"] if i["tier"] == "P1"}
    in_force = _in_force(walked, 5)

    # Every key chapter 5's scene cards tag is packed in P1 as its chapter-5 version.
    cards = [c for c in walked.commands if c["type"] == "add_scene_card" and c["chapter"] == 5]
    tagged = {key for card in cards for tags in ("characters", "locations", "threads", "callbacks", "items")
              for key in card[tags]}
    assert tagged
    for (kind, key), version in in_force.items():
        if key not in tagged:
            continue
        item = items[(kind, key)]
        assert item["status"] == "included", item
        assert version["text"] in item["text"] and f"from chapter {version['valid_from']}" in item["text"]

    # The doc's named facts: Wren's chapter-5 version, her earlier state, the rule confirmed in chapter 1.
    assert "from chapter 5" in items[("character", "wren")]["text"]
    assert "Drowned Atlas under her bed" in items[("character", "wren")]["text"]
    assert items[("world_rule", "tide-erases-ink")]["status"] == "included"
    history = [i for i in packet["items"] if i["kind"] == "history"]
    assert [(i["key"], i["status"]) for i in history] == [("wren@1", "included")]
    summaries = sorted(int(i["key"]) for i in packet["items"] if i["kind"] == "chapter_summary")
    assert summaries == [2, 3, 4]

    # A thread resolved as of chapter 5 is no active thread; one hidden is listed without its text.
    for (kind, key), version in in_force.items():
        if kind == "thread" and version["fields"].get("state", "").lower() == "resolved" and key not in tagged:
            assert not [i for i in packet["items"] if (i["kind"], i["key"]) == (kind, key)]
        if _hidden(version, 5):
            [item] = [i for i in packet["items"] if (i["kind"], i["key"]) == (kind, key)]
            assert item["status"] == "dropped" and item["text"] == "" and item["tokens"] == 0
            assert item["reason"].startswith(f"hidden until chapter {version['fields']['hidden_until']}")
    assert any(_hidden(v, 5) for v in in_force.values()), "the doc hides nothing: the check above is vacuous"
    assert ("thread", "lost-atlas") not in items

    # Nothing hidden, and no draft that was never accepted, anywhere in the packet's bytes.
    unseen = _unseen_texts(walked, 5)
    assert len(unseen) >= 2  # the Keeper's secret and the draft under review
    for text in unseen:
        assert text not in raw
    assert "father" not in raw
    assert not [i for i in packet["items"] if i["kind"] in ("chapter_text", "draft")]


def test_the_qa_packet_is_the_writer_recipe_without_the_draft_under_review(walked: Run) -> None:
    _, writer = walked.packet("writer", 5)
    _, qa = walked.packet("qa", 5)
    assert [(i["tier"], i["kind"], i["key"], i["status"]) for i in qa["items"]] == \
           [(i["tier"], i["kind"], i["key"], i["status"]) for i in writer["items"]]
    assert qa["position"] == writer["position"]  # submitting the draft did not move canon
    drafts = json.loads(walked.canon("drafts", "--story", STORY, "--format", "json").stdout)["drafts"]
    [review] = [d for d in drafts if d["status"] == "submitted"]
    assert review["chapter"] == 5 and review["text"] not in json.dumps(qa)


def test_the_packet_audits(walked: Run) -> None:
    _, packet = walked.packet("writer", 5)
    audit = walked.canon("audit", packet["packet_id"], "--format", "json")
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_a_doc_with_a_wrong_command_fails(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    broken = text.replace('"threads": ["lost-atlas"]', '"threads": ["lost-atlass"]', 1)
    assert broken != text
    with pytest.raises(AssertionError, match="this block failed"):
        run_doc(broken, tmp_path)


def test_a_doc_showing_output_the_commands_do_not_print_fails(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    broken = text.replace("line 1: applied start_story tl-001", "line 1: duplicate start_story tl-001", 1)
    assert broken != text
    cut = broken.index("## 3.")  # no need to walk further than the wrong line
    with pytest.raises(AssertionError, match="the doc shows a line"):
        run_doc(broken[:cut], tmp_path)
