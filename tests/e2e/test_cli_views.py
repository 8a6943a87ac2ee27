"""The read-view and key verbs of the CLI, as a person runs them."""

from __future__ import annotations

import json

from canon_ledger.infrastructure.demo import SAMPLE
from tests.cli_runner import canon


def test_views_and_keys(store_url: str) -> None:
    assert canon("--db", store_url, "apply", str(SAMPLE)).returncode == 0
    stories = json.loads(canon("--db", store_url, "stories", "--format", "json").stdout)["stories"]
    assert [s["story_id"] for s in stories] == ["lamplight"] and stories[0]["chapters"] == 5
    early = json.loads(canon("--db", store_url, "canon", "--story", "lamplight", "--as-of", "1", "--format",
                             "json").stdout)["entries"]
    late = json.loads(canon("--db", store_url, "canon", "--story", "lamplight", "--format", "json").stdout)["entries"]
    assert {e["key"] for e in early} <= {e["key"] for e in late} and all(e["valid_from"] <= 1 for e in early)
    chapter = json.loads(canon("--db", store_url, "chapter", "--story", "lamplight", "5", "--format", "json").stdout)
    assert chapter["chapter"] == 5 and chapter["scenes"] and not chapter["text_accepted"]
    pending = json.loads(canon("--db", store_url, "proposals", "--story", "lamplight", "--status", "proposed",
                               "--format", "json").stdout)["proposals"]
    assert [p["status"] for p in pending] == ["proposed"] * len(pending) and pending
    rejected = json.loads(canon("--db", store_url, "drafts", "--story", "lamplight", "--status", "rejected",
                                "--format", "json").stdout)["drafts"]
    assert [d["draft_id"] for d in rejected] == ["d2-first"] and rejected[0]["reason"]
    missing = canon("--db", store_url, "chapter", "--story", "lamplight", "99", "--format", "json")
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["code"] == "unknown_chapter"
    unknown = canon("--db", store_url, "canon", "--story", "nope")
    assert unknown.returncode == 1 and "unknown_story" in unknown.stderr

    made = canon("--db", store_url, "key", "create", "--scope", "worker", "--story", "lamplight", "--name", "w1")
    token = made.stdout.strip()
    assert made.returncode == 0 and token.startswith("cl_") and "shown once" in made.stderr
    again = canon("--db", store_url, "key", "create", "--scope", "worker", "--name", "w1")
    assert again.returncode == 1 and "key_name_must_be_unique" in again.stderr
    listed = canon("--db", store_url, "key", "list", "--format", "json").stdout
    assert json.loads(listed.splitlines()[0]) == {"name": "w1", "scope": "worker", "stories": ["lamplight"],
                                                  "revoked": False, "issued_at_position": json.loads(
                                                      listed.splitlines()[0])["issued_at_position"],
                                                  "minted_open": False}
    assert token not in listed
    assert canon("--db", store_url, "key", "revoke", "w1").returncode == 0
    assert json.loads(canon("--db", store_url, "key", "list", "--format", "json").stdout)["revoked"] is True
    assert canon("--db", store_url, "key", "revoke", "nobody").returncode == 1
    events = canon("--db", store_url, "events", "--format", "json").stdout
    assert token not in events
