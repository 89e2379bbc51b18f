"""/tasks: create, read, change, pause, resume, delete, dry-run, fire now, history."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import BodyKwarg, FromQuery, HeaderParameter, PathParameter, QueryParameter

from application.ports import RenderedRequest, TaskFilter
from application.scheduling import SchedulingService
from domain.errors import InvalidRequest
from domain.preconditions import PutConditions
from domain.runs import RunStatus
from domain.tasks import Task, TaskSpec
from entrypoints.http.auth import MUTATION, actor_of
from entrypoints.http.body import MERGE_PATCH_JSON, JsonBody, MergePatchBody, refuse_body
from entrypoints.http.docs import ETAG, LOCATION, NO_BODY, errors
from entrypoints.http.models import (
    ExplainAnswer,
    FireTimes,
    HistoryItem,
    HistoryPage,
    RunPage,
    RunResource,
    TaskPage,
    TaskPatch,
    TaskResource,
)
from entrypoints.http.problems import PreconditionFailed
from entrypoints.http.query import NON_EMPTY, boolean_query

TaskRef = Annotated[str, PathParameter(description="The task's id or its name.")]
Limit = Annotated[int, QueryParameter(ge=1, le=500, description="Page size, 1 to 500.")]
Cursor = Annotated[
    str | None,
    QueryParameter(
        schema_extra=NON_EMPTY,
        description=(
            "`next_cursor` of the previous page; it carries the filters (another filter "
            "sent beside it is a 422)."
        ),
    ),
]
IfMatch = Annotated[
    str | None, HeaderParameter(name="If-Match", description='"<version>" from an ETag')
]
IfNoneMatch = Annotated[
    str | None,
    HeaderParameter(name="If-None-Match", description="`*`: only create, never replace"),
]


def task_response(task: Task, status_code: int = 200, **headers: str) -> Response[TaskResource]:
    """A Task answer: the resource and its `ETag`."""
    return Response(
        TaskResource.of(task),
        status_code=status_code,
        headers={"ETag": f'"{task.version}"', **headers},
    )


def put_conditions(if_match: str | None, if_none_match: str | None) -> PutConditions:
    """The conditions of a PUT by name: `If-Match` as `expected_version` reads it (`*`:
    only replace), `If-None-Match: *` (only create); any other `If-None-Match` is a 422."""
    if if_none_match is not None and if_none_match.strip() != "*":
        raise InvalidRequest("If-None-Match", "only `*` is understood")
    return PutConditions(
        version=expected_version(if_match),
        must_exist=if_match is not None and if_match.strip() == "*",
        only_create=if_none_match is not None,
    )


def expected_version(if_match: str | None, what: str = "task") -> int | None:
    """The version an `If-Match` header asks for; None for no header or `*`. Raises
    PreconditionFailed, about `what` the header is sent to write, for one naming none."""
    if if_match is None or if_match.strip() == "*":
        return None
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",")]
    # A version has far fewer digits than int() refuses to read (4,300).
    versions = [int(tag) for tag in tags if tag.isascii() and tag.isdigit() and len(tag) <= 20]
    if len(versions) != 1 or len(tags) != 1:
        raise PreconditionFailed(
            detail=f"If-Match {if_match!r} does not name one version this service issued",
            what=what,
        )
    return versions[0]


class TaskController(Controller):
    path = "/tasks"
    tags = ["tasks"]

    @post(
        "/",
        status_code=201,
        dto=JsonBody[TaskSpec],
        return_dto=None,
        operation_id="createTask",
        summary="Create a task",
        description=(
            "Stores a task and plans its first occurrence: the trigger's first fire time at "
            "or after now. 409 when the name is taken; 422 names every invalid field."
        ),
        response_headers=[ETAG, LOCATION],
        responses=errors(400, 409, 415, 422),
    )
    async def create_task(
        self,
        data: Annotated[TaskSpec, BodyKwarg()],
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
    ) -> Response[TaskResource]:
        task = await scheduling.create_task(data, actor=actor_of(request))
        return task_response(task, 201, Location=f"/tasks/{task.id}")

    @get(
        "/",
        guards=[boolean_query("enabled")],
        operation_id="listTasks",
        summary="List tasks",
        description=(
            "Ordered by creation, a page at a time. Filters: `enabled`, `tag`, `name` (a "
            "prefix); `next_cursor` carries them to the next page, and is null on the last."
        ),
        responses=errors(422, mutation=False),
    )
    async def list_tasks(
        self,
        scheduling: NamedDependency[SchedulingService],
        enabled: FromQuery[bool | None] = None,
        tag: FromQuery[str | None] = None,
        name: Annotated[str | None, QueryParameter(description="A name prefix.")] = None,
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> TaskPage:
        page = await scheduling.list_tasks(TaskFilter(enabled, tag, name), limit, cursor)
        return TaskPage(
            items=[TaskResource.of(t) for t in page.items], next_cursor=page.next_cursor
        )

    @get(
        "/{id:str}",
        operation_id="getTask",
        summary="Read a task",
        description="The task by its id or its name, with its version as the `ETag`.",
        response_headers=[ETAG],
        responses=errors(404, mutation=False),
    )
    async def get_task(
        self, id: TaskRef, scheduling: NamedDependency[SchedulingService]
    ) -> Response[TaskResource]:
        return task_response(await scheduling.get_task(id))

    @patch(
        "/{id:str}",
        dto=MergePatchBody[TaskPatch],  # type: ignore[valid-type]  # a generated model
        return_dto=None,
        operation_id="updateTask",
        summary="Change a task (JSON merge patch)",
        description=(
            "A JSON merge patch (RFC 7396) of the writable fields, sent as "
            "`application/merge-patch+json` or `application/json`. `trigger` and "
            "`target.auth` are replaced whole. With `If-Match`, the change applies only to "
            "that version."
        ),
        response_headers=[ETAG],
        responses=errors(400, 404, 409, 412, 415, 422),
    )
    async def update_task(
        self,
        id: TaskRef,
        data: Annotated[dict[str, Any], BodyKwarg(media_type=MERGE_PATCH_JSON)],
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
        if_match: IfMatch = None,
    ) -> Response[TaskResource]:
        version = expected_version(if_match)
        return task_response(
            await scheduling.update_task(id, data, version, actor=actor_of(request))
        )

    @delete(
        "/{id:str}",
        operation_id="deleteTask",
        summary="Delete a task (its runs stay)",
        description="The task stops firing; its runs stay readable at /runs/{id}. With "
        "`If-Match`, only while the task is at that version (412 otherwise, nothing deleted).",
        responses=errors(404, 412),
    )
    async def delete_task(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
        if_match: IfMatch = None,
    ) -> None:
        version = expected_version(if_match)
        await scheduling.delete_task(id, version, actor=actor_of(request))

    @post(
        "/{id:str}/pause",
        status_code=200,
        before_request=refuse_body,
        operation_id="pauseTask",
        summary="Pause (disable) a task",
        description="Sets `enabled` to false; `next_run_at` becomes null. A paused task "
        "answers unchanged.",
        response_headers=[ETAG],
        responses=errors(404, *NO_BODY),
    )
    async def pause_task(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
    ) -> Response[TaskResource]:
        return task_response(await scheduling.pause_task(id, actor=actor_of(request)))

    @post(
        "/{id:str}/resume",
        status_code=200,
        before_request=refuse_body,
        operation_id="resumeTask",
        summary="Resume (enable) a task",
        description="Sets `enabled` to true, resets `consecutive_failures` and plans the next "
        "occurrence at or after now. An enabled task answers unchanged.",
        response_headers=[ETAG],
        responses=errors(404, *NO_BODY),
    )
    async def resume_task(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        request: Request[Any, Any, Any],
    ) -> Response[TaskResource]:
        return task_response(await scheduling.resume_task(id, actor=actor_of(request)))

    @post(
        "/{id:str}/dry-run",
        status_code=200,
        before_request=refuse_body,
        opt={MUTATION: False},
        operation_id="dryRunTask",
        summary="Render the next run's request without sending it",
        description="Every header that would be sent, each secret replaced by `***`. "
        "Nothing is sent or written; a read-only token may call it.",
        responses=errors(404, *NO_BODY, mutation=False),
    )
    async def dry_run(
        self, id: TaskRef, scheduling: NamedDependency[SchedulingService]
    ) -> RenderedRequest:
        return await scheduling.dry_run(id)

    @post(
        "/{id:str}/runs",
        status_code=202,
        before_request=refuse_body,
        operation_id="fireTask",
        summary="Fire now, outside the schedule",
        description="A manual run, also for a paused task; `skipped` at max_running_instances.",
        response_headers=[LOCATION],
        responses=errors(404, *NO_BODY),
    )
    async def fire_now(
        self, id: TaskRef, scheduling: NamedDependency[SchedulingService]
    ) -> Response[RunResource]:
        run = await scheduling.fire_now(id)
        return Response(
            RunResource.of(run), status_code=202, headers={"Location": f"/runs/{run.id}"}
        )

    @get(
        "/{id:str}/runs",
        operation_id="listTaskRuns",
        summary="Run history, newest first",
        description="By `scheduled_for`, then id; each run appears once across the pages. "
        "`status` filters by one status.",
        responses=errors(404, 422, mutation=False),
    )
    async def list_runs(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        status: FromQuery[RunStatus | None] = None,
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> RunPage:
        page = await scheduling.list_runs(id, status, limit, cursor)
        return RunPage(items=[RunResource.of(r) for r in page.items], next_cursor=page.next_cursor)

    @get(
        "/{id:str}/upcoming",
        guards=[boolean_query("annotate")],
        operation_id="listUpcoming",
        summary="The next fire times",
        description="Un-jittered occurrences, at most 100.",
        responses=errors(404, 422, mutation=False),
    )
    async def upcoming(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        count: Annotated[int, QueryParameter(ge=1, le=100, description="At most 100.")] = 10,
        annotate: Annotated[
            bool,
            QueryParameter(description="add `occurrences` (flags, run_at) and `omitted`"),
        ] = False,
    ) -> FireTimes:
        if not annotate:
            return FireTimes(fire_times=await scheduling.upcoming(id, count))
        task, listed = await scheduling.upcoming_annotated(id, count)
        return FireTimes.annotated(listed, task.trigger.timezone, task)

    @get(
        "/{id:str}/history",
        operation_id="getTaskHistory",
        summary="Every version of a task, newest first",
        description="Each change of the task is a version: when, by whom (the API token's "
        "label), why (`api`, `auto_pause`, `calendar`) and the fields it changed, old and "
        "new. Version 1 is the creation (every field new); a deleted task's history stays "
        'readable by its id and ends with `{"deleted": [false, true]}`.',
        responses=errors(404, 422, mutation=False),
    )
    async def task_history(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> HistoryPage:
        page = await scheduling.task_history(id, limit, cursor)
        return HistoryPage(
            items=[HistoryItem.of(v) for v in page.items], next_cursor=page.next_cursor
        )

    @get(
        "/{id:str}/explain",
        operation_id="explainOccurrence",
        summary="What became of the occurrence at or just before an instant",
        description="Under the trigger in force at `at` (the task's history): the verdict, "
        "one sentence saying why, the runs that stood for it and the task version.",
        responses=errors(404, 422, mutation=False),
    )
    async def explain(
        self,
        id: TaskRef,
        scheduling: NamedDependency[SchedulingService],
        at: Annotated[
            datetime | None,
            QueryParameter(
                description="An instant with its offset, from 1970 to 8999 (another is a "
                "422 naming `at`); default now."
            ),
        ] = None,
    ) -> ExplainAnswer:
        return ExplainAnswer.of(await scheduling.explain(id, at))
