"""The console's explain page: what became of a task's occurrence at or just before a
time, and why, through the use case `GET /tasks/{id}/explain` answers with (docs/api.md,
"Explain"). The question the console exists for: did it run, and if not, why not?"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from application.scheduling import SchedulingService
from domain.errors import InvalidRequest
from domain.explain import Explanation
from entrypoints.http.console.forms import wall_instant
from entrypoints.http.console.rendering import render

# The form's `zone`: the wall time is read in the task's zone, or in UTC.
ZONES = ("task", "utc")


class ExplainPage(Controller):
    path = "/"

    @get("/tasks/{ref:str}/explain", name="console:explain", include_in_schema=False)
    async def explain(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        at: Annotated[str, QueryParameter(max_length=100)] = "",
        zone: Annotated[str, QueryParameter(max_length=20)] = "task",
    ) -> Response[str]:
        task = await scheduling.get_task(ref)
        errors: dict[str, str] = {}
        explanation: Explanation | None = None
        asked: datetime | None = None
        try:
            if zone not in ZONES:
                raise InvalidRequest("zone", "must be task or utc")
            wall_zone = task.trigger.timezone if zone == "task" else "UTC"
            try:
                asked = wall_instant("at", at, wall_zone)
            except InvalidRequest as exc:  # say what was typed: the input may not show it
                raise InvalidRequest("at", f"{exc.message} (got {at.strip()!r})") from None
            asked = asked or datetime.now(UTC).replace(microsecond=0)  # as the API: now
            explanation = await scheduling.explain(task.id, asked)
        except InvalidRequest as exc:
            errors = {error.field: error.message for error in exc.errors}
        return render(
            request,
            "explain.html",
            status_code=422 if errors else 200,
            task=task,
            zone=task.trigger.timezone,
            at=at,
            chosen_zone=zone,
            asked=asked,
            explanation=explanation,
            errors=errors,
            live=False,
        )
