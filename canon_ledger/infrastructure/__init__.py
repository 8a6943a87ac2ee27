"""Adapters and doors: the event stores and the read store (SQLite, PostgreSQL), the one
composition root (``bootstrap``), LLM and embedding providers, the tokenizer, the live
projection worker, and the doors users and agents come in by: the CLI, the HTTP API, the web
viewer and MCP."""
