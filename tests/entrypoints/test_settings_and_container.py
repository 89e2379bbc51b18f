"""Settings from the environment, and what the container builds from them."""

from __future__ import annotations

import pytest

from adapters.memory import InMemoryTaskStore, InMemoryWaker
from adapters.postgres import PostgresTaskStore, PostgresWaker
from application.engine import TriggerLoop
from application.scheduling import SchedulingService
from entrypoints.container import build_container
from entrypoints.settings import Access, ConfigurationError, load_settings
from tests.entrypoints.helpers import make_settings

pytestmark = pytest.mark.usefixtures("no_scheduler_environment")


def test_defaults_follow_api_md() -> None:
    settings = load_settings()

    assert (settings.host, settings.port) == ("127.0.0.1", 8005)
    assert settings.database_url is None and settings.store_kind == "memory"
    assert settings.db_schema == "scheduler"
    assert settings.engine == "native"
    assert settings.max_concurrent_runs == 100
    assert settings.drain_timeout == 30
    assert settings.run_retention_days == 30
    assert settings.tokens == {} and settings.allow_anonymous is False


def test_variables_are_read_with_the_scheduler_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDULER_SCHEMA", "tenant_a")
    monkeypatch.setenv("SCHEDULER_API_TOKENS", " admin , viewer:read ,")
    monkeypatch.setenv("SCHEDULER_LOG_LEVEL", "debug")
    monkeypatch.setenv("SCHEDULER_ENGINE", "APScheduler")
    monkeypatch.setenv("SCHEDULER_TARGET_DENY", "10.0.0.0/8, metadata.internal")

    settings = load_settings()

    assert settings.db_schema == "tenant_a"
    assert settings.tokens == {"admin": Access.WRITE, "viewer": Access.READ}
    assert settings.log_level == "DEBUG" and settings.engine == "apscheduler"
    assert settings.target_deny == "10.0.0.0/8, metadata.internal"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SCHEDULER_PORT", "70000"),
        ("SCHEDULER_SCHEMA", "Robert'); DROP TABLE tasks;--"),
        ("SCHEDULER_ENGINE", "cron"),
        ("SCHEDULER_MAX_CONCURRENT_RUNS", "0"),
        ("SCHEDULER_TARGET_ALLOW", "10.0.0.0/33"),
        ("SCHEDULER_DATABASE_URL", "mysql://db/scheduler"),
        ("SCHEDULER_API_TOKENS", "same,same:read"),
        ("SCHEDULER_TARGET_ALLOW", "not a host"),
        ("SCHEDULER_HOST", "not..a..host"),
        ("SCHEDULER_TARGET_DENY", "metadata..internal"),
        ("SCHEDULER_RUN_RETENTION_DAYS", "1e9"),
        ("SCHEDULER_RUN_RETENTION_DAYS", "inf"),
        ("SCHEDULER_DATABASE_URL", "postgresql://db/scheduler?connect_timeout=abc"),
        ("SCHEDULER_DATABASE_URL", "postgresql://db:abc/scheduler"),
        ("SCHEDULER_DATABASE_URL", "host=db sslmode=bogus"),
    ],
)
def test_a_bad_variable_is_named(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(ConfigurationError, match=variable):
        load_settings()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_number_that_is_not_finite_is_called_so(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SCHEDULER_MAX_POLL_INTERVAL", value)

    with pytest.raises(ConfigurationError) as raised:
        load_settings()

    assert "SCHEDULER_MAX_POLL_INTERVAL: Input should be a finite number" in str(raised.value)


@pytest.mark.parametrize(
    ("host", "overrides", "refused"),
    [
        ("127.0.0.1", {}, False),
        ("::1", {}, False),
        ("localhost", {}, False),
        ("0.0.0.0", {}, True),
        ("192.168.1.10", {}, True),
        ("0.0.0.0", {"api_tokens": "admin"}, False),
        ("0.0.0.0", {"allow_anonymous": True}, False),
    ],
)
def test_no_public_listener_without_tokens_unless_anonymous_is_allowed(
    host: str, overrides: dict[str, object], refused: bool
) -> None:
    settings = make_settings(host=host, **overrides)

    if refused:
        with pytest.raises(ConfigurationError, match="SCHEDULER_API_TOKENS"):
            settings.check_exposure()
    else:
        settings.check_exposure()


def test_without_a_database_the_container_wires_the_memory_adapter() -> None:
    container = build_container(make_settings())

    store, waker = container.task_store(), container.waker()

    assert isinstance(store, InMemoryTaskStore) and isinstance(waker, InMemoryWaker)
    assert isinstance(container.engine(), TriggerLoop)
    assert isinstance(container.scheduling(), SchedulingService)
    assert container.engine() is container.engine()  # one engine per container


def test_with_a_database_the_container_wires_postgres_on_a_closed_pool() -> None:
    settings = make_settings(database_url="postgresql://nobody@127.0.0.1:1/none", db_schema="x")
    container = build_container(settings)

    store, waker = container.task_store(), container.waker()

    assert isinstance(store, PostgresTaskStore) and store.schema == "x"
    assert isinstance(waker, PostgresWaker)
    assert container.pool().closed


def test_engine_settings_come_from_the_settings() -> None:
    container = build_container(make_settings(batch_size=7, drain_timeout=3, replica="r1"))

    engine = container.engine()

    assert isinstance(engine, TriggerLoop)
    assert (engine.settings.batch_size, engine.settings.drain_timeout) == (7, 3)
    assert engine.settings.replica == "r1"


@pytest.mark.parametrize(
    ("variable", "value", "secret"),
    [
        ("SCHEDULER_EVENTS_URL", "http://u:EVURLSECRET@events.test/", "EVURLSECRET"),
        ("SCHEDULER_DATABASE_URL", "postgresql://app:PG%ZZSECRETPW@db/jobs", "ZZSECRETPW"),
        ("SCHEDULER_DATABASE_URL", "postgresql://db/jobs?password=A%ZZSECRET", "ZZSECRET"),
    ],
)
def test_a_bad_variable_holding_a_secret_is_named_without_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, secret: str
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(ConfigurationError, match=variable) as refused:
        load_settings()

    assert secret not in str(refused.value)


@pytest.mark.parametrize("tokens", ["ops=", "ops=:read", "admin,ops="])
def test_a_label_whose_token_came_out_empty_is_refused(
    monkeypatch: pytest.MonkeyPatch, tokens: str
) -> None:
    # `ops=${OPS_TOKEN}` with the variable unset must not make "ops=" a token.
    monkeypatch.setenv("SCHEDULER_API_TOKENS", tokens)

    with pytest.raises(ConfigurationError, match="a token is empty after its label"):
        load_settings()


def test_a_token_ending_in_one_equals_sign_is_written_after_a_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SCHEDULER_API_TOKENS", "ci=YWJjZGVmZ2g=")

    assert load_settings().tokens == {"YWJjZGVmZ2g=": Access.WRITE}
