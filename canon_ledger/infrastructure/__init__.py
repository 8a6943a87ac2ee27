"""Adapters and doors: the event stores and the read store (SQLite, PostgreSQL), the one
composition root (``bootstrap``; ``services``: what it wires), LLM and embedding providers, the
tokenizer, the live projection worker, and the doors users and agents come in by: the CLI
(``cli``), the HTTP API (``http``), the web viewer (``web``) and MCP (``mcp``)."""
