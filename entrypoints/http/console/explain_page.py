"""The console's explain page: what became of a task's occurrence at or just before a
time, and why, through the use case `GET /tasks/{id}/explain` answers with (docs/api.md,
"Explain"). The question the console exists for: did it run, and if not, why not?"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from application.scheduling import SchedulingService
from domain.errors import InvalidRequest
from domain.explain import Explanation
from entrypoints.http.console.forms import named_with, wall_instant, zone_or_task_zone
from entrypoints.http.console.rendering import render

MAX_AT = 100  # characters of `at`
# The instants explain answers for (application.explain.explainable), in the words of
# its own refusal.
EXPLAINABLE = "must be an instant from 1970 to 8999"


def _with_offset(at: str) -> bool:
    """Whether `at` names an instant with its offset, which a `datetime-local` input
    cannot hold."""
    with suppress(ValueError):
        return datetime.fromisoformat(at.strip()).tzinfo is not None
    return False


class ExplainPage(Controller):
    path = "/"

    @get("/tasks/{ref:str}/explain", name="console:explain", include_in_schema=False)
    async def explain(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        # Bounded here only far out: a long value is refused beside its field below.
        at: Annotated[str, QueryParameter(max_length=2000)] = "",
        zone: Annotated[str, QueryParameter(max_length=2000)] = "task",
    ) -> Response[str]:
        task = await scheduling.get_task(ref)
        errors: dict[str, str] = {}
        explanation: Explanation | None = None
        asked: datetime | None = None
        # A bad zone is named beside the rest: `at` is read in the task's zone then.
        wall_zone, zone_errors = zone_or_task_zone(zone, task.trigger.timezone)
        try:
            with named_with(zone_errors):
                try:
                    if len(at) > MAX_AT:
                        raise InvalidRequest("at", f"is longer than {MAX_AT} characters")
                    asked = wall_instant("at", at, wall_zone, out_of_range=EXPLAINABLE)
                    asked = asked.astimezone(UTC) if asked else None
                except OverflowError:  # an offset that takes it past year 9999, or before 1
                    raise InvalidRequest("at", f"{EXPLAINABLE} (got {at.strip()!r})") from None
                except InvalidRequest as exc:  # say what was typed: the input may not show it
                    typed = at.strip() if len(at) <= MAX_AT else at.strip()[:MAX_AT] + "…"
                    raise InvalidRequest("at", f"{exc.message} (got {typed!r})") from None
            asked = asked or datetime.now(UTC).replace(microsecond=0)  # as the API: now
            explanation = await scheduling.explain(task.id, asked)
        except InvalidRequest as exc:
            errors = {error.field: error.message for error in exc.errors}
        shown_in_utc = not errors and _with_offset(at)
        return render(
            request,
            "explain.html",
            status_code=422 if errors else 200,
            task=task,
            zone=task.trigger.timezone,
            # An instant with an offset is shown in UTC, with UTC chosen: asked again, it
            # is the same instant (a wall time in the zone may come twice).
            at=f"{asked:%Y-%m-%dT%H:%M:%S}" if shown_in_utc and asked else at,
            chosen_zone="utc" if shown_in_utc else zone,
            asked=asked,
            explanation=explanation,
            errors=errors,
            live=False,
        )
