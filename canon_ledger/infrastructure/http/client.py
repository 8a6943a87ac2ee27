"""A thin HTTP client of ``canon serve`` (httpx, keep-alive), speaking the same JSON as the
CLI. Errors raise ``ApiError`` with the server's problem+json ``code``, ``field`` and body."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {body.get('code')}: {body.get('detail')}")
        self.status = status
        self.code = body.get("code")
        self.field = body.get("field")
        self.body = body


class CanonClient:
    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def _check(self, response: httpx.Response, *, ok: tuple[int, ...] = (200,)) -> httpx.Response:
        if response.status_code not in ok:
            try:
                body = response.json()
            except ValueError:
                body = {"code": "http_error", "detail": response.text[:200]}
            raise ApiError(response.status_code, body)
        return response

    def apply(self, commands: Iterable[dict[str, Any]] | dict[str, Any], *, atomic: bool = False) -> dict[str, Any]:
        """``{"results": [...], "position": N}`` whether or not something was refused (the
        results say which); other errors raise."""
        body = commands if isinstance(commands, dict) else list(commands)
        response = self.http.post("/v1/commands", params={"atomic": "true"} if atomic else None, json=body)
        if response.status_code in (409, 422) and "results" in response.json():
            return response.json()
        return self._check(response).json()

    def packet_bytes(self, story: str, role: str, chapter: int, **params: Any) -> bytes:
        query = {"role": role, "chapter": chapter, **{k: v for k, v in params.items() if v is not None}}
        return self._check(self.http.get(f"/v1/stories/{story}/packet", params=query)).content

    def packet(self, story: str, role: str, chapter: int, **params: Any) -> dict[str, Any]:
        import json

        return json.loads(self.packet_bytes(story, role, chapter, **params))

    def audit(self, packet_id: str) -> dict[str, Any]:
        return self._check(self.http.get(f"/v1/packets/{packet_id}/audit")).json()

    def wait_indexed(self, position: int, timeout: float = 120.0, interval: float = 0.05) -> dict[str, Any]:
        """Poll ``/readyz`` until every read model has projected the log up to ``position``
        (the worker indexes and embeds off the request path); its last answer."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            ready = self.get("/readyz")
            if ready["position"] >= position and all(m["behind"] == 0 for m in ready["read_models"].values()):
                return ready
            if time.monotonic() > deadline:
                raise TimeoutError(f"read models still behind after {timeout} s: {ready['read_models']}")
            time.sleep(interval)

    def get(self, path: str, **params: Any) -> Any:
        return self._check(self.http.get(path, params={k: v for k, v in params.items() if v is not None})).json()

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> CanonClient:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
