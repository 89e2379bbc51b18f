"""The Litestar application, built by a factory (never at import)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.di import Provide

from application.backfills import BackfillService
from application.calendars import CalendarService
from application.events import EventListing
from application.scheduling import SchedulingService
from application.sync import TaskSync
from entrypoints.container import Container, build_container
from entrypoints.http.auth import FailureLimiter, bearer_guard
from entrypoints.http.backfills import BackfillController
from entrypoints.http.body import MAX_BODY_BYTES
from entrypoints.http.calendars import CalendarController
from entrypoints.http.console import console_router
from entrypoints.http.console.errors import UNROUTED_HANDLERS
from entrypoints.http.docs import SECURITY, openapi_config
from entrypoints.http.events import EventController
from entrypoints.http.guards import in_turn
from entrypoints.http.health import HEALTH_HANDLERS, Readiness, StorePing
from entrypoints.http.methods import answer_options
from entrypoints.http.nul import nul_guard
from entrypoints.http.preview import TriggerController
from entrypoints.http.problems import EXCEPTION_HANDLERS
from entrypoints.http.query import known_query
from entrypoints.http.runs import RunController
from entrypoints.http.sync import SyncController
from entrypoints.http.tasks import TaskController
from entrypoints.metrics import PrometheusObserver
from entrypoints.runtime import running


def create_app(
    container: Container | None = None,
    *,
    run_engine: bool = True,
    manage_runtime: bool = True,
    operations_only: bool = False,
) -> Litestar:
    """The HTTP API on `container` (from the environment when None).

    With `manage_runtime`, its lifespan holds the process's resources
    (`entrypoints.runtime.running`) and, when `run_engine`, the engine, which then fires
    tasks in this process. Without it the caller holds them (`imbi-scheduler serve` does,
    so that shutdown drains the engine after the server stopped); `run_engine` then only
    says whether /readyz checks the engine. `operations_only` serves /healthz, /readyz
    and /metrics alone (`serve --no-api`): no API, console or OpenAPI document.
    """
    if container is None:
        container = build_container()
    settings = container.settings()

    def scheduling() -> SchedulingService:
        return container.scheduling()

    def backfills() -> BackfillService:
        return container.backfills()

    def sync() -> TaskSync:
        return container.sync()

    def event_listing() -> EventListing:
        return container.event_listing()

    def calendars() -> CalendarService:
        return container.calendars()

    ping = StorePing(container.task_store())

    def readiness() -> Readiness:
        return Readiness(ping, container.engine() if run_engine else None)

    def observer() -> PrometheusObserver:
        return container.observer()

    def lifespan(_: Litestar) -> AbstractAsyncContextManager[None]:
        return running(container, engine=run_engine)

    limiter = FailureLimiter(settings.auth_failure_limit, settings.auth_failure_window)
    api = Router(
        path="/",
        route_handlers=[
            TaskController,
            SyncController,
            RunController,
            BackfillController,
            EventController,
            TriggerController,
            CalendarController,
        ],
        guards=[in_turn(bearer_guard(settings.grants, limiter), nul_guard, known_query)],
        security=SECURITY,
    )
    routes = [api, console_router(settings.grants, limiter)] if not operations_only else []
    return Litestar(
        route_handlers=[*routes, *HEALTH_HANDLERS],
        dependencies={
            "scheduling": Provide(scheduling, sync_to_thread=False),
            "sync": Provide(sync, sync_to_thread=False),
            "backfills": Provide(backfills, sync_to_thread=False),
            "event_listing": Provide(event_listing, sync_to_thread=False),
            "calendars": Provide(calendars, sync_to_thread=False),
            "readiness": Provide(readiness, sync_to_thread=False),
            "observer": Provide(observer, sync_to_thread=False),
        },
        exception_handlers={**EXCEPTION_HANDLERS, **UNROUTED_HANDLERS},
        before_request=answer_options,
        lifespan=[lifespan] if manage_runtime else [],
        openapi_config=None if operations_only else openapi_config(),
        state=State({"observer": container.observer()}),
        request_max_body_size=MAX_BODY_BYTES,
        logging_config=None,
        debug=False,
    )
