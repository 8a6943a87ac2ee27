"""`canon --db URL` honours the URL whole: a parameter it cannot honour is refused (exit 2,
``invalid_database_url``, one line) before anything connects; one it honours is in force
(``sslmode=require`` against a server without SSL is a store fault, exit 3); and the password
can stay out of the command line (a password file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.cli_runner import canon
from tests.integration.test_store_url import _server_has_ssl, _tables, _with

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere"  # nothing listens: a connection would fail (exit 3)


def _refused(result, says: str) -> None:  # noqa: ANN001
    assert result.returncode == 2, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_database_url" and error["field"] == "db"
    assert says in error["message"]
    assert result.stderr.count("\n") == 1 and "invalid_database_url" in result.stderr  # one line, no traceback


@pytest.mark.parametrize(("query", "says"), [
    ("sslmode=bogus", "sslmode='bogus'"),
    ("sslmode=verify-full&sslrootcert=/nonexistent", "sslrootcert='/nonexistent'"),
    ("sslmode=require&sslmode=disable", "twice"),
    ("sslmod=require", "unknown database URL parameter 'sslmod'"),
])
def test_a_parameter_the_store_cannot_honour_is_refused_before_connecting(tmp_path: Path, query: str,
                                                                        says: str) -> None:
    _refused(canon("--db", f"{UNREACHABLE}?{query}", "--format", "json", "events", cwd=tmp_path), says)


def test_a_sqlite_query_string_is_refused_not_dropped(tmp_path: Path) -> None:
    _refused(canon("--db", "sqlite:///canon.db?mode=ro", "--format", "json", "init", cwd=tmp_path),
             "takes no query string")
    assert list(tmp_path.iterdir()) == []  # neither canon.db nor "canon.db?mode=ro" was created


@pytest.mark.postgres
def test_a_bogus_sslmode_is_refused_and_nothing_is_created(pg_url: str, tmp_path: Path) -> None:
    _refused(canon("--db", _with(pg_url, "sslmode=bogus"), "--format", "json", "events", cwd=tmp_path), "sslmode")
    assert _tables(pg_url) == []


@pytest.mark.postgres
def test_sslmode_require_against_a_server_without_ssl_is_a_store_fault(pg_url: str, tmp_path: Path) -> None:
    result = canon("--db", _with(pg_url, "sslmode=require"), "--format", "json", "events", cwd=tmp_path)
    if _server_has_ssl(pg_url):  # a server with SSL: it connects (encrypted; the integration test checks how)
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 3, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "store_unavailable" and "SSL" in error["message"]
    assert "sslmode=require" in error["message"]  # the URL as given, password masked
    assert _tables(pg_url) == []  # nothing was written in plaintext


@pytest.mark.postgres
def test_the_password_can_stay_out_of_the_command_line(pg_url: str, tmp_path: Path) -> None:
    u = make_url(pg_url)
    password = u.password or "from-the-passfile"
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{u.host}:{u.port or 5432}:*:{u.username or 'postgres'}:{password}\n")
    passfile.chmod(0o600)
    url = _with(u.set(password=None).render_as_string(hide_password=False), "application_name=canon-cli")
    result = canon("--db", url, "--format", "json", "events", cwd=tmp_path,
                   env={"PGPASSFILE": str(passfile), "PGPASSWORD": ""})
    assert result.returncode == 0, result.stderr
    assert password not in url
    assert "canonledger_events" in _tables(pg_url)
