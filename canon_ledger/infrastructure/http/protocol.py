"""The HTTP/1.1 protocol ``canon serve`` runs: uvicorn's h11 protocol with a deadline for a
request's headers, and the connection bounds a server facing slow clients needs.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds, but a
client that has started a request (or only connected) may take forever over its headers, a
byte at a time: 60 such connections stay open for good (slowloris). Here a request's headers
must arrive whole within ``HEADER_TIMEOUT`` seconds of its first byte (or of the connection,
for the first request), else the connection is closed. The body's own timeouts are the door's
(``door.BODY_IDLE``, ``door.BODY_TOTAL``). Each bound can be set for a deployment from the
environment: ``CANON_HEADER_TIMEOUT``, ``CANON_KEEP_ALIVE``, ``CANON_BODY_TIMEOUT`` (seconds).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol



def seconds(name: str, default: float) -> float:
    """A duration from the environment variable ``name`` (0.1..3600 seconds), else ``default``."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0.1 <= value <= 3600 else default


HEADER_TIMEOUT = seconds("CANON_HEADER_TIMEOUT", 10.0)  # seconds a request's headers may take, from its first byte
KEEP_ALIVE = seconds("CANON_KEEP_ALIVE", 5.0)  # seconds an idle keep-alive connection is kept
MAX_CONNECTIONS = 1000  # open connections and running requests; past them new requests get 503


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol whose requests' headers have a deadline."""

    header_timeout = HEADER_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            self._arm()  # the first byte of a request starts its deadline; later bytes don't move it
        super().data_received(data)
        if not self._waiting_for_headers():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle again: the keep-alive timeout rules until the next byte

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _arm(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if self._waiting_for_headers():
            self.transport.close()


def uvicorn_settings() -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments of these bounds."""
    return {"http": TimedH11Protocol, "timeout_keep_alive": KEEP_ALIVE, "limit_concurrency": MAX_CONNECTIONS,
            "h11_max_incomplete_event_size": 256 * 1024}  # a long query's URL fits (16 KiB by default)
