"""/triggers/preview: validate a bare trigger and list its fire times."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import BodyKwarg

from application.scheduling import SchedulingService
from entrypoints.http.auth import MUTATION
from entrypoints.http.body import JsonBody
from entrypoints.http.docs import errors
from entrypoints.http.models import FireTimes, PreviewRequest


class TriggerController(Controller):
    path = "/triggers"
    tags = ["triggers"]

    @post(
        "/preview",
        status_code=200,
        dto=JsonBody[PreviewRequest],
        return_dto=None,
        opt={MUTATION: False},
        operation_id="previewTrigger",
        summary="Preview a trigger's fire times",
        description="Nothing is created. Without `after`, the first fire time is the one a "
        "task created now would have (at or after now). With `annotate`, the answer adds "
        "`occurrences` and `omitted`; `calendars` lends a trigger the calendar it names "
        "(else the stored calendar of that name is used).",
        responses=errors(400, 415, 422, mutation=False),
    )
    async def preview(
        self,
        data: Annotated[PreviewRequest, BodyKwarg()],
        scheduling: NamedDependency[SchedulingService],
    ) -> FireTimes:
        trigger, listed = await scheduling.preview_stored(
            data.trigger, data.count, data.after, data.calendars
        )
        if data.annotate:
            return FireTimes.annotated(listed, trigger.timezone)
        return FireTimes(fire_times=[occurrence.at for occurrence in listed.occurrences])
