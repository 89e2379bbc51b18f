"""The console's task editor: a new task, a task's definition edited, a task deleted,
each through the same use case as the API (`POST /tasks`, `PUT /tasks/{name}` with
`If-Match`, `DELETE /tasks/{id}` with `If-Match`).

A definition is edited as the JSON the API takes: what the task page shows under
"Definition", every field a person can set. Refused text comes back as typed, with
each error naming its field as the API's 422 does; nothing is written.
"""

from __future__ import annotations

import json
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException, PermissionDeniedException
from litestar.params import FromPath
from litestar.response import Redirect

from application.scheduling import SchedulingService
from application.sync import TaskSync
from domain.errors import DuplicateTaskName, InvalidRequest, VersionConflict
from domain.preconditions import PutConditions
from domain.tasks import Task, TaskSpec
from entrypoints.http.auth import actor_of
from entrypoints.http.body import MAX_NESTING, strictly
from entrypoints.http.console.access import current_session
from entrypoints.http.console.history import without_literal_credentials
from entrypoints.http.console.rendering import render

# What the new-task page starts from: a task that calls a URL every day at 02:30.
EXAMPLE: dict[str, Any] = {
    "name": "nightly-report",
    "description": "Builds the nightly report",
    "trigger": {"kind": "cron", "expression": "30 2 * * *", "timezone": "Europe/Berlin"},
    "target": {"url": "https://example.com/reports/nightly", "method": "POST"},
    "tags": ["reports"],
}
MAX_DEFINITION = 256 * 1024  # characters: far more than a task needs


def definition_text(fields: dict[str, Any]) -> str:
    return json.dumps(fields, indent=2, ensure_ascii=False)


def _writer_only(request: Request[Any, Any, Any]) -> None:
    """A form only a token that may change tasks can send is not shown to another."""
    if not current_session(request).can_change:
        raise PermissionDeniedException(detail="this token is read-only")


def read_definition(text: str) -> dict[str, Any]:
    """The form's JSON text as an object. Raises InvalidRequest naming `definition`
    (with the line and column of a syntax error)."""
    if len(text) > MAX_DEFINITION:
        raise InvalidRequest("definition", f"is longer than {MAX_DEFINITION} characters")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InvalidRequest("definition", f"is not JSON: {exc.msg} at {where}") from None
    except RecursionError:
        raise InvalidRequest("definition", f"nests deeper than {MAX_NESTING}") from None
    if not isinstance(data, dict):
        raise InvalidRequest("definition", "must be a JSON object, like the one shown at first")
    return data


class TaskEditorForms(Controller):
    """The forms (GET): only for a token that may change tasks."""

    path = "/"

    @get("/new-task", name="console:new-task", include_in_schema=False)
    async def new_task_form(self, request: Request[Any, Any, Any]) -> Response[str]:
        _writer_only(request)
        return _form(request, None, None, definition_text(EXAMPLE), [])

    @get("/tasks/{ref:str}/edit", name="console:edit", include_in_schema=False)
    async def edit_form(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[str]:
        _writer_only(request)
        task = await scheduling.get_task(ref)
        return _form(request, task, task.version, definition_text(_fields(task)), [])

    @get("/tasks/{ref:str}/delete", name="console:delete-form", include_in_schema=False)
    async def delete_form(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[str]:
        _writer_only(request)
        task = await scheduling.get_task(ref)
        return render(request, "delete.html", task=task, error=None, live=False)


class TaskEditing(Controller):
    """What the forms post (their CSRF token checked first, as every console action's)."""

    path = "/"

    @post("/new-task", name="console:create", include_in_schema=False)
    async def create(
        self, request: Request[Any, Any, Any], scheduling: NamedDependency[SchedulingService]
    ) -> Response[Any]:
        text = _text((await request.form()).get("definition"))
        try:
            spec = _spec(read_definition(text))
            task = await scheduling.create_task(spec, actor=actor_of(request))
        except InvalidRequest as exc:
            return _form(request, None, None, text, [(e.field, e.message) for e in exc.errors])
        except DuplicateTaskName as exc:
            return _form(request, None, None, text, [("name", str(exc))])
        return Redirect(f"/ui/tasks/{task.name}?done=created", status_code=303)

    @post("/tasks/{ref:str}/edit", name="console:save", include_in_schema=False)
    async def save(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        sync: NamedDependency[TaskSync],
    ) -> Response[Any]:
        """Replace the task's fields with the definition (fields left out take their
        defaults, as `PUT /tasks/{name}`), only while it is at the version the form
        was made from."""
        form = await request.form()
        text = _text(form.get("definition"))
        task = await scheduling.get_task(ref)
        sent = _text(form.get("version"))
        # A refused form keeps the version it was made from: sent again, it still
        # cannot overwrite a change made meanwhile.
        kept = int(sent) if sent.isdigit() else None
        if kept is None:
            return _form(request, task, None, text, [("version", "the form lost its version")])
        try:
            version = kept
            data = read_definition(text)
            if data.setdefault("name", task.name) != task.name:
                raise InvalidRequest(
                    "name", f"must stay {task.name!r} here (PATCH /tasks/{{id}} renames a task)"
                )
            spec = _spec(data)
            conditions = PutConditions(version=version, must_exist=True)
            saved, _ = await sync.put_task(spec, conditions, actor=actor_of(request))
        except InvalidRequest as exc:
            return _form(request, task, kept, text, [(e.field, e.message) for e in exc.errors])
        except VersionConflict:
            changed = (
                "the task changed since this form was opened; your text is kept here:"
                " copy what you need, then open the editor again for the current definition"
            )
            return _form(request, task, kept, text, [("version", changed)], status_code=409)
        done = "saved" if saved.version != version else "unchanged"
        return Redirect(f"/ui/tasks/{saved.name}?done={done}", status_code=303)

    @post("/tasks/{ref:str}/delete", name="console:delete", include_in_schema=False)
    async def delete(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[Any]:
        """Delete the task, only while it is at the version the confirmation showed."""
        task = await scheduling.get_task(ref)
        sent = _text((await request.form()).get("version"))
        try:
            if not sent.isdigit():
                raise VersionConflict(task.id, -1)  # a form without its version
            await scheduling.delete_task(task.id, if_match=int(sent), actor=actor_of(request))
        except VersionConflict:
            error = "the task changed since this page was opened: read it again, then decide"
            return render(
                request, "delete.html", status_code=409, task=task, error=error, live=False
            )
        return Redirect("/ui/?done=deleted", status_code=303)


def _spec(data: dict[str, Any]) -> TaskSpec:
    """`data` validated as the API validates a body; what the API answers 400 (nesting
    past what its parser reads) is a field error here, so the text comes back."""
    try:
        return strictly(TaskSpec, data)
    except HTTPException as exc:
        raise InvalidRequest("definition", exc.detail) from None


def _fields(task: Task) -> dict[str, Any]:
    """The definition as the editor shows it: every writable field, a literal credential
    header of an old task as `***` (which is refused on saving: such headers are)."""
    return without_literal_credentials(task.spec().model_dump(mode="json"))


def _form(
    request: Request[Any, Any, Any],
    task: Task | None,
    version: int | None,
    text: str,
    errors: list[tuple[str, str]],
    status_code: int | None = None,
) -> Response[str]:
    return render(
        request,
        "edit.html",
        status_code=status_code or (422 if errors else 200),
        task=task,
        version=version,
        text=text,
        errors=errors,
        live=False,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
