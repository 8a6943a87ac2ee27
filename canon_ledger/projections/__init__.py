"""Read models built from events, and their queries: each projection turns events into table
operations without I/O (``runner`` applies them with its tracking row), each view answers an
application port from its tables (``canon_view``, ``retrieval_view``, ``knowledge_view``,
``story_views``). Packets read only these, never the log."""
