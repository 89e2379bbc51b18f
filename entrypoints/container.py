"""The composition root: the one place that knows which adapter fills which port.

Nothing outside `entrypoints/` imports this module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from dependency_injector import containers, providers

from adapters.clock import SystemClock
from adapters.http import HttpExecutor, HttpExecutorSettings
from adapters.http.signing import Signer, parse_signing_secrets
from adapters.memory import InMemoryTaskStore, InMemoryWaker
from adapters.postgres import PostgresTaskStore, PostgresWaker, create_pool
from application.backfills import BackfillService
from application.calendars import CalendarService
from application.engine import TriggerLoop
from application.engine_settings import EngineSettings
from application.events import EventListing, EventSender, SenderSettings
from application.scheduling import SchedulingService
from application.sync import TaskSync
from domain.events import EventRules
from entrypoints.metrics import PrometheusObserver
from entrypoints.settings import ConfigurationError, Settings, load_settings, split_list

# SCHEDULER_ENGINE=apscheduler loads this module, which must expose `APSchedulerEngine`
# taking the same keyword arguments as `TriggerLoop` and filling the same ports.
APSCHEDULER_MODULE = "adapters.apscheduler"


def engine_settings(settings: Settings) -> EngineSettings:
    return EngineSettings(
        replica=settings.replica,
        batch_size=settings.batch_size,
        max_poll_interval=timedelta(seconds=settings.max_poll_interval),
        max_concurrent_runs=settings.max_concurrent_runs,
        drain_timeout=settings.drain_timeout,
        stalled_transaction_timeout=timedelta(seconds=settings.stalled_transaction_timeout),
        run_retention=timedelta(days=settings.run_retention_days),
    )


def executor_settings(settings: Settings) -> HttpExecutorSettings:
    return HttpExecutorSettings(
        allow=split_list(settings.target_allow),
        deny=split_list(settings.target_deny),
        signer=Signer(parse_signing_secrets(settings.signing_secret)),
    )


def memory_waker(store: InMemoryTaskStore) -> InMemoryWaker:
    return store.new_waker()


def event_rules(settings: Settings) -> EventRules:
    return EventRules(default_url=settings.events_url)


def sender_settings(settings: Settings) -> SenderSettings:
    return SenderSettings(poll_interval=settings.events_poll_interval)


def engine_busy(engine: Any) -> Callable[[], bool] | None:
    """What tells the event sender to give way (application/events.py): the native
    engine being behind. The APScheduler engine does not say; its sender never waits."""
    if isinstance(engine, TriggerLoop):
        return lambda: engine.behind
    return None


def apscheduler_engine(**ports: Any) -> Any:
    """The APScheduler engine, imported only when SCHEDULER_ENGINE=apscheduler selects it.

    Raises ConfigurationError when the adapter is not part of this installation.
    """
    try:
        module = importlib.import_module(APSCHEDULER_MODULE)
        engine_class = module.APSchedulerEngine
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            "SCHEDULER_ENGINE=apscheduler: the APScheduler engine adapter "
            f"({APSCHEDULER_MODULE}) is not available in this installation ({exc}); "
            "install the package with its 'apscheduler' extra "
            "(pip install -e '.[apscheduler]' from a checkout), or set SCHEDULER_ENGINE=native"
        ) from None
    return engine_class(**ports)


class Container(containers.DeclarativeContainer):
    settings = providers.Singleton(load_settings)
    store_kind = settings.provided.store_kind

    clock = providers.Singleton(SystemClock)
    observer = providers.Singleton(PrometheusObserver)

    pool = providers.Singleton(
        create_pool,
        settings.provided.database_url,
        max_size=settings.provided.pool_size,
        answer_limit=settings.provided.database_answer_timeout,
        name="scheduler",
        schema=settings.provided.db_schema,
    )
    events = providers.Callable(event_rules, settings)
    memory_store = providers.Singleton(InMemoryTaskStore, events=events)
    postgres_store = providers.Singleton(
        PostgresTaskStore, pool=pool, schema=settings.provided.db_schema, events=events
    )
    task_store = providers.Selector(store_kind, memory=memory_store, postgres=postgres_store)
    # The outbox of the same store: events are written with their causes.
    event_store = providers.Selector(
        store_kind, memory=memory_store.provided.outbox, postgres=postgres_store.provided.outbox
    )
    waker = providers.Selector(
        store_kind,
        memory=providers.Singleton(memory_waker, store=memory_store),
        postgres=providers.Singleton(
            PostgresWaker, settings.provided.database_url, settings.provided.db_schema
        ),
    )

    executor = providers.Singleton(
        HttpExecutor, providers.Callable(executor_settings, settings), clock=clock
    )

    _engine_ports = {
        "store": task_store,
        "waker": waker,
        "executor": executor,
        "clock": clock,
        "settings": providers.Callable(engine_settings, settings),
        "observer": observer,
    }
    engine = providers.Selector(
        settings.provided.engine,
        native=providers.Singleton(TriggerLoop, **_engine_ports),
        apscheduler=providers.Singleton(apscheduler_engine, **_engine_ports),
    )

    event_sender = providers.Singleton(
        EventSender,
        store=event_store,
        delivery=executor,
        clock=clock,
        observer=observer,
        settings=providers.Callable(sender_settings, settings),
        busy=providers.Callable(engine_busy, engine),
    )
    event_listing = providers.Singleton(EventListing, store=event_store)

    scheduling = providers.Singleton(
        SchedulingService,
        store=task_store,
        executor=executor,
        clock=clock,
        dispatcher=engine,
        replica=settings.provided.replica,
    )
    calendars = providers.Singleton(CalendarService, store=task_store, clock=clock)
    backfills = providers.Singleton(
        BackfillService,
        store=providers.Selector(
            store_kind,
            memory=memory_store.provided.backfills,
            postgres=postgres_store.provided.backfills,
        ),
        lookup=scheduling.provided.get_task,
        clock=clock,
        dispatcher=engine,
        replica=settings.provided.replica,
        calendar_store=task_store,
        retention=providers.Callable(engine_settings, settings).provided.run_retention,
    )
    sync = providers.Singleton(
        TaskSync, store=task_store, executor=executor, clock=clock, service=scheduling
    )


def build_container(settings: Settings | None = None) -> Container:
    """A container on `settings`, or on the environment when None."""
    container = Container()
    if settings is not None:
        container.settings.override(providers.Object(settings))
    return container
