"""The console's backfill form (docs/api.md, "Console"): the use case of
`POST /tasks/{id}/backfill`. A dry run is a page of its own, read with GET: the form posts,
and is redirected to it (303), so Back and Reload show it again without posting anything;
a real backfill is posted (`ConsoleActions.backfill`) and redirected to its runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter

from application.backfills import BackfillService
from application.scheduling import SchedulingService
from domain.backfills import Backfill, BackfillRequest
from domain.errors import InvalidRequest
from domain.tasks import Task
from entrypoints.http.console.forms import (
    backfill_request,
    form_text,
    named_with,
    zone_or_task_zone,
)
from entrypoints.http.console.rendering import render

# The form's fields as read: what it shows again when a value is refused.
BackfillValues = dict[str, str | bool]


def backfill_values(field: Callable[[str], Any], *, dry_run: bool) -> BackfillValues:
    """The form's fields, each read by `field` (a posted form's or a query's); a
    checkbox is on when sent as `on`."""
    return {
        "start": form_text(field("start")),
        "end": form_text(field("end")),
        "zone": form_text(field("zone")) or "task",
        "overlap": form_text(field("overlap")),
        "only_missing": field("only_missing") == "on",
        "dry_run": dry_run,
    }


def preview_path(ref: str, values: BackfillValues) -> str:
    """Where a dry run of `values` is shown (`BackfillPreview`)."""
    query = {key: str(values[key]) for key in ("start", "end", "zone", "overlap")}
    if values["only_missing"]:
        query["only_missing"] = "on"
    return f"/ui/tasks/{ref}/backfill?{urlencode(query)}"


async def backfill_or_refusal(
    request: Request[Any, Any, Any],
    ref: str,
    values: BackfillValues,
    backfills: BackfillService,
    scheduling: SchedulingService,
    actor: str | None = None,
) -> tuple[Task, BackfillRequest, Backfill] | Response[str]:
    """The backfill `values` ask for (made, or a dry run's answer), or the form again,
    as sent, each bad field named beside its input (422)."""
    task = await scheduling.get_task(ref)  # read before anything can be refused
    try:
        zone, zone_errors = zone_or_task_zone(str(values["zone"]), task.trigger.timezone)
        with named_with(zone_errors):
            wanted = backfill_request(
                values["start"],
                values["end"],
                overlap=values["overlap"],
                only_missing=bool(values["only_missing"]),
                dry_run=bool(values["dry_run"]),
                zone=zone,
            )
        made = await backfills.backfill(ref, wanted, actor=actor)
    except InvalidRequest as exc:
        errors = {e.field: e.message for e in exc.errors if e.field in values}
        others = [(e.field, e.message) for e in exc.errors if e.field not in values]
        return render(
            request,
            "backfill_form.html",
            status_code=422,
            task=task,
            values=values,
            errors=errors,
            others=others,
            live=False,
        )
    return task, wanted, made


class BackfillPreview(Controller):
    path = "/"

    @get("/tasks/{ref:str}/backfill", name="console:backfill-preview", include_in_schema=False)
    async def preview(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        backfills: NamedDependency[BackfillService],
        scheduling: NamedDependency[SchedulingService],
        # Bounded here only far out: a bad value is refused beside its field.
        start: Annotated[str, QueryParameter(max_length=2000)] = "",
        end: Annotated[str, QueryParameter(max_length=2000)] = "",
        zone: Annotated[str, QueryParameter(max_length=2000)] = "",
        overlap: Annotated[str, QueryParameter(max_length=2000)] = "",
        only_missing: Annotated[str, QueryParameter(max_length=2000)] = "",
    ) -> Response[str]:
        """A backfill's dry run: the occurrences it would run, nothing written."""
        asked = dict(start=start, end=end, zone=zone, overlap=overlap, only_missing=only_missing)
        values = backfill_values(asked.get, dry_run=True)
        answer = await backfill_or_refusal(request, ref, values, backfills, scheduling)
        if isinstance(answer, Response):
            return answer
        task, wanted, made = answer
        return render(
            request,
            "backfill.html",
            ref=ref,
            task=task,
            backfill=made,
            wanted=wanted,
            values=values,
            zone=task.trigger.timezone,
            live=False,
        )
