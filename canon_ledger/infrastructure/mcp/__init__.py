"""The MCP door for LLM agents: packets, search, canon and threads to read; canon to propose,
never to confirm. ``tools`` holds what an agent may do, ``server`` the MCP definitions and
their errors, ``http`` the ``/mcp`` door of ``canon serve``; ``canon mcp`` serves stdio."""
