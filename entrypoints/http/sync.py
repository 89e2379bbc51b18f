"""Declarative sync: `PUT /tasks/{name}` and `POST /tasks/apply`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, Response, post, put
from litestar.di import NamedDependency
from litestar.params import BodyKwarg, PathParameter
from pydantic import BaseModel, Field, JsonValue

from application.sync import TaskSync
from domain.errors import InvalidRequest
from domain.tasks import TaskSpec
from domain.validation import FieldError
from entrypoints.http.auth import MUTATION, actor_of, refuse_read_only
from entrypoints.http.body import JsonObjectBody, strictly
from entrypoints.http.docs import ETAG, also, errors
from entrypoints.http.models import (
    ApplyRequest,
    TaskResource,
    TaskSpecByName,
    redacted_changes,
)
from entrypoints.http.tasks import IfMatch, IfNoneMatch, put_conditions, task_response

# A deploy pipeline applies its whole list in one request: 10,000 tasks of about 1 KiB
# each fit (docs/api.md, "Declarative sync"); every other route keeps the 1 MiB limit.
APPLY_MAX_BODY_BYTES = 16 * 1024 * 1024


class ApplyAnswer(BaseModel):
    created: list[str]
    updated: list[str]
    unchanged: list[str]
    deleted: list[str]
    # [old, new] as a list of two: a tuple's `prefixItems` nested under two maps was
    # read by Schemathesis as an invalid schema.
    changes: dict[str, dict[str, Annotated[list[JsonValue], Field(min_length=2, max_length=2)]]] = (
        Field(
            description="Each updated task's changed fields, by name: `[old, new]`, as its "
            "history version records them (a dry run shows them before anything is written)."
        )
    )


class SyncController(Controller):
    path = "/tasks"
    tags = ["tasks"]

    @put(
        "/{id:str}",
        dto=JsonObjectBody[TaskSpecByName],  # type: ignore[valid-type]  # a generated model
        return_dto=None,
        operation_id="putTask",
        summary="Create or replace a task by name",
        description=(
            "Creates the task with this name, or replaces its writable fields whole: fields "
            "left out take their defaults. 201 when created; 200 when replaced, or unchanged "
            "(then its version stays). `If-Match` replaces only that version; "
            "`If-None-Match: *` only creates (412 when the task exists). A `name` in the "
            "body must be the one in the path."
        ),
        response_headers=[ETAG],
        responses=errors(400, 412, 415, 422) | also(201, TaskResource, "Created."),
    )
    async def put_task(
        self,
        id: Annotated[str, PathParameter(description="The task's name.")],
        data: Annotated[dict[str, Any], BodyKwarg()],
        sync: NamedDependency[TaskSync],
        request: Request[Any, Any, Any],
        if_match: IfMatch = None,
        if_none_match: IfNoneMatch = None,
    ) -> Response[TaskResource]:
        if "name" in data and data["name"] != id:
            raise InvalidRequest("name", "must be the name in the path, or left out")
        if data.get("name") is None:
            data = {**data, "name": id}
        spec = strictly(TaskSpec, data)
        conditions = put_conditions(if_match, if_none_match)
        task, created = await sync.put_task(spec, conditions, actor=actor_of(request))
        return task_response(task, 201 if created else 200)

    @post(
        "/apply",
        status_code=200,
        request_max_body_size=APPLY_MAX_BODY_BYTES,
        dto=JsonObjectBody[ApplyRequest],
        return_dto=None,
        operation_id="applyTasks",
        summary="Make the stored tasks match a list, in one transaction",
        description=(
            "Creates the tasks missing, replaces the changed ones (fields left out take "
            "their defaults), leaves the equal ones and their versions; with `prune`, "
            "deletes the stored tasks not listed that the selector picks. All or nothing: "
            "one bad spec is a 422 naming `tasks[i].field` and nothing is written. With "
            "`dry_run`, the same answer and nothing written; a read-only token may ask "
            "for the dry run only."
        ),
        responses=errors(400, 409, 412, 415, 422),
        # A read-only token may ask for the dry run (what a reviewer reads before the
        # deploy), and nothing more: checked below, before the body is.
        opt={MUTATION: False},
    )
    async def apply(
        self,
        data: Annotated[dict[str, Any], BodyKwarg()],
        sync: NamedDependency[TaskSync],
        request: Request[Any, Any, Any],
    ) -> ApplyAnswer:
        if data.get("dry_run") is not True:
            refuse_read_only(request, 'it may only ask for a dry run ("dry_run": true)')
        parsed = parse_apply(data)
        rest = parsed.rest
        if rest is None:  # prune, selector or dry_run refused: nothing to decide with
            raise InvalidRequest.of(parsed.problems)
        tag = rest.selector.tag if rest.selector else None
        result = await sync.apply(
            parsed.specs,
            prune=rest.prune,
            selector_tag=tag,
            dry_run=rest.dry_run,
            actor=actor_of(request),
            indices=parsed.indices,
            refused=parsed.problems,
        )
        return ApplyAnswer(
            created=result.created,
            updated=result.updated,
            unchanged=result.unchanged,
            deleted=result.deleted,
            changes={name: redacted_changes(c) for name, c in result.changes.items()},
        )


@dataclass(frozen=True, slots=True)
class ParsedApply:
    """An apply body read: the specs that validated, each with its index in `tasks`, the
    rest of the body (None when it did not validate) and every field refused so far."""

    specs: list[TaskSpec]
    indices: list[int]
    rest: ApplyRequest | None
    problems: list[FieldError]


def parse_apply(body: dict[str, Any]) -> ParsedApply:
    """The specs of an apply body, each validated on its own so that its errors are
    named `tasks[i].field`, and the rest of the body. The specs that validate go on to
    the checks the use case makes (the guard, a past one-shot, a calendar, a repeated
    name), so that one 422 names every refused task."""
    problems: list[FieldError] = []
    items = body.get("tasks")
    specs: list[TaskSpec] = []
    indices: list[int] = []
    if not isinstance(items, list):
        problems.append(FieldError("tasks", "must be a list of task specs"))
        items = []
    for i, item in enumerate(items):
        try:
            specs.append(strictly(TaskSpec, item, prefix=f"tasks[{i}]"))
            indices.append(i)
        except InvalidRequest as exc:
            problems.extend(exc.errors)
    rest = None
    try:
        rest = strictly(ApplyRequest, {**body, "tasks": []})
    except InvalidRequest as exc:
        problems.extend(exc.errors)
    return ParsedApply(specs, indices, rest, problems)
