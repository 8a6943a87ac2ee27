"""Which PostgreSQL the suite uses (tests/conftest.py, issue 39): ``TEST_DATABASE_URL``, else the
local server on 127.0.0.1:5432, else a testcontainers container when a Docker daemon answers,
else none (skipped locally, failed with CI=true). The servers and the daemon are faked here:
Docker does not run on these machines; the container code is the one a user with Docker runs."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

import pytest

from tests import conftest
from tests.conftest import LOCAL_SERVER, PostgresChoice, choose_postgres

GIVEN = "postgresql://ci:secret@db.example:5433/postgres"
CONTAINER = "postgresql://postgres:postgres@localhost:32771/postgres"


class World:
    """The servers that answer, whether a Docker daemon does, and what was asked of them."""

    def __init__(self, answering: frozenset[str] | set[str] = frozenset(), docker: bool = False,
                 container: Callable[[], str] | None = None) -> None:
        self.answering, self.docker = set(answering), docker
        self.asked: list[str] = []
        self.started = 0
        self._container = container or (lambda: CONTAINER)

    def answers(self, url: str) -> bool:
        self.asked.append(url)
        return url in self.answering

    def docker_answers(self) -> bool:
        self.asked.append("docker")
        return self.docker

    def start_container(self) -> str:
        self.started += 1
        return self._container()

    def choose(self, env: dict[str, str]) -> PostgresChoice:
        return choose_postgres(env, self.answers, self.docker_answers, self.start_container)


def test_test_database_url_comes_first_and_nothing_else_is_tried() -> None:
    world = World({GIVEN, LOCAL_SERVER}, docker=True)
    assert world.choose({"TEST_DATABASE_URL": GIVEN}) == PostgresChoice(GIVEN, "TEST_DATABASE_URL")
    assert world.asked == [GIVEN] and world.started == 0


def test_the_local_server_when_no_url_is_given_or_the_given_one_does_not_answer() -> None:
    world = World({LOCAL_SERVER}, docker=True)
    assert world.choose({}) == PostgresChoice(LOCAL_SERVER, "local server")
    assert world.asked == [LOCAL_SERVER] and world.started == 0
    world = World({LOCAL_SERVER}, docker=True)
    assert world.choose({"TEST_DATABASE_URL": GIVEN}).url == LOCAL_SERVER
    assert world.asked == [GIVEN, LOCAL_SERVER] and world.started == 0


def test_a_container_when_no_server_answers_and_docker_does() -> None:
    world = World(docker=True)
    assert world.choose({"TEST_DATABASE_URL": GIVEN}) == PostgresChoice(CONTAINER, "container")
    assert world.asked == [GIVEN, LOCAL_SERVER, "docker"] and world.started == 1


def test_none_without_a_server_or_docker_and_it_says_what_it_tried() -> None:
    world = World()
    choice = world.choose({})
    assert choice.url is None and world.started == 0
    assert "127.0.0.1:5432" in choice.tried and "Docker" in choice.tried
    choice = World().choose({"TEST_DATABASE_URL": GIVEN})
    assert "TEST_DATABASE_URL did not answer" in choice.tried
    assert "secret" not in choice.tried  # the given URL's password is never shown


def test_a_container_that_does_not_start_is_no_server() -> None:
    def refused() -> str:
        raise RuntimeError("pull access denied for postgres")

    world = World(docker=True, container=refused)
    choice = world.choose({})
    assert choice.url is None and world.started == 1
    assert "container did not start" in choice.tried and "pull access denied" in choice.tried


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch) -> World:
    """``postgres_server`` with the session's choice forgotten and the world faked."""
    world = World()
    monkeypatch.setattr(conftest, "_SERVER", [])
    monkeypatch.setattr(conftest, "server_answers", world.answers)
    monkeypatch.setattr(conftest, "docker_answers", world.docker_answers)
    monkeypatch.setattr(conftest, "start_postgres_container", world.start_container)
    monkeypatch.delenv("TEST_DATABASE_URL", raising=False)
    return world


def test_the_choice_is_made_once_per_session(fresh_choice: World) -> None:
    fresh_choice.docker = True
    assert conftest.postgres_server() == conftest.postgres_server() == CONTAINER
    assert fresh_choice.started == 1 and fresh_choice.asked.count("docker") == 1


@pytest.mark.parametrize("ci", ["", "false"])
def test_no_server_skips_on_a_developer_s_machine(fresh_choice: World, monkeypatch: pytest.MonkeyPatch,
                                                   ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="no server answered"):
        conftest.postgres_server()


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_no_server_fails_in_ci(fresh_choice: World, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="required in CI: PostgreSQL"):
        conftest.postgres_server()


def test_the_container_is_testcontainers_postgres_started_once_and_stopped_at_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``start_postgres_container`` with testcontainers' class faked: the image, the
    credentials, a driverless URL (as the stores parse it), and a stop at the session's end."""
    made: list[FakeContainer] = []

    class FakeContainer:
        def __init__(self, image: str, **options: object) -> None:
            self.image, self.options, self.running = image, options, False
            made.append(self)

        def start(self) -> FakeContainer:
            self.running = True
            return self

        def stop(self) -> None:
            self.running = False

        def get_connection_url(self, driver: object = "psycopg2") -> str:
            assert driver is None
            return CONTAINER

    module = types.ModuleType("testcontainers.community.postgres")
    module.PostgresContainer = FakeContainer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "testcontainers.community.postgres", module)
    monkeypatch.setattr(conftest, "_CONTAINERS", [])

    assert conftest.start_postgres_container() == CONTAINER
    [container] = made
    assert container.image == conftest.POSTGRES_IMAGE and container.running
    assert container.options == {"username": "postgres", "password": "postgres", "dbname": "postgres", "driver": None}
    conftest.stop_postgres_containers()
    assert not container.running and conftest._CONTAINERS == []
