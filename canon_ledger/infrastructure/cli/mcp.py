"""``canon mcp``: the MCP server over stdio, for an agent that launches it as a subprocess.

The process opens the store like ``canon serve`` does (a ``ServerContext``, with its
projection worker unless ``--no-worker``) and answers on stdin/stdout; logs and progress go
to stderr, never into the protocol. The caller is an author-scoped local principal (who can
run this process can open the store anyway), or, with ``$CANON_MCP_KEY``, the key that token
names, checked again at every call (a revoked key's session is refused from then on): its
scope and stories then bound every tool, as over HTTP. The token is read from
the environment, not an option, so that it never shows in a process listing.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from canon_ledger.infrastructure.cli.parsing import add_verb
from canon_ledger.domain.api_key import Principal

KEY_ENV = "CANON_MCP_KEY"
LOCAL = Principal("local-stdio", "author")


def cmd_mcp(args: argparse.Namespace) -> int:
    from canon_ledger.infrastructure.cli.errors import USAGE, Failure
    from canon_ledger.infrastructure.http.context import ServerContext
    from canon_ledger.infrastructure.http.problems import Problem
    from canon_ledger.infrastructure.mcp.server import build_server
    from canon_ledger.infrastructure.mcp.tools import AgentTools

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="canon mcp: %(levelname)s %(message)s")
    context = ServerContext(args.db, worker=args.worker)
    try:
        principal: Principal | Callable[[], Principal] = LOCAL
        token = (os.environ.get(KEY_ENV) or "").strip()
        if token:
            if len(token) > 200 or context.keys.check(token) is None:
                raise Failure(USAGE, f"${KEY_ENV} names no valid key (unknown or revoked)", "invalid_key")

            def principal() -> Principal:
                """The key, checked again at every call (``Keys.check``: a revocation made
                anywhere reaches this session within its ``CHECK_TTL``)."""
                found = context.keys.check(token)
                if found is None:
                    raise Problem(401, "invalid_key", f"the key in ${KEY_ENV} is unknown or revoked")
                return found

        tools = AgentTools(context)
        build_server(lambda: tools, local=principal).run("stdio")
    finally:
        context.close()
    return 0


def add_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    p = add_verb(verbs, "mcp", common,
                 "serve the MCP server over stdio (tools: get_packet, search, canon_entry, list_canon, "
                 "open_threads, propose_canon, audit_packet); over HTTP it is /mcp in canon serve",
                 f"An MCP server on stdin/stdout for LLM agents. Agents read packets, search "
                 f"and canon, and may propose canon; only a person confirms it. The caller is a "
                 f"local author, or the API key whose token is in ${KEY_ENV}.")
    p.add_argument("--worker", action=argparse.BooleanOptionalAction, default=True,
                   help="run a projection worker in this process (default), so that search and packets never wait "
                        "on the slow models; --no-worker leaves them to `canon worker` processes")
    p.set_defaults(run=cmd_mcp)
