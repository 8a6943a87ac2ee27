"""The `canon` command line as a user runs it, real stores: in-process through ``cli.main``
(``tests.cli_runner``), stdin, stdout, stderr, environment and working directory its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from canon_ledger.infrastructure.demo import SAMPLE
from tests.cli_runner import canon
from tests.conftest import initialised

__all__ = ["canon"]  # older imports of ``tests.e2e.test_cli.canon`` get the one runner


def test_apply_twice_reports_all_duplicates_the_second_time(store_url: str) -> None:
    first = canon("--db", store_url, "apply", str(SAMPLE), "--format", "json")
    assert first.returncode == 0, first.stderr
    results = [json.loads(line) for line in first.stdout.splitlines()]
    assert results and all(r["status"] == "applied" and r["position"] > 0 for r in results)
    second = canon("apply", str(SAMPLE), "--db", store_url, "--format", "json")
    assert second.returncode == 0, second.stderr
    again = [json.loads(line) for line in second.stdout.splitlines()]
    assert [r["status"] for r in again] == ["duplicate"] * len(results)
    assert [r["line"] for r in again] == [r["line"] for r in results]

    events = canon("--db", store_url, "events", "--format", "json")
    assert events.returncode == 0
    logged = [json.loads(line) for line in events.stdout.splitlines()]
    assert [e["position"] for e in logged] == list(range(1, len(logged) + 1))
    assert logged[-1]["position"] == results[-1]["position"]
    story = canon("--db", store_url, "events", "--story", "lamplight", "--format", "json")
    assert len(story.stdout.splitlines()) == len(logged)
    assert canon("--db", store_url, "events", "--story", "other").stdout == ""


BAD = {
    "malformed JSON": "{not json\n",
    "unknown type": '{"type": "launch_rocket", "command_id": "x"}\n',
    "missing field": '{"type": "plan_chapter", "command_id": "x", "story_id": "lamplight", "chapter": 9}\n',
    "wrong type": '{"type": "plan_chapter", "command_id": "x", "story_id": "lamplight", "chapter": "nine", "volume": 1, "goals": []}\n',
    "unknown story": '{"type": "plan_chapter", "command_id": "x", "story_id": "ghost", "chapter": 9, "volume": 1, "goals": []}\n',
    "confirm rejected proposal": '{"type": "confirm_canon", "command_id": "x", "story_id": "lamplight", "proposal_id": "p-dragon"}\n',
    "accept rejected draft": '{"type": "accept_draft", "command_id": "x", "story_id": "lamplight", "draft_id": "d2-first"}\n',
    "duplicate chapter number": '{"type": "plan_chapter", "command_id": "x", "story_id": "lamplight", "chapter": 3, "volume": 1, "goals": []}\n',
}


@pytest.fixture
def sample_db(tmp_path: Path) -> str:
    url = initialised(f"sqlite:///{tmp_path / 'sample.db'}")
    assert canon("--db", url, "apply", str(SAMPLE)).returncode == 0
    return url


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_non_zero_with_a_structured_error_and_changes_nothing(sample_db: str, case: str) -> None:
    before = canon("--db", sample_db, "events", "--format", "json").stdout
    result = canon("--db", sample_db, "apply", "-", "--format", "json", stdin=BAD[case])
    assert result.returncode == 1
    [line] = [json.loads(x) for x in result.stdout.splitlines()]
    assert line["status"] == "rejected" and line["line"] == 1
    assert set(line["error"]) == {"code", "message", "field"} and line["error"]["code"]
    assert result.stderr.startswith("canon: ") and len(result.stderr.strip().splitlines()) == 1
    assert canon("--db", sample_db, "events", "--format", "json").stdout == before


def test_atomic_apply_is_all_or_nothing(sample_db: str) -> None:
    batch = (
        '{"type": "plan_chapter", "command_id": "n1", "story_id": "lamplight", "chapter": 6, "volume": 1, "goals": []}\n'
        "\n"
        '{"type": "plan_chapter", "command_id": "n2", "story_id": "lamplight", "chapter": 2, "volume": 1, "goals": []}\n'
    )
    before = canon("--db", sample_db, "events", "--format", "json").stdout
    result = canon("--db", sample_db, "apply", "-", "--atomic", "--format", "json", stdin=batch)
    assert result.returncode == 1
    lines = [json.loads(x) for x in result.stdout.splitlines()]
    assert [(x["line"], x["status"]) for x in lines] == [(1, "not_applied"), (3, "rejected")]
    assert canon("--db", sample_db, "events", "--format", "json").stdout == before
    fixed = batch.replace('"chapter": 2', '"chapter": 7')
    ok = canon("--db", sample_db, "apply", "-", "--atomic", "--format", "json", stdin=fixed)
    assert ok.returncode == 0, ok.stderr
    assert {json.loads(x)["status"] for x in ok.stdout.splitlines()} == {"applied"}


def test_schema_is_json_schema_for_the_command_union() -> None:
    result = canon("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert "start_story" in schema["discriminator"]["mapping"]


def test_init_and_default_database_location(tmp_path: Path) -> None:
    result = canon("init", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"db": "sqlite:///canon.db", "position": 0,
                                         "read_models": {"canon": "v9_1", "authoring": "v3_1", "knowledge": "v1_1",
                                                       "retrieval": "v1_1", "vectors": "v1_1"}}
    assert (tmp_path / "canon.db").exists()
    env_url = f"sqlite:///{tmp_path / 'from-env.db'}"
    assert canon("init", cwd=tmp_path, env={"CANON_DATABASE_URL": env_url}).returncode == 0
    assert (tmp_path / "from-env.db").exists()


def test_demo_runs_on_an_embedded_store_and_is_idempotent(tmp_path: Path) -> None:
    first = canon("demo", "--format", "json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["failed"] == [] and set(report["results"]) == {"applied"}
    second = json.loads(canon("demo", "--format", "json", cwd=tmp_path).stdout)
    assert set(second["results"]) == {"duplicate"} and second["position"] == report["position"]
    text = canon("demo", cwd=tmp_path)
    assert text.returncode == 0 and "Canon Ledger demo" in text.stdout


def test_unreadable_input_and_bad_urls_are_usage_errors(tmp_path: Path) -> None:
    initialised(f"sqlite:///{tmp_path / 'x.db'}")
    missing = canon("--db", f"sqlite:///{tmp_path / 'x.db'}", "apply", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and missing.stderr.startswith("canon: cannot read")
    bad_url = canon("--db", "mysql://u@h/db", "init")
    assert bad_url.returncode == 2 and "unsupported backend" in bad_url.stderr
    # Bytes that are not UTF-8 are that line's structured error (the same from a file or stdin).
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    result = canon("--db", f"sqlite:///{tmp_path / 'x.db'}", "--format", "json", "apply", str(binary))
    assert result.returncode == 1 and "1 of 1 commands not applied" in result.stderr
    line = json.loads(result.stdout)
    assert (line["line"], line["status"], line["error"]["code"]) == (1, "rejected", "invalid_utf8")


def test_unavailable_store_exits_3_without_leaking_the_password() -> None:
    secret = "s3cr3t-pa55word"
    result = canon("--db", f"postgresql://canon:{secret}@127.0.0.1:1/canon", "init")
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("canon: store unavailable at postgresql://canon:***@127.0.0.1:1/canon")
    assert secret not in result.stderr + result.stdout


def test_packet_audit_rebuild_and_time_travel_from_the_command_line(sample_db: str) -> None:
    packet = canon("--db", sample_db, "packet", "--story", "lamplight", "--role", "writer", "--chapter", "5",
                   "--format", "json")
    assert packet.returncode == 0, packet.stderr
    body = json.loads(packet.stdout)
    assert body["packet_id"].startswith("pkt_") and body["used_tokens"] <= body["budget"]
    text = canon("--db", sample_db, "packet", "--story", "lamplight", "--role", "writer", "--chapter", "5")
    assert "tier  included" in text.stdout and body["hash"] in text.stdout

    audit = canon("--db", sample_db, "audit", body["packet_id"], "--format", "json")
    assert audit.returncode == 0, audit.stderr
    assert json.loads(audit.stdout)["verdict"] == "ok"
    assert "lineage" in canon("--db", sample_db, "audit", body["packet_id"]).stdout

    rebuild = canon("--db", sample_db, "rebuild", "--format", "json")
    assert rebuild.returncode == 0, rebuild.stderr
    rebuilt = [json.loads(x)["projection"] for x in rebuild.stdout.splitlines()]
    assert rebuilt[:4] == ["canon", "authoring", "knowledge", "retrieval"] and rebuilt[4].startswith("vectors:")
    assert rebuild.stderr == ""  # no progress bar when not on a terminal / with --format json
    assert json.loads(canon("--db", sample_db, "audit", body["packet_id"], "--format", "json").stdout)["verdict"] == "ok"

    travelled = canon("--db", sample_db, "packet", "--story", "lamplight", "--role", "writer", "--chapter", "5",
                      "--at", str(body["position"]), "--format", "json")
    assert travelled.returncode == 0 and travelled.stdout.strip() == packet.stdout.strip()
    outside = canon("--db", sample_db, "packet", "--story", "lamplight", "--role", "writer", "--chapter", "5",
                    "--at", "999999")
    assert outside.returncode == 2 and "position_beyond_log" in outside.stderr and "beyond the log" in outside.stderr


def test_packet_errors_are_structured(sample_db: str) -> None:
    small = canon("--db", sample_db, "packet", "--story", "lamplight", "--role", "writer", "--chapter", "5",
                  "--budget", "10", "--format", "json")
    assert small.returncode == 1
    assert json.loads(small.stdout)["error"]["code"] == "p0_exceeds_budget"
    assert small.stderr.startswith("canon: p0_exceeds_budget")
    missing = canon("--db", sample_db, "audit", "pkt_missing")
    assert missing.returncode == 1 and "unknown_packet" in missing.stderr


def test_a_qa_packet_reviews_a_submitted_draft_and_refuses_a_decided_one(sample_db: str) -> None:
    args = ("--db", sample_db, "packet", "--story", "lamplight", "--role", "qa", "--chapter", "5")
    review = canon(*args, "--draft", "d5-wip", "--format", "json")
    assert review.returncode == 0, review.stderr
    body = json.loads(review.stdout)
    [item] = [i for i in body["items"] if i["kind"] == "draft_under_review"]
    assert item["tier"] == "P0" and item["key"] == "d5-wip" and "DRAFT-PENDING-MARKER" in item["text"]
    assert item["text"].startswith("UNCONFIRMED DRAFT under review")
    audit = canon("--db", sample_db, "audit", body["packet_id"], "--format", "json")
    assert audit.returncode == 0 and json.loads(audit.stdout)["verdict"] == "ok", audit.stdout
    plain = canon(*args, "--format", "json")
    assert plain.returncode == 0 and "DRAFT-PENDING-MARKER" not in plain.stdout
    for draft, role, code, status in (("d2-first", "qa", "draft_not_under_review", 1),
                                      ("d5-wip", "writer", "draft_only_for_review", 2),
                                      ("nope", "qa", "unknown_draft", 1)):
        refused = canon("--db", sample_db, "packet", "--story", "lamplight", "--role", role, "--chapter", "5",
                        "--draft", draft, "--format", "json")
        assert refused.returncode == status and json.loads(refused.stdout)["error"]["code"] == code, refused.stdout
    too_long = canon(*args, "--draft", "x" * 201, "--format", "json")
    assert too_long.returncode == 2 and json.loads(too_long.stdout)["error"]["field"] == "draft"
