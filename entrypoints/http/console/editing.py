"""The console's task editor: a new task, a task's definition edited, a task deleted,
each through the same rules as the API (`POST /tasks`; `PUT /tasks/{name}` with
`If-Match`, on the task by its id, so that a changed name renames it, as `PATCH
/tasks/{id}` does; `DELETE /tasks/{id}` with `If-Match`).

A definition is edited as the JSON the API takes: what the task page shows under
"Definition", every field a person can set. Refused text comes back as typed, with
each error naming its field as the API's 422 does; nothing is written.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from litestar import Controller, Request, Response, get, post
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException, PermissionDeniedException
from litestar.params import FromPath
from litestar.response import Redirect

from application.scheduling import SchedulingService
from application.sync import TaskSync
from domain.errors import DuplicateTaskName, InvalidRequest, TaskNotFound, VersionConflict
from domain.history import TaskVersion
from domain.tasks import Task, TaskSpec
from entrypoints.http.auth import actor_of
from entrypoints.http.body import MAX_BODY_BYTES, refuse_nul, strictly
from entrypoints.http.console.access import current_session
from entrypoints.http.console.forms import form_text
from entrypoints.http.console.history import change_lines, without_literal_credentials
from entrypoints.http.console.rendering import render
from entrypoints.json_text import read_json

# What the new-task page starts from: a task that calls a URL every day at 02:30.
EXAMPLE: dict[str, Any] = {
    "name": "nightly-report",
    "description": "Builds the nightly report",
    "trigger": {"kind": "cron", "expression": "30 2 * * *", "timezone": "Europe/Berlin"},
    "target": {"url": "https://example.com/reports/nightly", "method": "POST"},
    "tags": ["reports"],
}
# Characters: twice what the API takes in a body (1 MiB), so that the definition of any
# task the API took, as the editor shows it, can be saved again unchanged.
MAX_DEFINITION = 2 * MAX_BODY_BYTES
# A form's body at most: the definition URL-encoded (up to 12 bytes a character).
MAX_FORM_BYTES = 12 * MAX_DEFINITION + 64 * 1024


def definition_text(fields: dict[str, Any]) -> str:
    """The definition as the editor shows it: indented, unless that would pass the
    editor's limit (a body near the API's, of many short items, grows several times
    when indented); then compact, which any task the API took fits."""
    text = json.dumps(fields, indent=2, ensure_ascii=False)
    return text if len(text) <= MAX_DEFINITION else json.dumps(fields, ensure_ascii=False)


def _writer_only(request: Request[Any, Any, Any]) -> None:
    """A form only a token that may change tasks can send is not shown to another."""
    if not current_session(request).can_change:
        raise PermissionDeniedException(detail="this token is read-only")


async def _writable(
    request: Request[Any, Any, Any], scheduling: SchedulingService, ref: str
) -> Task:
    """The task a form of the editor is for, to a token that may change it."""
    _writer_only(request)
    return await scheduling.get_task(ref)


def read_definition(text: str) -> dict[str, Any]:
    """The form's JSON text as an object. Raises InvalidRequest naming `definition`
    (with the line and column of a syntax error)."""
    if len(text) > MAX_DEFINITION:
        raise InvalidRequest("definition", f"is longer than {MAX_DEFINITION} characters")
    data = read_json(text, "definition")
    if not isinstance(data, dict):
        raise InvalidRequest("definition", "must be a JSON object, like the one shown at first")
    # The API's limit on the task itself (the text's own limit is for its indentation):
    # else the console would make tasks that no body of the API could send again.
    size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_BODY_BYTES:
        raise InvalidRequest(
            "definition",
            f"is {size:,} bytes as compact JSON; a task may be at most {MAX_BODY_BYTES:,}"
            " (1 MiB), as a body of the API",
        )
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
        task = await _writable(request, scheduling, ref)
        return _form(request, task, task.version, definition_text(_fields(task)), [])

    @get("/tasks/{ref:str}/delete", name="console:delete-form", include_in_schema=False)
    async def delete_form(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[str]:
        task = await _writable(request, scheduling, ref)
        return render(request, "delete.html", task=task, ref=ref, error=None, live=False)


class TaskEditing(Controller):
    """What the forms post (their CSRF token checked first, as every console action's)."""

    path = "/"

    @post(
        "/new-task",
        name="console:create",
        request_max_body_size=MAX_FORM_BYTES,
        include_in_schema=False,
    )
    async def create(
        self, request: Request[Any, Any, Any], scheduling: NamedDependency[SchedulingService]
    ) -> Response[Any]:
        text = form_text((await request.form()).get("definition"))
        try:
            spec = _spec(read_definition(text))
            task = await scheduling.create_task(spec, actor=actor_of(request))
        except InvalidRequest as exc:
            return _form(request, None, None, text, [(e.field, e.message) for e in exc.errors])
        except DuplicateTaskName as exc:
            return _form(request, None, None, text, [("name", str(exc))])
        return Redirect(f"/ui/tasks/{task.name}?done=created", status_code=303)

    @post(
        "/tasks/{ref:str}/edit",
        name="console:save",
        request_max_body_size=MAX_FORM_BYTES,
        include_in_schema=False,
    )
    async def save(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
        sync: NamedDependency[TaskSync],
    ) -> Response[Any]:
        """Replace the task's fields with the definition (fields left out take their
        defaults, as `PUT /tasks/{name}`; a changed name renames the task), only while
        the task the form was made for is still the one of this name, at the version
        the form was made from."""
        form = await request.form()
        text = form_text(form.get("definition"))
        made_for = form_text(form.get("task_id"))
        sent = form_text(form.get("version"))
        # A refused form keeps the task and version it was made from: sent again, it
        # still cannot overwrite a change made meanwhile, nor another task of the name.
        kept = int(sent) if sent.isdigit() else None
        try:
            task: Task | None = await scheduling.get_task(ref)
        except TaskNotFound:
            task = None
        if task is None or str(task.id) != made_for or kept is None:
            if kept is None:
                conflict = "this form lost the task and version it was made for"
            elif task is None:
                conflict = "the task this form was made for was deleted or renamed since"
            else:
                conflict = "the task this form was made for was replaced by another of its name"
            return _form(request, task, kept, text, [], made_for=made_for, conflict=conflict)
        try:
            data = read_definition(text)
            data.setdefault("name", task.name)  # a name given and changed renames the task
            spec = _spec(data)
            saved = await sync.replace_task(task.id, spec, kept, actor=actor_of(request))
        except InvalidRequest as exc:
            errors = [(e.field, e.message) for e in exc.errors]
            return _form(request, task, kept, text, errors, made_for=made_for)
        except DuplicateTaskName as exc:
            taken = [("name", f"{exc.name!r} is another task's name; nothing was written")]
            return _form(request, task, kept, text, taken, made_for=made_for)
        except TaskNotFound:
            conflict = "the task this form was made for was deleted or renamed since"
            return _form(request, None, kept, text, [], made_for=made_for, conflict=conflict)
        except VersionConflict:
            conflict = "the task changed since this form was opened"
            since = await _changes_since(scheduling, task, kept)
            return _form(
                request, task, kept, text, [], made_for=made_for, conflict=conflict, since=since
            )
        done = "saved" if saved.version != kept else "unchanged"
        return Redirect(f"/ui/tasks/{saved.name}?done={done}", status_code=303)

    @post("/tasks/{ref:str}/delete", name="console:delete", include_in_schema=False)
    async def delete(
        self,
        request: Request[Any, Any, Any],
        ref: FromPath[str],
        scheduling: NamedDependency[SchedulingService],
    ) -> Response[Any]:
        """Delete the task the confirmation was made for (by its id), only while it is
        at the version the confirmation showed."""
        form = await request.form()
        made_for, sent = form_text(form.get("task_id")), form_text(form.get("version"))
        try:
            task_id = UUID(made_for)
            if not sent.isdigit():
                raise VersionConflict(task_id, -1)  # a form without its version
            task = await scheduling.get_task(task_id)
            await scheduling.delete_task(task_id, if_match=int(sent), actor=actor_of(request))
        except VersionConflict:
            error = "the task changed since this page was opened: read it again, then decide"
            return await _refused_delete(request, ref, scheduling, error)
        except (ValueError, TaskNotFound):  # not an id (a form without it), or no such task
            error = "the task this page was made for is gone (deleted since it was opened)"
            return await _refused_delete(request, ref, scheduling, error)
        return Redirect(f"/ui/?{urlencode({'deleted': task.name})}", status_code=303)


async def _refused_delete(
    request: Request[Any, Any, Any], ref: str, scheduling: SchedulingService, error: str
) -> Response[str]:
    """The confirmation again, refused, for whatever task has the name now (none: the
    tasks page's link instead)."""
    try:
        task: Task | None = await scheduling.get_task(ref)
    except TaskNotFound:
        task = None
    return render(
        request, "delete.html", status_code=409, task=task, ref=ref, error=error, live=False
    )


# The versions a refused edit lists at most: what changed since its form was opened.
CHANGES_SHOWN = 20


async def _changes_since(
    scheduling: SchedulingService, task: Task, version: int
) -> list[tuple[TaskVersion, list[tuple[str, str | None, str]]]]:
    """The task's versions after `version`, newest first, each with its changed fields
    (as the task page's history shows them)."""
    page = await scheduling.task_history(task.id, CHANGES_SHOWN)
    return [(v, change_lines(v.changes)) for v in page.items if v.version > version]


def _spec(data: dict[str, Any]) -> TaskSpec:
    """`data` validated as the API validates a body; what the API answers 400 (nesting
    past what its parser reads) is a field error here, so the text comes back."""
    refuse_nul(data)  # named by its field, as the API's body reader names it
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
    *,
    made_for: str | None = None,
    conflict: str | None = None,
    since: list[tuple[TaskVersion, list[tuple[str, str | None, str]]]] | None = None,
) -> Response[str]:
    """The editor: a new task's (`task` None, no `conflict`), or an edit's, made for the
    task of id `made_for` (by default `task`'s) at `version`. A `conflict` (409) keeps
    the text and says why it was not saved; the text can go nowhere else."""
    status = 409 if conflict else 422 if errors else 200
    return render(
        request,
        "edit.html",
        status_code=status,
        task=task,
        editing=task is not None,
        made_for=made_for or (str(task.id) if task else ""),
        version=version,
        text=text,
        errors=errors,
        conflict=conflict,
        since=since or [],
        max_definition=MAX_DEFINITION,
        live=False,
    )
