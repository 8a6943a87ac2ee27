"""Shared fixtures: real stores only.

PostgreSQL is found in this order (``choose_postgres``): ``TEST_DATABASE_URL`` (a server URL
whose user may create databases), then the local server on 127.0.0.1:5432, then a throwaway
PostgreSQL container (testcontainers) when a Docker daemon answers: started once per session
(per pytest-xdist worker) and stopped at its end. Without any of them the PostgreSQL tests skip
locally but FAIL when ``CI=true``. An existing database is never touched.

Each test's store is its own, as ``canon init`` makes it (the event log and every read model's
tables, empty), copied from a template made once per session (per worker): on PostgreSQL a
database ``canon_test_tmpl_<uuid>`` bootstrapped once, each test's database ``CREATE DATABASE
... TEMPLATE`` it (dropped after the test, on a thread of its own; the template at the session's
end), on SQLite a copy of a bootstrapped file. ``module_store_url`` and ``shared_demo`` share one
store per module and kind, for tests that only read it. ``pg_url`` and ``create_database()`` stay empty databases: the tests
that take them check what creates the tables.

Hypothesis runs the ``quick`` profile unless ``CANON_HYPOTHESIS=deep`` (``tests/helpers.py``).
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.infrastructure.stores import open_ledger, server_conninfo
from tests.fakes.gemini_server import FakeGemini
from tests.helpers import apply_demo, hypothesis_profile

# -- hypothesis profiles ------------------------------------------------------------------------
# Each property names its own counts (``tests.helpers.examples(quick, deep)``); a profile's
# max_examples is the count of a property that names none.
settings.register_profile("quick", max_examples=50, print_blob=True)
settings.register_profile("deep", max_examples=1000, print_blob=True)
settings.load_profile(hypothesis_profile())

# -- the order modules are handed to the workers ------------------------------------------------
# `scripts/test` gives each of its workers whole modules (--dist loadscope), one at a time as
# they finish. pytest-xdist hands them out by test count by default (--loadscope-reorder), which
# put the slowest modules, a few long tests each, last: one worker ran them alone while the other
# had nothing left. Instead the longest go first (longest processing time first) and the many
# short ones fill in behind them, in collection order. Seconds of a whole-suite run (sum of the
# module's tests, two workers; relative sizes are what count): a module not listed, or whose cost
# has changed, runs in the wrong place, never wrongly.
LONG_POLES = {
    "tests/e2e/test_worker.py": 145,
    "tests/e2e/test_http_fuzz.py": 86,
    "tests/e2e/test_server_hardening.py": 77,
    "tests/e2e/test_worker_split.py": 63,
    "tests/e2e/test_readme.py": 59,
    "tests/e2e/test_event_stream.py": 55,
    "tests/e2e/test_viewer.py": 50,  # with Chromium (about 23 without)
    "tests/e2e/test_http_server.py": 45,
    "tests/integration/test_audit_and_rebuild.py": 38,
    "tests/e2e/test_mcp.py": 35,
    "tests/integration/test_http_api.py": 35,
    "tests/integration/test_gemini_provider.py": 32,
    "tests/integration/test_read_bounds.py": 30,
    "tests/e2e/test_first_story.py": 30,
    "tests/integration/test_story_scope_walk.py": 29,
    "tests/integration/test_packets.py": 27,
    "tests/e2e/test_viewer_review.py": 25,  # with Chromium
    "tests/e2e/test_cold_start.py": 23,
    "tests/integration/test_mention_recall.py": 21,
    "tests/unit/test_chunking_linear.py": 17,
    "tests/e2e/test_api_docs.py": 15,  # with Chromium
    "tests/integration/test_spoilers.py": 14,
    "tests/integration/test_stepback.py": 14,
    "tests/integration/test_concurrent_writers.py": 13,
    "tests/integration/test_audit_generated_story.py": 13,
    "tests/integration/test_split_build.py": 11,
    "tests/integration/test_retrieval.py": 10,
    "tests/integration/test_viewer_session.py": 10,
}


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "loadscopereorder", None) is not None:  # pytest-xdist is there
        config.option.loadscopereorder = False  # keep the order below (--no-loadscope-reorder)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (by module-scoped parameters)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of ``LONG_POLES`` first, longest first; each module's tests in their order."""
    items.sort(key=lambda item: -LONG_POLES.get(item.nodeid.split("::", 1)[0], 0))  # a stable sort


# -- which PostgreSQL ---------------------------------------------------------------------------
LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
POSTGRES_IMAGE = "postgres:15"  # the version the suite runs against on 127.0.0.1


@dataclass(frozen=True)
class PostgresChoice:
    """The server the PostgreSQL tests use: its admin URL and where it came from, or None and
    what was tried (the skip's, or in CI the failure's, message)."""

    url: str | None
    source: str  # "TEST_DATABASE_URL", "local server", "container" or "" (none)
    tried: str = ""


def choose_postgres(env: Mapping[str, str], answers: Callable[[str], bool], docker_answers: Callable[[], bool],
                    start_container: Callable[[], str]) -> PostgresChoice:
    """``TEST_DATABASE_URL`` if it answers, else the local server on 127.0.0.1:5432 if it
    answers, else a container (``start_container``) if a Docker daemon answers, else none."""
    tried = []
    given = env.get("TEST_DATABASE_URL")
    if given:
        if answers(given):
            return PostgresChoice(given, "TEST_DATABASE_URL")
        tried.append("TEST_DATABASE_URL did not answer")
    if answers(LOCAL_SERVER):
        return PostgresChoice(LOCAL_SERVER, "local server")
    tried.append("no server on 127.0.0.1:5432")
    if not docker_answers():
        tried.append("no Docker daemon for a container (testcontainers)")
        return PostgresChoice(None, "", "; ".join(tried))
    try:
        return PostgresChoice(start_container(), "container")
    except Exception as e:  # an image that cannot be pulled, a daemon that refuses: no server
        tried.append(f"the PostgreSQL container did not start ({type(e).__name__}: {e})")
        return PostgresChoice(None, "", "; ".join(tried))


def server_answers(url: str) -> bool:
    try:
        with psycopg.connect(_conninfo(url), connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


def docker_answers() -> bool:
    """A Docker daemon answers a ping, found as testcontainers finds it (DOCKER_HOST, its
    properties file, the docker context)."""
    try:
        from testcontainers.core.docker_client import DockerClient
    except ImportError:
        return False
    try:
        client = DockerClient(timeout=3).client
    except Exception:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


_CONTAINERS: list[Any] = []


def start_postgres_container() -> str:
    """Start a PostgreSQL container for this session (stopped at its end); its admin URL."""
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers before the community modules
        from testcontainers.postgres import PostgresContainer

    container = PostgresContainer(POSTGRES_IMAGE, username="postgres", password="postgres", dbname="postgres",
                                  driver=None)
    container.start()
    _CONTAINERS.append(container)
    atexit.register(stop_postgres_containers)  # also when the session ends without pytest_sessionfinish
    return str(container.get_connection_url(driver=None))


def stop_postgres_containers() -> None:
    while _CONTAINERS:
        _CONTAINERS.pop().stop()


_conninfo = server_conninfo  # the name the test modules import


_SERVER: list[PostgresChoice] = []


def postgres_server() -> str:
    """The admin URL of a reachable server, or skip (fail in CI)."""
    if not _SERVER:
        _SERVER.append(choose_postgres(os.environ, server_answers, docker_answers, start_postgres_container))
    choice = _SERVER[0]
    if choice.url is None:
        missing_service(f"PostgreSQL: no server answered ({choice.tried}; set TEST_DATABASE_URL, run one on "
                        "127.0.0.1:5432, or start Docker)")
    return choice.url  # type: ignore[return-value]


def missing_service(what: str) -> None:
    """A service a test needs is absent: the test fails in CI (``CI`` set to 1, true or yes),
    and is skipped, saying what is missing, on a developer's machine."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"required in CI: {what}")
    pytest.skip(what)


# -- stores -------------------------------------------------------------------------------------
# The embedder `canon init` would choose in the environment the session started in (a test that
# sets CANON_EMBEDDER before the first store is made does not change the template).
_INIT_EMBEDDER = os.environ.get("CANON_EMBEDDER") or "auto"


def _bootstrapped(url: str) -> None:
    """``url``'s store made as `canon init` makes it: the event log and every read model's tables."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    bootstrap(url, embedder=_INIT_EMBEDDER).close()


def _database_url(admin: str, name: str) -> str:
    return make_url(admin).set(database=name).render_as_string(hide_password=False)


_PG_TEMPLATE: dict[str, str] = {}  # admin URL -> template database name, made on first use


def _pg_template(admin: str) -> str:
    """This session's template database on ``admin``'s server, bootstrapped once, then closed to
    connections (CREATE DATABASE ... TEMPLATE needs it idle)."""
    if admin not in _PG_TEMPLATE:
        name = f"canon_test_tmpl_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            _bootstrapped(_database_url(admin, name))
            with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        except BaseException:
            _drop(admin, name)
            raise
        _PG_TEMPLATE[admin] = name
    return _PG_TEMPLATE[admin]


def _drop(admin: str, name: str) -> None:
    assert name.startswith("canon_test_"), name
    with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_database(*, initialised: bool = False) -> tuple[str, str]:
    """Create a scratch database; returns (its URL, the admin URL that drops it). Empty, or with
    ``initialised`` a store as `canon init` makes it (a clone of the session's template).
    (CREATE DATABASE ... TEMPLATE uses the server's default strategy: WAL_LOG from PostgreSQL 15,
    measured faster here than FILE_COPY, whose checkpoints wait on the server's other writers.)"""
    admin = postgres_server()
    name = f"canon_test_{uuid.uuid4().hex[:12]}"
    template = f' TEMPLATE "{_pg_template(admin)}"' if initialised else ""
    with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{template}')
    return _database_url(admin, name), admin


class _Dropper:
    """Drops scratch databases on a thread of its own, so that a test's teardown does not wait
    for DROP DATABASE; ``wait`` (at the session's end) returns once every one is dropped."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[str, str]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.failed: list[str] = []

    def put(self, admin: str, name: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="drop-test-databases", daemon=True)
            self._thread.start()
        self._queue.put((admin, name))

    def _run(self) -> None:
        while True:
            admin, name = self._queue.get()
            try:
                _drop(admin, name)
            except Exception as e:  # noqa: BLE001 - reported at the session's end
                self.failed.append(f"{name}: {type(e).__name__}: {e}")
            finally:
                self._queue.task_done()

    def wait(self) -> None:
        self._queue.join()


_DROPPER = _Dropper()


def drop_database(url: str, admin: str) -> None:
    """Drop a scratch database (the connections still open to it closed by force), in the background."""
    name = make_url(url).database
    assert name and name.startswith("canon_test_") and not name.startswith("canon_test_tmpl_"), name
    _DROPPER.put(admin, name)


_SQLITE_TEMPLATE: list[Path] = []


def _sqlite_template() -> Path:
    """This session's bootstrapped SQLite store, made on first use (removed at the session's end)."""
    if not _SQLITE_TEMPLATE:
        path = Path(tempfile.mkdtemp(prefix="canon-test-tmpl-")) / "canon.db"
        _bootstrapped(f"sqlite:///{path}")
        assert [p.name for p in path.parent.iterdir()] == [path.name], "the template left a journal behind"
        _SQLITE_TEMPLATE.append(path)
    return _SQLITE_TEMPLATE[0]


def sqlite_store(path: Path) -> str:
    """A new SQLite store at ``path`` as `canon init` makes it (a copy of the session's template); its URL."""
    assert not path.exists(), path
    shutil.copyfile(_sqlite_template(), path)
    return f"sqlite:///{path}"


def initialised(url: str) -> str:
    """``url``'s store, created as `canon init` does (every verb but init and demo refuses a
    SQLite file that does not exist)."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and not u.query and not Path(u.database).exists():
        return sqlite_store(Path(u.database))
    open_ledger(url).close()
    return url


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Wait for the scratch databases' drops, drop this session's templates, then stop its
    container (each xdist worker its own)."""
    _DROPPER.wait()
    for failure in _DROPPER.failed:
        print(f"tests/conftest.py: a scratch database was not dropped: {failure}", file=sys.stderr)
    for admin, name in list(_PG_TEMPLATE.items()):
        try:
            _drop(admin, name)
        except psycopg.Error:
            pass  # the server went away: nothing left to drop
        _PG_TEMPLATE.pop(admin)
    while _SQLITE_TEMPLATE:
        shutil.rmtree(_SQLITE_TEMPLATE.pop().parent, ignore_errors=True)
    stop_postgres_containers()


def _store(param: str, path: Path) -> Iterator[str]:
    if param == "sqlite":
        yield sqlite_store(path)
        return
    url, admin = create_database(initialised=True)
    try:
        yield url
    finally:
        drop_database(url, admin)


STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test on the embedded SQLite file and on a scratch PostgreSQL database, each a
    fresh store as `canon init` makes it."""
    yield from _store(request.param, tmp_path / "canon.db")


@pytest.fixture(scope="module", params=STORES)
def module_store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``store_url`` shared by a module's tests (one store per kind): only for tests that read,
    or write only into ids of their own that no other test's answer depends on."""
    yield from _store(request.param, tmp_path_factory.mktemp("store") / "canon.db")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """An empty scratch PostgreSQL database (no tables: tests that check what creates them)."""
    url, admin = create_database()
    try:
        yield url
    finally:
        drop_database(url, admin)


@pytest.fixture
def ledger(store_url: str) -> Iterator[CanonLedger]:
    app = open_ledger(store_url)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def services(store_url: str) -> Iterator[Any]:
    from canon_ledger.infrastructure.bootstrap import bootstrap

    s = bootstrap(store_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def rs(store_url: str) -> Iterator[Any]:
    """Services on the hashing embedder: retrieval tests need vectors, not a model."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    s = bootstrap(store_url, embedder="hashing")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def demo(services: Any) -> Any:
    """``services`` with the demo story applied (``canon demo``'s commands); the read models
    are not caught up: a read catches them up itself."""
    apply_demo(services)
    return services


@pytest.fixture(scope="module")
def shared_demo(module_store_url: str) -> Iterator[Any]:
    """The demo story on services shared by a module's tests (one store per kind): only for tests
    that read it, recording at most packets (a PacketIssued is no canon event: no packet changes)."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    s = bootstrap(module_store_url)
    try:
        apply_demo(s)
        yield s
    finally:
        s.close()


@pytest.fixture
def projected_demo(demo: Any) -> Any:
    """``demo`` with the canon read model caught up: for tests that read its tables directly."""
    demo.canon.catch_up_serving()
    return demo


@pytest.fixture
def rs_demo(rs: Any) -> Any:
    """``rs`` (the hashing embedder) with the demo story applied."""
    apply_demo(rs)
    return rs


# -- the fake Gemini server ---------------------------------------------------------------------
@pytest.fixture
def gemini_key() -> str:
    """A random API key: the fake server accepts only it, and tests look for it in every output."""
    return f"test-key-{uuid.uuid4().hex}"


@pytest.fixture
def gemini(gemini_key: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """The fake Gemini server (``tests/fakes/gemini_server.py``) on 127.0.0.1, reached past any
    proxy, expecting ``gemini_key``; no Gemini setting of the environment reaches the test (a
    test passes the key and URL itself, or takes ``gemini_env``). A ``timeout``
    behaviour answers after 2 s, or when the server stops."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "CANON_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    with FakeGemini(expected_key=gemini_key, timeout_s=2.0) as fake:
        yield fake


@pytest.fixture
def gemini_env(gemini: FakeGemini, gemini_key: str, monkeypatch: pytest.MonkeyPatch) -> FakeGemini:
    """``gemini``, named by the environment (GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL) as a user
    configures the Gemini provider."""
    monkeypatch.setenv("GEMINI_API_KEY", gemini_key)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.url)
    return gemini
