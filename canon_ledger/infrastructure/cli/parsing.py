"""The CLI's argument parsing, shared by every module of verbs: the parser class (a usage error
is raised, so ``main`` can answer it as JSON too), ``add_verb`` (every verb has a one-line
summary, shown in ``canon --help``, and a description, shown in ``canon VERB --help``) and
``bounded`` (an integer option with its range)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any


class UsageError(Exception):
    """The command line could not be read: exit 2, with argparse's usage line on stderr."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage

    @property
    def field(self) -> str | None:
        """The option argparse names ("argument --role: invalid choice ..." -> "role"), if any."""
        head, colon, _ = str(self).partition(":")
        if not colon or not head.startswith("argument "):
            return None
        return head[len("argument "):].split("/")[-1].strip().lstrip("-").replace("-", "_") or None


class CanonArgumentParser(argparse.ArgumentParser):
    """argparse's parser, except that a usage error raises ``UsageError`` instead of exiting,
    and a mistyped verb or choice is told the closest one (``did you mean 'packet'?``)."""

    def error(self, message: str) -> Any:  # argparse's hook: never returns
        raise UsageError(with_guess(message), self.format_usage())


_INVALID_CHOICE = re.compile(r"invalid choice: (?P<word>'(?:[^'\\]|\\.)*'|\S+) \(choose from (?P<choices>.*)\)",
                             re.S)


def with_guess(message: str) -> str:
    """argparse's "invalid choice: 'pakcet' (choose from ...)" with the choice it was probably
    meant to be after the word (``difflib``, as for a command ``type``); other messages as they are."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return message
    word = found["word"].strip("'")
    choices = re.findall(r"'([^']*)'", found["choices"]) or [c.strip() for c in found["choices"].split(",")]
    from canon_ledger.domain.commands import did_you_mean  # the command models load only for a mistyped word

    hint = did_you_mean(word, choices)
    return message[:found.end("word")] + hint + message[found.end("word"):] if hint else message


def add_verb(verbs: Any, name: str, common: argparse.ArgumentParser, summary: str,
             description: str | None = None) -> argparse.ArgumentParser:
    """A verb's parser: ``summary`` in the list of verbs, ``description`` (default: the summary)
    at the top of its own help."""
    return verbs.add_parser(name, parents=[common], help=summary, description=description or summary[0].upper()
                            + summary[1:] + ".", formatter_class=argparse.RawDescriptionHelpFormatter)


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in low..high, or a usage error naming the range."""

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-")
        if not digits.isdigit():
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number")
        # A number of more than 20 digits is out of any range here; it is never converted.
        if len(digits) > 20 or not low <= int(text) <= high:
            shown = text.strip() if len(digits) <= 20 else f"{text.strip()[:20]}... ({len(digits)} digits)"
            raise argparse.ArgumentTypeError(f"{shown} is outside {low:,}..{high:,}")
        return int(text)

    parse.__name__ = "number"
    return parse


def an_id(most: int) -> Callable[[str], str]:
    """An argparse type: a non-empty id of at most ``most`` characters, or a usage error."""

    def parse(text: str) -> str:
        if not 0 < len(text) <= most:
            raise argparse.ArgumentTypeError(f"an id must be 1..{most} characters, got {len(text):,}")
        return text

    parse.__name__ = "id"
    return parse


def wants_json(argv: list[str]) -> bool:
    """Does this command line ask for ``--format json`` (read before parsing, for a usage error)?"""
    return any(a == "--format=json" or (a == "--format" and i + 1 < len(argv) and argv[i + 1] == "json")
               for i, a in enumerate(argv))
