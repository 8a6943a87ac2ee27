"""What ``/openapi.json`` declares for routes that answer bytes they build themselves (a raw
``Response``), so that generated clients get typed answers. Nothing here touches the bytes."""

from __future__ import annotations

from typing import Any

from canon_ledger.application.packets.schema import Packet

_PACKET_HEADERS: dict[str, Any] = {
    "ETag": {"description": "the packet hash, quoted: send it back as `If-None-Match`", "schema": {"type": "string"}},
    "X-Canon-Packet-Id": {"description": "the packet's `packet_id`", "schema": {"type": "string"}},
    "X-Canon-Position": {"description": "the packet's `position`", "schema": {"type": "integer"}},
    "X-Canon-Recorded": {"description": "`true` if the log holds the packet's record (recorded now or before), "
                                        "`false` if not (a worker key past its recording budget); absent with "
                                        "`at` or `record=false`", "schema": {"type": "string", "enum": ["true", "false"]}},
}

# ``GET /v1/stories/{story}/packet``: the packet (``Packet.to_json``'s bytes), or 304.
PACKET_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": Packet, "description": "The packet: the bytes `canon packet --format json` prints",
          "headers": _PACKET_HEADERS},
    304: {"description": "Not Modified: `If-None-Match` named this packet's ETag (no body)",
          "headers": _PACKET_HEADERS},
}
