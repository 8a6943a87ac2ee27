"""The earlier packet compilers, 1 to 7, frozen: so the packets each issued replay to the same
bytes (``replay.compile_packet``, the one module that imports them).

Compiler 1's module spells out the recipes it issued packets with, read by read; each later
version's module states its recipes as the version before it's plus what it changed (``edits``),
and how it compiled them. Nothing here is derived from the current recipes (``recipes``) or from
a newer version's, so a change to those cannot change these (a version reads only older ones);
tests/unit/test_recipes.py pins every version's recipes field by field. The reads share the
current sources (``sources``, and ``reads`` for those only earlier compilers read) and compiler
steps (``compiler.compile_with``), which take what each version did differently as data: the
flags of its ``Read`` s and the version ``compile_with`` is given.
"""
