"""`GET /runs` on PostgreSQL: one statement per combination of filters.

Each combination is its own SQL text (only the conditions asked for), so the planner
sees plain conditions it can match to an index, never `(%(x)s IS NULL OR …)`, whose
generic plan fits no filter well. The indexes in schemata.toml serve them:
`runs_listing_idx` (no filter, `since`/`until`), `runs_status_listing_idx` (`status`),
`runs_history_idx` (`task`), `runs_backfill_idx` (`backfill`). A tag is the runs of the
tasks carrying it: read in order when many tasks carry it, else the newest page of each
such task (an index range scan each), merged (`reads_per_task`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from psycopg import sql

from adapters.postgres.queries import RUN_COLUMNS
from application.ports import RunFilter, RunPageKey

_ORDER = sql.SQL("ORDER BY scheduled_for DESC, id DESC LIMIT %(limit)s")


def run_listing(
    schema: str,
    run_filter: RunFilter,
    after: RunPageKey | None,
    limit: int,
    *,
    per_task: bool = False,
) -> tuple[bytes, dict[str, Any]]:
    """The statement and parameters of one page of `list_all_runs`. With a tag (and no
    task), `per_task` reads each tagged task's newest page and merges them (best when
    few tasks carry the tag); otherwise the newest runs are read in order and those of
    other tasks passed over (best when many do: see `tag_share`)."""
    params: dict[str, Any] = {
        "status": None if run_filter.status is None else run_filter.status.value,
        "task_id": run_filter.task_id,
        "tag": run_filter.tag,
        "since": run_filter.since,
        "until": run_filter.until,
        "backfill_id": run_filter.backfill_id,
        "limit": limit,
    }
    if after is not None:
        params |= {"after_scheduled_for": after.scheduled_for, "after_id": after.id}
    present = frozenset(name for name, value in params.items() if value is not None)
    return _statement(schema, present, per_task), params


def tagged_tasks(schema: str) -> bytes:
    """How many tasks carry %(tag)s, and how many tasks there are."""
    return (
        sql.SQL(
            "SELECT count(*) FILTER (WHERE tags @> ARRAY[%(tag)s::text]) AS tagged,"
            " count(*) AS tasks FROM {}.tasks"
        )
        .format(sql.Identifier(schema))
        .as_bytes(None)
    )


def reads_per_task(tagged: int, tasks: int) -> bool:
    """Whether a tag's page is cheaper read task by task: that costs `tagged` pages of
    runs, reading in order passes over about `tasks / tagged` runs per run listed."""
    return tagged * tagged <= tasks


@cache
def _statement(schema: str, present: frozenset[str], per_task: bool) -> bytes:
    table = sql.Identifier(schema)
    conditions: list[sql.Composable] = [sql.SQL("true")]
    conditions += [sql.SQL(text) for name, text in _CONDITIONS if name in present]
    by_tag = per_task and "tag" in present and "task_id" not in present
    if "tag" in present and not by_tag:
        conditions.append(
            sql.SQL(
                "task_id IN (SELECT id FROM {}.tasks WHERE tags @> ARRAY[%(tag)s::text])"
            ).format(table)
        )
    fields = {
        "schema": table,
        "columns": sql.SQL(", ").join(map(sql.Identifier, RUN_COLUMNS)),
        "where": sql.SQL(" AND ").join(conditions),
        "order": _ORDER,
    }
    if by_tag:
        query = sql.SQL(
            "SELECT r.* FROM {schema}.tasks AS t CROSS JOIN LATERAL ("
            "SELECT {columns} FROM {schema}.runs WHERE task_id = t.id AND {where} {order}"
            ") AS r WHERE t.tags @> ARRAY[%(tag)s::text] "
            "ORDER BY r.scheduled_for DESC, r.id DESC LIMIT %(limit)s"
        )
    else:
        query = sql.SQL("SELECT {columns} FROM {schema}.runs WHERE {where} {order}")
    return query.format(**fields).as_bytes(None)


_CONDITIONS = (
    ("status", "status = %(status)s::text"),
    ("task_id", "task_id = %(task_id)s::uuid"),
    ("since", "scheduled_for >= %(since)s::timestamptz"),
    ("until", "scheduled_for <= %(until)s::timestamptz"),
    ("backfill_id", "backfill_id = %(backfill_id)s::uuid"),
    (
        "after_scheduled_for",
        "(scheduled_for, id) < (%(after_scheduled_for)s::timestamptz, %(after_id)s::uuid)",
    ),
)
