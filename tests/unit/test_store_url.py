"""The database URL is honoured whole: a PostgreSQL URL's libpq parameters reach every
connection path (the event store's pool, the read models' engines, ``pg_connect``), and
anything not honoured is refused (``invalid_database_url``) before anything connects.
No server: nothing here connects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.errors import CanonError
from canon_ledger.infrastructure import read_store, stores
from canon_ledger.infrastructure.store_faults import scrubbed
from canon_ledger.infrastructure.stores import store_config

BASE = "postgresql://canon@db.example:5433/canon"


def _refusal(url: str) -> CanonError:
    with pytest.raises(CanonError) as caught:
        store_config(url)
    assert caught.value.code == "invalid_database_url" and caught.value.field == "db"
    return caught.value


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    made = {}
    for name in ("ca.pem", "client.crt", "client.key", "crl.pem", "pgpass"):
        (tmp_path / name).write_text("x")
        made[name] = str(tmp_path / name)
    return made


@pytest.mark.parametrize(("query", "says"), [
    ("sslmode=bogus", ["sslmode='bogus'", "disable, allow, prefer, require, verify-ca, verify-full"]),
    ("sslmode=REQUIRE", ["sslmode='REQUIRE'"]),
    ("sslmode=verify-full&sslrootcert=/nonexistent", ["sslrootcert='/nonexistent'", "no file", "system"]),
    ("sslcert=/nonexistent/c.crt", ["sslcert", "no file"]),
    ("sslkey=/nonexistent/c.key", ["sslkey", "no file"]),
    ("sslcrl=/nonexistent/crl.pem", ["sslcrl", "no file"]),
    ("passfile=/nonexistent/pgpass", ["passfile", "no file"]),
    ("sslcrldir=/nonexistent", ["sslcrldir", "no folder"]),
    ("sslrootcert=system&sslmode=require", ["sslrootcert=system", "verify-full"]),
    ("sslmode=require&sslmode=disable", ["'sslmode'", "twice"]),
    ("application_name=a&application_name=b", ["'application_name'", "twice"]),
    ("foo=1", ["unknown", "'foo'", "sslmode"]),
    ("SSLMODE=require", ["unknown", "'SSLMODE'"]),
    ("sslmode=", ["'sslmode'", "needs a value"]),
    ("sslmode", ["'sslmode'", "needs a value"]),
    ("connect_timeout=0", ["connect_timeout='0'", "1 to 3600"]),
    ("connect_timeout=abc", ["connect_timeout='abc'"]),
    ("connect_timeout=99999", ["connect_timeout='99999'"]),
    ("connect_timeout=%C2%B2", ["connect_timeout"]),  # a superscript two is a digit to str.isdigit
    ("keepalives_idle=-1", ["keepalives_idle='-1'"]),
    ("keepalives_count=128", ["keepalives_count='128'", "1 to 127"]),
    ("keepalives=2", ["keepalives='2'", "0, 1"]),
    ("tcp_user_timeout=1.5", ["tcp_user_timeout='1.5'"]),
    ("channel_binding=maybe", ["channel_binding='maybe'"]),
    ("gssencmode=always", ["gssencmode='always'"]),
    ("target_session_attrs=writable", ["target_session_attrs='writable'"]),
    ("ssl_min_protocol_version=SSLv3", ["ssl_min_protocol_version='SSLv3'"]),
    ("require_auth=kerberos", ["require_auth='kerberos'"]),
    ("require_auth=password,!md5", ["require_auth='password,!md5'"]),
    ("host=elsewhere", ["'host'", "in the URL itself"]),
    ("hostaddr=10.0.0.1", ["'hostaddr'", "in the URL itself"]),
    ("port=5432", ["'port'", "in the URL itself"]),
    ("user=other", ["'user'", "in the URL itself"]),
    ("dbname=other", ["'dbname'", "in the URL itself"]),
    ("service=prod", ["'service'", "in the URL itself"]),
    ("password=hunter2", ["'password'", "PGPASSWORD", "PGPASSFILE"]),
])
def test_a_parameter_not_honoured_as_given_is_refused_by_name(query: str, says: list[str]) -> None:
    error = _refusal(f"{BASE}?{query}")
    for words in says:
        assert words in error.message, error.message
    assert "hunter2" not in error.message


def test_a_secret_is_never_in_a_refusal_nor_in_the_display() -> None:
    error = _refusal("postgresql://canon:hunter2@h/db?sslpassword=k3y-s3cret&sslpassword=k3y-s3cret")
    assert "twice" in error.message and "k3y-s3cret" not in error.message and "hunter2" not in error.message
    error = _refusal("postgresql://canon:hunter2@h/db?sslpassword=k3y-s3cret&sslmode=bogus")
    assert "k3y-s3cret" not in error.message and "hunter2" not in error.message
    config = store_config("postgresql://canon:hunter2@h/db?sslpassword=k3y%2Ds3cret&application_name=canon-x")
    assert config.display == "postgresql://canon:***@h/db?sslpassword=***&application_name=canon-x"
    assert config.libpq == {"sslpassword": "k3y-s3cret", "application_name": "canon-x"}
    assert "k3y" not in store_config("postgresql://canon@h/db?ssl%70assword=k3y-s3cret").display
    # A driver message that quotes a secret is masked before the CLI or the server shows it.
    message = scrubbed(RuntimeError("bad key k3y-s3cret for canon/hunter2"), config.url)
    assert "k3y-s3cret" not in message and "hunter2" not in message


def test_a_fragment_is_refused_rather_than_dropped() -> None:
    assert "percent-encode" in _refusal("postgresql://canon:pa#ss@h/db").message
    _refusal(f"{BASE}#sslmode=require")


@pytest.mark.parametrize(("url", "says"), [
    ("sqlite:///canon.db?mode=ro", "takes no query string"),
    ("sqlite:////tmp/canon.db?journal_mode=wal", "takes no query string"),
    ("sqlite:///file:canon.db", "uri=true"),
    ("sqlite:///file:canon.db?mode=ro", "uri=true"),
    ("sqlite:///file:canon.db?mode=memory&uri=true", "mode='memory'"),
    ("sqlite:///file:canon.db?vfs=unix-dotfile&uri=true", "unknown SQLite URI parameter 'vfs'"),
    ("sqlite:///file:canon.db?mode=ro&mode=rw&uri=true", "twice"),
])
def test_a_sqlite_query_string_is_refused_unless_an_sqlite_uri_filename_reads_it(url: str, says: str) -> None:
    assert says in _refusal(url).message


def test_an_sqlite_uri_filename_is_passed_whole() -> None:
    config = store_config("sqlite:///file:/data/canon.db?mode=ro&uri=true")
    assert config.env["SQLITE_DBNAME"] == "file:/data/canon.db?mode=ro&uri=true"
    assert config.libpq == {}


def test_every_honoured_parameter_is_carried_checked(files: dict[str, str]) -> None:
    given = {
        "sslmode": "verify-full", "sslrootcert": files["ca.pem"], "sslcert": files["client.crt"],
        "sslkey": files["client.key"], "sslcrl": files["crl.pem"], "sslcrldir": str(Path(files["ca.pem"]).parent),
        "sslpassword": "pw", "sslsni": "1", "ssl_min_protocol_version": "TLSv1.2",
        "ssl_max_protocol_version": "TLSv1.3", "channel_binding": "require", "gssencmode": "disable",
        "require_auth": "scram-sha-256", "target_session_attrs": "read-write", "application_name": "canon x",
        "options": "-c search_path=canon+public", "passfile": files["pgpass"], "connect_timeout": "12",
        "keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3",
        "tcp_user_timeout": "0",
    }
    assert set(given) == set(stores.LIBPQ_PARAMETERS)
    query = "&".join(f"{name}={value.replace(' ', '%20')}" for name, value in given.items())
    config = store_config(f"{BASE}?{query}")
    assert config.libpq == given  # "+" is a plus, "%20" a space: libpq's own decoding
    assert config.env["POSTGRES_CONNECT_TIMEOUT"] == "12"  # also the wait for a pooled connection
    assert config.env["POSTGRES_HOST"] == "db.example" and config.env["POSTGRES_PORT"] == "5433"
    assert "sslpassword=***" in config.display and "=pw" not in config.display


def test_sslrootcert_may_be_the_system_store() -> None:
    assert store_config(f"{BASE}?sslrootcert=system").libpq == {"sslrootcert": "system"}
    assert store_config(f"{BASE}?sslmode=verify-full&sslrootcert=system").libpq["sslmode"] == "verify-full"


def test_a_url_without_parameters_is_as_before() -> None:
    config = store_config(BASE)
    assert config.libpq == {} and "CANON_LIBPQ_PARAMS" not in config.env
    assert config.env["POSTGRES_CONNECT_TIMEOUT"] == "5" and config.display == BASE


def test_a_password_can_come_from_the_environment_and_stays_out_of_the_display(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "from-env")
    config = store_config(BASE)
    assert config.env["POSTGRES_PASSWORD"] == "from-env" and "from-env" not in config.display
    monkeypatch.delenv("PGPASSWORD")
    assert store_config(BASE).env["POSTGRES_PASSWORD"] == ""  # libpq then reads the password file


# -- the three connection paths get the parameters ------------------------------------------------
URL = f"{BASE}?sslmode=require&application_name=canon-x&options=-c%20statement_timeout%3D5000&connect_timeout=7"


def _event_store_pool(url: str) -> Any:
    """The library's pool as the ledger builds it, before its first connection."""
    ledger = CanonLedger.__new__(CanonLedger)
    factory = ledger.construct_factory(ledger.construct_env(CanonLedger.name, store_config(url).env))
    return factory.datastore.pool  # type: ignore[attr-defined]


def test_the_event_store_pool_connects_with_the_parameters() -> None:
    pool = _event_store_pool(URL)
    assert pool.closed  # nothing connected
    assert pool.kwargs["sslmode"] == "require" and pool.kwargs["application_name"] == "canon-x"
    assert pool.kwargs["options"] == "-c statement_timeout=5000"
    assert pool.kwargs["host"] == "db.example" and pool.kwargs["dbname"] == "canon"
    assert pool.timeout == 7.0
    # No password given: none is passed, so libpq reads PGPASSFILE or ~/.pgpass.
    assert "password" not in pool.kwargs
    assert _event_store_pool("postgresql://canon:pw@h/db").kwargs["password"] == "pw"


def test_the_read_engines_connect_with_the_parameters() -> None:
    read, write = read_store.engines(store_config(URL))
    seen: dict[str, Any] = {}

    @event.listens_for(write, "do_connect")
    def _capture(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        seen.update(params)
        raise RuntimeError("captured, not connected")

    try:
        with pytest.raises(RuntimeError, match="captured"):
            read.connect()
    finally:
        write.dispose()
    assert seen["sslmode"] == "require" and seen["application_name"] == "canon-x" and seen["connect_timeout"] == "7"
    # The URL's options first, then the read models' own (see read_store's docstring).
    assert seen["options"] == "-c statement_timeout=5000 -c synchronous_commit=off"
    assert seen["host"] == "db.example" and seen["dbname"] == "canon"


def test_the_read_engines_keep_their_own_options_without_parameters() -> None:
    _, write = read_store.engines(store_config(BASE))
    seen: dict[str, Any] = {}

    @event.listens_for(write, "do_connect")
    def _capture(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        seen.update(params)
        raise RuntimeError("captured, not connected")

    with pytest.raises(RuntimeError):
        write.connect()
    write.dispose()
    assert seen["options"] == "-c synchronous_commit=off" and "sslmode" not in seen


def test_pg_connect_connects_with_the_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(psycopg, "connect", lambda *args, **kwargs: seen.update(kwargs))
    stores.pg_connect(store_config(URL))
    assert seen["sslmode"] == "require" and seen["application_name"] == "canon-x"
    assert seen["options"] == "-c statement_timeout=5000" and seen["connect_timeout"] == 7
    assert seen["host"] == "db.example" and seen["autocommit"] is True
    assert seen["password"] is None  # None: not passed, libpq reads the password file
