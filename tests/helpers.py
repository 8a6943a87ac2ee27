"""The helpers tests share, one copy each (issue 39): the demo story's commands, commands
applied as JSON (``applied``), a stage of a search or packet, and the hypothesis example counts
of the active profile. Fixtures built
on them (``demo``, ``gemini``, the stores) live in ``tests/conftest.py``; the committed
event-log fixtures are loaded by ``tests/fixture_log.py``."""

from __future__ import annotations

import json
import os
from typing import Any

from canon_ledger.domain.commands import Command, parse_command, parse_line
from canon_ledger.infrastructure.demo import SAMPLE, STORY, sample_commands

__all__ = ["STORY", "applied", "apply_demo", "demo_commands", "demo_json", "examples", "hypothesis_profile", "stage_of"]


def demo_commands() -> list[Command]:
    """The demo story's commands (``canon demo``'s sample story), parsed, in order."""
    return [parse_line(line) for line in sample_commands()]


def demo_json() -> list[dict[str, Any]]:
    """The demo story's commands as JSON objects: a request body for ``POST /v1/commands``."""
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def apply_demo(target: Any) -> list[Any]:
    """Apply the demo story to ``target`` (services, or a ledger) as ``canon demo`` does; every
    command must be applied (the store held none of it). Its results."""
    ledger = getattr(target, "ledger", target)
    results = ledger.apply(demo_commands())
    assert results and all(r.status == "applied" for r in results), [r.as_dict() for r in results if not r.ok]
    return list(results)


def stage_of(result: Any, step: str) -> Any:
    """The stage named ``step`` of a search result or a packet (anything with ``stages``)."""
    return next(s for s in result.stages if s.step == step)


# -- hypothesis ---------------------------------------------------------------------------------
# The profile is chosen by CANON_HYPOTHESIS (``quick``, the default, or ``deep``) and registered
# and loaded in tests/conftest.py. The older switches of a deep run are read as ``deep`` too.
# What ./scripts/demo prints: the demo's writer packet of chapter 5, as the current compiler
# builds it (compiler 7). A change here is a change of packet bytes: say why in the commit.
DEMO_PACKET = "pkt_31870d67afe183b230d388b3"
PROFILE_ENV = "CANON_HYPOTHESIS"
PROFILES = ("quick", "deep")


def hypothesis_profile(env: dict[str, str] | None = None) -> str:
    """The active hypothesis profile: ``CANON_HYPOTHESIS`` (quick or deep); HYPOTHESIS_PROFILE=long
    and CANON_FUZZ=long (the switches before it) also choose ``deep``."""
    env = dict(os.environ) if env is None else env
    chosen = env.get(PROFILE_ENV, "").strip().lower()
    if chosen:
        if chosen not in PROFILES:
            raise ValueError(f"{PROFILE_ENV}={chosen!r}: choose one of {', '.join(PROFILES)}")
        return chosen
    if "long" in (env.get("HYPOTHESIS_PROFILE"), env.get("CANON_FUZZ")):
        return "deep"
    return "quick"


def examples(quick: int, deep: int) -> int:
    """A property's example count under the active profile: ``quick`` by default (the suite's
    run), ``deep`` with CANON_HYPOTHESIS=deep (at least the count the property ran before)."""
    assert 0 < quick <= deep
    return deep if hypothesis_profile() == "deep" else quick


def applied(services: Any, *commands: dict[str, Any]) -> int:
    """Apply ``commands`` (dicts, as a client sends them) one by one; every one must be ok. The
    log's end after them."""
    results = services.ledger.apply([parse_command(c) for c in commands])
    assert all(r.ok for r in results), [r.as_dict() for r in results if not r.ok]
    return int(services.ledger.event_log.position())
