"""The named SQL blocks of `queries.sql`, loaded once and bound to a schema."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import LiteralString

from psycopg import sql

from application.store_values import HoldScope
from domain.runs import Run
from domain.tasks import Task, TaskSpec

# The columns a task or run row is read from: exactly the fields of the domain models.
TASK_COLUMNS = tuple(Task.model_fields)
RUN_COLUMNS = tuple(Run.model_fields)
JSON_COLUMNS = frozenset({"trigger", "target", "notify"})

_HEADER = re.compile(r"^-- (?P<name>[a-z_]+) --$", re.MULTILINE)


@cache
def load_queries() -> dict[str, LiteralString]:
    """Every block of queries.sql by name, with its descriptive comments removed."""
    text = resources.files(__package__).joinpath("queries.sql").read_text(encoding="utf-8")
    headers = list(_HEADER.finditer(text))
    blocks: dict[str, LiteralString] = {}
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        end = following.start() if following else len(text)
        lines = text[header.end() : end].strip().splitlines()
        body = "\n".join(line for line in lines if not line.lstrip().startswith("--"))
        # The file is part of the package, not input: its text is as literal as a constant.
        blocks[header["name"]] = body.strip().rstrip(";")
    return blocks


def _task_column(name: str) -> sql.Composable:
    # Trigger, target and notify are read as JSON text, which pydantic validates in one
    # pass (faster than psycopg parsing to dicts and pydantic validating those), and
    # `rows` shares the model of equal texts.
    if name in JSON_COLUMNS:
        return sql.SQL("{}::text AS {}").format(sql.Identifier(name), sql.Identifier(name))
    return sql.Identifier(name)


def spec_state(table: str | None = None) -> sql.Composable:
    # A task row's writable fields as one JSON object, as domain.history.state_of makes it
    # (the columns are the fields: every field of TaskSpec is recorded, new ones too).
    def column(name: str) -> sql.Composable:
        return sql.Identifier(table, name) if table else sql.Identifier(name)

    pairs = [
        sql.SQL("{}, {}").format(sql.Literal(name), column(name)) for name in TaskSpec.model_fields
    ]
    return sql.SQL("jsonb_build_object({})").format(sql.SQL(", ").join(pairs))


# The tasks a scope covers (application.store_values.HoldScope.covers), its parameters
# `names`, `prune` and `tag`: one condition for the hold's locks and reads and the apply's.
SCOPE_COVERS = sql.SQL(
    "(name = ANY(%(names)s::text[])"
    " OR (%(prune)s::boolean AND (%(tag)s::text IS NULL OR tags @> ARRAY[%(tag)s::text])))"
)


# The queued runs among `run_ids`, locked in the queue's order (time, then id), as every
# writer of several locks them (docs/storage.md, "Lock order"): start_queued's and
# cancel_queued_runs's `queue`.
LOCK_QUEUED_RUNS = sql.SQL(
    "SELECT scheduled_for, id FROM {schema}.runs"
    " WHERE id = ANY(%(run_ids)b::uuid[]) AND status = 'queued'"
    " ORDER BY scheduled_for, id FOR NO KEY UPDATE"
)


def scope_params(scope: HoldScope) -> dict[str, object]:
    """The parameters of `{scope_covers}` for `scope`."""
    return {"names": sorted(scope.names), "prune": scope.prune, "tag": scope.tag}


def bind_queries(schema: str) -> dict[str, bytes]:
    """Every block with `{schema}`, `{task_columns}`, `{task_names}`, `{run_columns}`,
    `{spec_state}`, `{spec_state_of_t}` (its columns those of the table aliased `t`),
    `{scope_covers}` and `{lock_queued_runs}` filled in, rendered once to bytes so that
    psycopg can prepare each one."""
    fields = {
        "scope_covers": SCOPE_COVERS,
        "lock_queued_runs": LOCK_QUEUED_RUNS.format(schema=sql.Identifier(schema)),
        "schema": sql.Identifier(schema),
        "task_columns": sql.SQL(", ").join(map(_task_column, TASK_COLUMNS)),
        "task_names": sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS)),
        "spec_state": spec_state(),
        "spec_state_of_t": spec_state("t"),
        "run_columns": sql.SQL(", ").join(map(sql.Identifier, RUN_COLUMNS)),
    }
    return {
        name: sql.SQL(body).format(**fields).as_bytes(None) for name, body in load_queries().items()
    }
