"""/tasks/{id}/backfill, /backfills/{id} and /backfills/{id}/cancel (docs/policies.md,
"Backfill")."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal
from uuid import UUID

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import BodyKwarg, PathParameter
from pydantic import BaseModel, Field

from application.backfills import BackfillService
from domain.backfills import Backfill, BackfillOverlap, BackfillRequest, BackfillState
from entrypoints.http.auth import actor_of
from entrypoints.http.body import JsonBody, refuse_body
from entrypoints.http.docs import NO_BODY, also, errors
from entrypoints.http.models import BackfillBody, RunResource, UtcDatetime


class BackfillAnswer(BaseModel):
    backfill_id: UUID
    runs: int = Field(description="how many runs were (with dry_run: would be) made")
    occurrences: list[UtcDatetime] = Field(description="the occurrences they stand for")
    items: list[RunResource] = Field(description="the runs, oldest occurrence first")

    @classmethod
    def of(cls, backfill: Backfill) -> BackfillAnswer:
        return cls(
            backfill_id=backfill.backfill_id,
            runs=len(backfill.made),
            occurrences=backfill.occurrences,
            items=[RunResource.of(claimed.run) for claimed in backfill.made],
        )


class BackfillRuns(BaseModel):
    total: int = Field(description="runs the backfill made")
    finished: int = Field(description="those that ended (any status but queued and running)")
    pending: int = Field(description="those still queued or running")
    by_status: dict[str, int] = Field(description="the runs counted by status")


class BackfillResource(BaseModel):
    """A backfill and how far its runs got (docs/api.md, "GET /backfills/{id}")."""

    id: UUID
    task_id: UUID
    task_name: str = Field(description="the task's name when the backfill was made")
    start: UtcDatetime
    end: UtcDatetime
    overlap: BackfillOverlap
    only_missing: bool
    created_at: UtcDatetime
    actor: str | None = Field(description="the label of the token that asked for it")
    status: Literal["active", "finished", "cancelled"] = Field(
        description='"active" while a run is queued or running, then "finished"; '
        '"cancelled" once cancelled while active'
    )
    finished_at: UtcDatetime | None = Field(
        description="when it finished or was cancelled; null while active"
    )
    runs: BackfillRuns

    @classmethod
    def of(cls, state: BackfillState) -> BackfillResource:
        """The record's fields, with the status and counts its runs give now."""
        runs = BackfillRuns(
            total=state.record.runs,
            finished=state.finished,
            pending=state.pending,
            by_status=state.by_status,
        )
        fields = dataclasses.asdict(state.record) | {"status": state.status, "runs": runs}
        return cls.model_validate(fields)


# The path parameter of /backfills/{id} and /backfills/{id}/cancel.
BackfillId = Annotated[str, PathParameter(description="The backfill's id.")]


class Cancelled(BaseModel):
    cancelled: int = Field(description="queued runs cancelled plus running ones asked to stop")


class BackfillController(Controller):
    path = "/"
    tags = ["backfills"]

    @post(
        "/tasks/{id:str}/backfill",
        status_code=202,
        dto=JsonBody[BackfillBody],
        return_dto=None,
        operation_id="backfillTask",
        summary="Run a past range of a task's occurrences again",
        description="One run per fire time of the task's trigger in `[start, end]` (at most "
        "1,000, none in the future), each with its occurrence's `scheduled_for` and so its "
        "`Idempotency-Key`, all written at once. 202 with the runs; with `dry_run`, 200 "
        "and nothing written.",
        responses=errors(400, 404, 415, 422)
        | also(200, BackfillAnswer, "With `dry_run`: what would be made; nothing written."),
    )
    async def backfill(
        self,
        id: Annotated[str, PathParameter(description="The task's id or name.")],
        data: Annotated[BackfillBody, BodyKwarg()],
        backfills: NamedDependency[BackfillService],
        request: Request[Any, Any, Any],
    ) -> Response[BackfillAnswer]:
        wanted = BackfillRequest(
            data.start, data.end, data.only_missing, data.overlap, data.dry_run
        )
        made = await backfills.backfill(id, wanted, actor=actor_of(request))
        return Response(BackfillAnswer.of(made), status_code=200 if data.dry_run else 202)

    @get(
        "/backfills/{id:str}",
        operation_id="getBackfill",
        summary="A backfill and how far its runs got",
        description="Its request, status and runs counted (total, finished, pending, by "
        "status). 404 for an unknown id (a dry run's included).",
        responses=errors(404, mutation=False),
    )
    async def get_backfill(
        self,
        id: BackfillId,
        backfills: NamedDependency[BackfillService],
    ) -> BackfillResource:
        return BackfillResource.of(await backfills.get(id))

    @post(
        "/backfills/{id:str}/cancel",
        status_code=202,
        before_request=refuse_body,
        operation_id="cancelBackfill",
        summary="Cancel a backfill",
        description="Its queued runs end `cancelled` uncalled; its running ones are asked "
        "to stop (as `POST /runs/{id}/cancel`); an active backfill becomes `cancelled`. 404 "
        "for an unknown id.",
        responses=errors(404, *NO_BODY),
    )
    async def cancel(
        self,
        id: BackfillId,
        backfills: NamedDependency[BackfillService],
    ) -> Response[Cancelled]:
        return Response(Cancelled(cancelled=await backfills.cancel(id)), status_code=202)
