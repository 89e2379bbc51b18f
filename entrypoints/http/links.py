"""OpenAPI links: how the answer of one operation leads to the next (a created task to
reading, changing, pausing, firing, backfilling, explaining and listing it; a fired run
to reading and cancelling it; a backfill to reading and cancelling it). Generated
clients and stateful API testers follow them."""

from __future__ import annotations

from typing import Any

_ID_OF_THE_ANSWER = "$response.body#/id"
# Everything that can be done with a task, once its id is known.
_TASK_OPERATIONS = (
    "getTask",
    "updateTask",
    "pauseTask",
    "resumeTask",
    "fireTask",
    "listTaskRuns",
    "listUpcoming",
    "dryRunTask",
    "backfillTask",
    "explainOccurrence",
    "getTaskHistory",
    "deleteTask",
)
_RUN_OPERATIONS = ("getRun", "cancelRun")
_BACKFILL_OPERATIONS = ("getBackfill", "cancelBackfill")

# operationId -> (status of the answer that carries the id, where in its body the id
# is, operations it links to, each taking that id as its `id`).
LINKS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "createTask": ("201", _ID_OF_THE_ANSWER, _TASK_OPERATIONS),
    "getTask": ("200", _ID_OF_THE_ANSWER, _TASK_OPERATIONS[1:]),
    "updateTask": ("200", _ID_OF_THE_ANSWER, _TASK_OPERATIONS[:1] + _TASK_OPERATIONS[2:]),
    "pauseTask": ("200", _ID_OF_THE_ANSWER, ("resumeTask", "getTask", "fireTask")),
    "resumeTask": ("200", _ID_OF_THE_ANSWER, ("pauseTask", "getTask", "fireTask")),
    "fireTask": ("202", _ID_OF_THE_ANSWER, _RUN_OPERATIONS),
    "getRun": ("200", _ID_OF_THE_ANSWER, ("cancelRun",)),
    "backfillTask": ("202", "$response.body#/backfill_id", _BACKFILL_OPERATIONS),
    "getBackfill": ("200", _ID_OF_THE_ANSWER, ("cancelBackfill",)),
}


def add_links(document: dict[str, Any]) -> None:
    """Add `LINKS` to the answers of `document` whose operations are there."""
    operations = {
        operation["operationId"]: operation
        for path_item in document.get("paths", {}).values()
        for operation in path_item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    for source, (status, expression, targets) in LINKS.items():
        response = operations.get(source, {}).get("responses", {}).get(status)
        if response is None:
            continue
        links = response.setdefault("links", {})
        for target in targets:
            if target in operations:
                links.setdefault(
                    target[0].upper() + target[1:],
                    {"operationId": target, "parameters": {"id": expression}},
                )


# A task as docs/api.md's first example writes it: a request a reader can send as is.
TASK_EXAMPLE: dict[str, Any] = {
    "name": "nightly-report",
    "trigger": {"kind": "cron", "expression": "30 2 * * *", "timezone": "America/New_York"},
    "target": {"url": "http://127.0.0.1:9000/reports/nightly", "method": "POST"},
}


def add_examples(document: dict[str, Any]) -> None:
    """An example body for creating a task (clients, Swagger UI's "try it", and API
    testers start from it)."""
    for path_item in document.get("paths", {}).values():
        operation = path_item.get("post") if isinstance(path_item, dict) else None
        if isinstance(operation, dict) and operation.get("operationId") == "createTask":
            for media in operation.get("requestBody", {}).get("content", {}).values():
                media.setdefault("examples", {"cron": {"value": TASK_EXAMPLE}})
