"""/runs: read one run, cancel a running one."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency
from litestar.params import PathParameter

from application.scheduling import SchedulingService
from domain.errors import RunNotFound
from entrypoints.http.docs import errors
from entrypoints.http.models import RunResource

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
        operation_id="cancelRun",
        summary="Cancel a running run",
        description="Cooperative: whichever replica runs it stops the call and records "
        "`cancelled`. 409 when the run is no longer running.",
        responses=errors(404, 409),
    )
    async def cancel_run(
        self, id: RunId, scheduling: NamedDependency[SchedulingService]
    ) -> Response[RunResource]:
        run = await scheduling.cancel_run(run_id(id))
        return Response(RunResource.of(run), status_code=202)
