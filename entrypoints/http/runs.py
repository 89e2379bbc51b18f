"""/runs: every task's runs, one run, cancelling a running one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.params import PathParameter, QueryParameter

from application.scheduling import SchedulingService
from domain.errors import RunNotFound
from domain.runs import RunStatus
from entrypoints.http.body import refuse_body
from entrypoints.http.docs import NO_BODY, errors
from entrypoints.http.models import RunPage, RunResource
from entrypoints.http.query import NON_EMPTY

RunId = Annotated[str, PathParameter(description="The run's id.")]


def run_id(value: str) -> UUID:
    """The run id in a path; anything that is not a UUID names no run (404)."""
    try:
        return UUID(value)
    except ValueError:
        raise RunNotFound(value) from None


class RunController(Controller):
    path = "/runs"
    tags = ["runs"]

    @get(
        "/",
        operation_id="listRuns",
        summary="Runs of every task, newest first",
        description="Ordered by (`scheduled_for`, `id`), newest first; every run appears "
        "exactly once across pages, also while runs are being written. Filters combine "
        "(all must hold); the cursor carries them.",
        responses=errors(422, mutation=False),
    )
    async def list_runs(
        self,
        scheduling: NamedDependency[SchedulingService],
        status: Annotated[RunStatus | None, QueryParameter(description="One status.")] = None,
        task: Annotated[
            str | None,
            QueryParameter(
                description="A task's id (its runs stay listed after it is deleted) or name."
            ),
        ] = None,
        tag: Annotated[
            str | None, QueryParameter(description="Runs of the tasks carrying this tag.")
        ] = None,
        since: Annotated[
            datetime | None,
            QueryParameter(description="`scheduled_for` at or after this instant (with offset)."),
        ] = None,
        until: Annotated[
            datetime | None,
            QueryParameter(description="`scheduled_for` at or before this instant (with offset)."),
        ] = None,
        backfill: Annotated[
            str | None, QueryParameter(description="Runs made by this backfill (its id).")
        ] = None,
        limit: Annotated[
            int, QueryParameter(ge=1, le=500, description="Page size, 1 to 500.")
        ] = 50,
        cursor: Annotated[
            str | None,
            QueryParameter(
                schema_extra=NON_EMPTY,
                description=(
                    "`next_cursor` of the previous page; it carries the filters (another filter "
                    "sent beside it is a 422)."
                ),
            ),
        ] = None,
    ) -> RunPage:
        page = await scheduling.list_all_runs(
            status=status,
            task=task,
            tag=tag,
            since=since,
            until=until,
            backfill=backfill,
            limit=limit,
            cursor=cursor,
        )
        return RunPage(items=[RunResource.of(r) for r in page.items], next_cursor=page.next_cursor)

    @get(
        "/{id:str}",
        operation_id="getRun",
        summary="Read a run",
        description="One run, also after its task was deleted.",
        responses=errors(404, mutation=False),
    )
    async def get_run(
        self, id: RunId, scheduling: NamedDependency[SchedulingService]
    ) -> RunResource:
        return RunResource.of(await scheduling.get_run(run_id(id)))

    @post(
        "/{id:str}/cancel",
        status_code=202,
        before_request=refuse_body,
        operation_id="cancelRun",
        summary="Cancel a running run",
        description="Cooperative: whichever replica runs it stops the call and records "
        "`cancelled`. 409 when the run is no longer running.",
        responses=errors(404, 409, *NO_BODY),
    )
    async def cancel_run(
        self, id: RunId, scheduling: NamedDependency[SchedulingService]
    ) -> Response[RunResource]:
        run = await scheduling.cancel_run(run_id(id))
        return Response(RunResource.of(run), status_code=202)
