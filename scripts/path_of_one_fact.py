#!/usr/bin/env python3
"""The path of one fact, counted: the package's files entered while one ``confirm_canon`` is
applied and one writer packet that carries the confirmed entry is compiled, through each door
(HTTP and the CLI), and every call that climbs back to a layer the call stack already left.

    .venv/bin/python scripts/path_of_one_fact.py [--door http|cli|both] [--format text|json]

What is counted: a file of ``canon_ledger/`` whose code runs during the two steps (the
command and the packet), after a warm-up of the same steps on another story, so imports and
first-use set-up are not counted; a door's own set-up (the app, the parser) is. The layer of a
file is its folder under ``canon_ledger/`` (``domain``, ``application``, ``projections``,
``infrastructure``). A climb back is a call whose stack, read from the door down with each run
of one layer folded into one, names a layer twice: e.g. application -> projections ->
application. Two kinds of frames are not climbs: a generator resumed by the code that iterates
it (data pulled, not a call), and a function a library calls back (SQLAlchemy's engine events,
which the composition root registers): those are listed apart as library hooks.
docs/architecture.md ("The path of one fact") quotes the counts.
"""

from __future__ import annotations

import argparse
import inspect
import io
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PACKAGE = str(ROOT / "canon_ledger") + os.sep
_GENERATOR = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def _layer(filename: str) -> str | None:
    if not filename.startswith(PACKAGE):
        return None
    rest = filename[len(PACKAGE):]
    return rest.split(os.sep, 1)[0] if os.sep in rest else "canon_ledger"


class Trace:
    """Files entered, in order of first entry, and the climbs back seen, by (caller, callee)."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}  # file -> layer, in order of first entry
        self.climbs: dict[tuple[str, str], list[str]] = {}  # (caller file, callee file) -> the folded stack
        # The same, where a library called the callee (an engine's event hook, a pool's check):
        # the code on the path asked the library, not the layer; listed apart.
        self.hooks: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        layer = _layer(filename)
        if layer is None:
            return
        stack: list[tuple[str, str]] = []  # (layer, file), the door first
        f: FrameType | None = frame
        while f is not None:
            name = f.f_code.co_filename
            lay = _layer(name)
            if lay is not None:
                stack.append((lay, name))
            f = f.f_back
        stack.reverse()
        folded = [lay for i, (lay, _) in enumerate(stack) if i == 0 or stack[i - 1][0] != lay]
        with self._lock:
            self.files.setdefault(filename, layer)
            if frame.f_code.co_flags & _GENERATOR:
                return  # a generator resumed by the code that iterates it: data pulled, not a call
            if len(folded) != len(set(folded)) and len(stack) >= 2 and stack[-2][0] != layer:
                caller = frame.f_back
                by_library = caller is not None and _layer(caller.f_code.co_filename) is None
                (self.hooks if by_library else self.climbs).setdefault((stack[-2][1], filename), folded)

    @contextmanager
    def on(self) -> Iterator[Trace]:
        threading.setprofile(self)
        sys.setprofile(self)
        try:
            yield self
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]

    def report(self) -> dict[str, Any]:
        def short(path: str) -> str:
            return path[len(PACKAGE):]
        return {"files": len(self.files), "entered": [short(f) for f in self.files],
                "climbs_back": [{"from": short(a), "to": short(b), "layers": " -> ".join(folded)}
                                for (a, b), folded in self.climbs.items()],
                "library_hooks": [{"from": short(a), "to": short(b), "layers": " -> ".join(folded)}
                                  for (a, b), folded in self.hooks.items()]}


def _story(story: str) -> list[dict[str, Any]]:
    return [{"type": "start_story", "command_id": f"{story}-start", "story_id": story, "title": story.title(),
             "style_guardrails": [], "output_contract": ""},
            {"type": "plan_chapter", "command_id": f"{story}-plan", "story_id": story, "chapter": 1, "volume": 1,
             "goals": ["Ilse crosses the river"]},
            {"type": "add_scene_card", "command_id": f"{story}-card", "story_id": story, "chapter": 1,
             "scene_id": "1a", "summary": "Ilse at the ford.", "characters": [], "locations": [], "threads": [],
             "callbacks": [], "items": []},
            {"type": "propose_canon", "command_id": f"{story}-prop", "story_id": story, "proposal_id": "p-ilse",
             "kind": "character", "key": "ilse", "name": "Ilse", "aliases": [], "text": "Ilse is a ferrywoman.",
             "fields": {}, "valid_from": 1}]


def _confirm(story: str) -> dict[str, Any]:
    return {"type": "confirm_canon", "command_id": f"{story}-confirm", "story_id": story, "proposal_id": "p-ilse"}


def _check(packet: dict[str, Any]) -> None:
    if not any(i["key"] == "ilse" and i["status"] == "included" for i in packet["items"]):
        raise SystemExit("the packet does not carry the confirmed entry: the trace followed nothing")


def http_door(url: str) -> Trace:
    """The app's requests run in this thread's event loop (httpx's ASGI transport) and in
    threads that loop starts, so the profile sees them; the app's lifespan runs in the test
    client's thread first."""
    import asyncio

    import httpx
    from fastapi.testclient import TestClient

    from canon_ledger.infrastructure.http.app import create_app

    app = create_app(url, embedder="hashing")
    with TestClient(app) as client:
        token = client.app.state.ctx.keys.create("author", [], None)[0]  # type: ignore[attr-defined]
        auth = {"Authorization": f"Bearer {token}"}
        for story in ("warm", "fact"):
            setup = client.post("/v1/commands", json=_story(story), headers=auth)
            assert setup.status_code == 200, setup.text

        async def steps(story: str) -> None:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://door") as door:
                answer = await door.post("/v1/commands", json=[_confirm(story)], headers=auth)
                assert answer.status_code == 200, answer.text
                answer = await door.get(f"/v1/stories/{story}/packet", params={"role": "writer", "chapter": 1},
                                        headers=auth)
                assert answer.status_code == 200, answer.text
                _check(answer.json())

        asyncio.run(steps("warm"))
        trace = Trace()
        with trace.on():
            asyncio.run(steps("fact"))
        return trace


def cli_door(url: str) -> Trace:
    from canon_ledger.infrastructure import cli

    def run(argv: list[str], stdin: str = "") -> str:
        out = io.StringIO()
        old = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
        try:
            with redirect_stdout(out):
                code = cli.main(["--db", url, *argv])
        finally:
            sys.stdin = old
        if code != 0:
            raise SystemExit(f"canon {' '.join(argv)} exited {code}: {out.getvalue()}")
        return out.getvalue()

    def steps(story: str) -> None:
        run(["apply", "-"], json.dumps(_confirm(story)) + "\n")
        _check(json.loads(run(["packet", "--story", story, "--role", "writer", "--chapter", "1", "--format",
                               "json"])))

    run(["init"])
    for story in ("warm", "fact"):
        run(["apply", "-"], "".join(json.dumps(c) + "\n" for c in _story(story)))
    steps("warm")
    trace = Trace()
    with trace.on():
        steps("fact")
    return trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--door", choices=("http", "cli", "both"), default="both")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    os.environ.setdefault("CANON_EMBEDDER", "hashing")
    out: dict[str, Any] = {}
    for door, run in (("http", http_door), ("cli", cli_door)):
        if args.door not in (door, "both"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out[door] = run(f"sqlite:///{tmp}/fact.db").report()
    if args.format == "json":
        print(json.dumps(out, indent=2))
        return 0
    for door, report in out.items():
        print(f"{door}: {report['files']} files entered, {len(report['climbs_back'])} calls climbing back, "
              f"{len(report['library_hooks'])} hooks a library calls")
        for name in report["entered"]:
            print(f"  {name}")
        for climb in report["climbs_back"]:
            print(f"  climb back: {climb['from']} -> {climb['to']} ({climb['layers']})")
        for hook in report["library_hooks"]:
            print(f"  library hook: {hook['from']} -> {hook['to']} ({hook['layers']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
