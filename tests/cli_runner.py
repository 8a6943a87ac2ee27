"""The one way tests run the ``canon`` command line: ``canon(*args)``.

By default the verb runs IN this process, through ``canon_ledger.infrastructure.cli.main(argv)``,
as a process would see it:

- stdin, stdout and stderr are byte streams of its own (a ``TextIOWrapper`` over a ``BytesIO``,
  so ``sys.stdin.buffer`` and ``sys.stdout.buffer`` work), in the encodings a child process of
  this one gets; no stdin is an empty one;
- ``env`` is applied to ``os.environ`` for the call (a name given None is removed, and
  ``CANON_DATABASE_URL`` unless ``env`` gives it, so the test's own store never leaks in), and
  ``cwd`` is the working directory for the call; both are restored after;
- ``SystemExit`` becomes the exit status; an exception that escapes ``main`` is printed on
  stderr as a traceback, status 1, as the interpreter does; past ``timeout`` the call is
  interrupted (``subprocess.TimeoutExpired``, as ``subprocess.run`` raises);
- the root logger has no handler while it runs (logging's last resort prints a warning on
  stderr, as in a fresh process, instead of pytest's log capture taking it), and warnings
  follow a fresh interpreter's filters (``PYTHONWARNINGS`` of the verb's environment
  included) and are printed on stderr;
- afterwards every logger's handlers (those the verb added removed), the SIGTERM/SIGINT
  handlers and the warning filters are as they were. Calls are serialised: they change
  process-wide state.

``process=True`` runs a real ``python -m canon_ledger.infrastructure.cli`` instead. Keep it
for what only a process shows: the exit status of a crash or a signal, pipes closing
(``BrokenPipeError`` at the interpreter's exit), what a cold start imports, the long-running
servers (``serve``, ``worker``, ``mcp``), a kill, concurrent writers, an import made to fail
(``sitecustomize``), a lock held by another process. ``console_script()`` is the installed
``canon`` itself, for tests of the command as a user's shell runs it.

``CANON_TEST_CLI=process`` in the environment makes every call a real process: run a test
file both ways to check that in-process runs prove what processes do.

Both return a ``subprocess.CompletedProcess`` (``returncode``, ``stdout``, ``stderr``): text
by default, bytes with ``text=False``.
"""

from __future__ import annotations

import io
import locale
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

__all__ = ["CANON", "canon", "child_env", "console_script"]

CANON = [sys.executable, "-m", "canon_ledger.infrastructure.cli"]
URL_ENV = "CANON_DATABASE_URL"
MODE_ENV = "CANON_TEST_CLI"  # "process": every call a real process (to check that in-process runs tell the same)
TIMEOUT = 300

_LOCK = threading.RLock()
# The warning filters of a fresh interpreter started without -W or PYTHONWARNINGS.
_DEFAULT_FILTERS: tuple[tuple[Literal["default", "ignore"], type[Warning], str], ...] = (
    ("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""), ("ignore", ResourceWarning, ""))


def console_script() -> str:
    """The ``canon`` console script the package installs (next to this interpreter, else on
    PATH): for a test of the installed command itself, as a user's shell runs it."""
    script = Path(sys.executable).with_name("canon")
    found = str(script) if script.exists() else shutil.which("canon")
    assert found, f"the canon console script is not installed (not next to {sys.executable}, not on PATH)"
    return found


def child_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The environment the verb sees: this process's, without ``CANON_DATABASE_URL`` unless
    ``env`` gives it, with ``env`` over it (a name given None is removed)."""
    full = dict(os.environ)
    if env is None or URL_ENV not in env:
        full.pop(URL_ENV, None)
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    return full


def canon(*args: str, stdin: str | bytes | None = None, cwd: str | Path | None = None,
          env: Mapping[str, str | None] | None = None, process: bool = False, text: bool = True,
          timeout: float = TIMEOUT) -> subprocess.CompletedProcess[Any]:
    """``canon ARGS``: its exit status, stdout and stderr (see the module's docstring)."""
    argv = [str(a) for a in args]
    if process or os.environ.get(MODE_ENV) == "process":
        data = stdin.encode() if isinstance(stdin, str) and not text else stdin
        if isinstance(data, bytes) and text:
            data = data.decode()
        return subprocess.run([*CANON, *argv], input=data, capture_output=True, text=text, cwd=cwd,
                              env=child_env(env), timeout=timeout)
    return _in_process(argv, stdin, cwd, env, text, timeout)


def _in_process(argv: list[str], stdin: str | bytes | None, cwd: str | Path | None,
                env: Mapping[str, str | None] | None, text: bool, timeout: float) -> subprocess.CompletedProcess[Any]:
    from canon_ledger.infrastructure import cli

    encoding = getattr(sys.__stdout__, "encoding", None) or "utf-8"
    errors = getattr(sys.__stdout__, "errors", None) or "strict"
    raw_in = stdin.encode(encoding, errors) if isinstance(stdin, str) else (stdin or b"")
    out, err = _Kept(), _Kept()
    streams = (io.TextIOWrapper(io.BytesIO(raw_in), encoding=encoding, errors=errors),
               io.TextIOWrapper(out, encoding=encoding, errors=errors),
               io.TextIOWrapper(err, encoding=encoding, errors="backslashreplace", line_buffering=True))
    with _LOCK, _environment(env), _directory(cwd), _loggers(), _signals(timeout), \
            _warnings(os.environ.get("PYTHONWARNINGS", "")), _stdio(*streams):
        try:
            status = cli.main(argv)
        except SystemExit as e:
            status = _exit_status(e.code)
        except _TimedOut:
            raise subprocess.TimeoutExpired(["canon", *argv], timeout) from None
        except BaseException:  # noqa: BLE001 - what the interpreter prints for an uncaught exception
            sys.stderr.write(traceback.format_exc())
            status = 1
        for stream in streams[1:]:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    if text:
        return subprocess.CompletedProcess(["canon", *argv], status, _decoded(out.value()), _decoded(err.value()))
    return subprocess.CompletedProcess(["canon", *argv], status, out.value(), err.value())


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")  # sys.exit("message"): printed, status 1
    return 1


def _decoded(data: bytes) -> str:
    """As ``subprocess.run(..., text=True)`` reads a pipe: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


class _Kept(io.BytesIO):
    """A byte buffer whose bytes outlive a ``close`` (a verb may close its stdout)."""

    _closed_with = b""

    def close(self) -> None:
        if not self.closed:
            self._closed_with = self.getvalue()
        super().close()

    def value(self) -> bytes:
        return self._closed_with if self.closed else self.getvalue()


@contextmanager
def _environment(env: Mapping[str, str | None] | None) -> Iterator[None]:
    before = dict(os.environ)
    wanted = child_env(env)
    _set_environ(wanted)
    try:
        yield
    finally:
        _set_environ(before)


def _set_environ(wanted: Mapping[str, str]) -> None:
    for name in [n for n in os.environ if n not in wanted]:
        del os.environ[name]
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


@contextmanager
def _directory(cwd: str | Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    before = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _loggers() -> Iterator[None]:
    """No root handler while the verb runs (logging's last resort prints warnings on stderr, as
    in a fresh process); afterwards every logger as it was (handlers the verb added removed)."""
    manager = logging.Logger.manager
    saved = {name: (logger.handlers[:], logger.level, logger.propagate, logger.disabled)
             for name, logger in [("", logging.root), *manager.loggerDict.items()]
             if isinstance(logger, logging.Logger)}
    logging.root.handlers = []
    try:
        yield
    finally:
        for name, logger in [("", logging.root), *list(manager.loggerDict.items())]:
            if not isinstance(logger, logging.Logger):
                continue
            if name in saved:
                handlers, level, propagate, disabled = saved[name]
                logger.handlers = handlers
                logger.setLevel(level)
                logger.propagate, logger.disabled = propagate, disabled
            else:  # a logger first made by the verb (a module imported now): keep its own settings
                logger.handlers = [h for h in logger.handlers if isinstance(h, logging.NullHandler)]


class _TimedOut(BaseException):
    """The verb ran past its timeout (raised in it by SIGALRM)."""


@contextmanager
def _signals(timeout: float) -> Iterator[None]:
    """SIGTERM and SIGINT handlers as they were after the verb (``canon worker`` sets its own);
    a verb that runs past ``timeout`` is interrupted (``subprocess.TimeoutExpired``, as a
    process would be), so a verb that should have refused to serve fails instead of hanging."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}

    def timed_out(*_: object) -> None:
        raise _TimedOut

    signal.signal(signal.SIGALRM, timed_out)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in saved.items():
            if handler is not None:
                signal.signal(s, handler)


@contextmanager
def _warnings(options: str) -> Iterator[None]:
    """A fresh interpreter's warning filters, with ``PYTHONWARNINGS`` (``options``, as the verb's
    environment has it) in front, as the interpreter puts it; warnings printed on stderr."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in reversed(_DEFAULT_FILTERS):
            warnings.filterwarnings(action, category=category, module=module)
        if options:
            warnings._processoptions([o for o in options.split(",") if o])  # type: ignore[attr-defined]
        warnings.showwarning = _show_warning
        yield


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    try:
        (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))
    except OSError:
        pass


@contextmanager
def _stdio(stdin: io.TextIOWrapper, stdout: io.TextIOWrapper, stderr: io.TextIOWrapper) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
