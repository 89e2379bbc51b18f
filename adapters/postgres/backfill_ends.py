"""A backfill's end on PostgreSQL (docs/events.md, "backfill.finished"): in the
transaction that ended runs of backfills, lock those backfills' rows, and finish each
whose runs all ended, with its `backfill.finished` event (`domain.backfills.settled`).

The row lock makes it exactly once: two transactions ending the last runs of one
backfill on two replicas take it in turn, and the second counts the first's runs as
committed. Rows are locked in id order, after the runs (as the cancel takes them), so
that no two transactions wait on each other in a cycle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from adapters.postgres.events import write_events
from domain.backfills import BackfillRecord, BackfillState, finished_event, settled, settled_at
from domain.events import Event, EventRules, TaskRef
from domain.runs import Run, RunStatus
from domain.tasks import Notify

_STATEMENTS = {
    # The columns of domain.backfills.BackfillRecord, as adapters.postgres.backfills reads.
    "lock_active": """
SELECT id, task_id, task_name, range_start AS start, range_end AS "end", overlap,
       only_missing, created_at, actor, runs, status, finished_at
FROM {schema}.backfills
WHERE id = ANY(%(ids)s::uuid[]) AND status = 'active'
ORDER BY id FOR UPDATE
""",
    # Which of these backfills still have a run queued or running: read newest first
    # from runs_backfill_idx, the first such run answers (the queue starts oldest first,
    # so a backfill's newest runs are the last to end), never a count of all its runs.
    "pending": """
SELECT b.id FROM unnest(%(ids)s::uuid[]) AS b (id)
WHERE EXISTS (
    SELECT 1 FROM {schema}.runs AS r
    WHERE r.backfill_id = b.id AND r.status IN ('queued', 'running')
)
""",
    "counts": """
SELECT backfill_id, status, count(*) FROM {schema}.runs
WHERE backfill_id = ANY(%(ids)s::uuid[]) GROUP BY backfill_id, status
""",
    "finish": """
UPDATE {schema}.backfills AS b SET status = 'finished', finished_at = f.at
FROM unnest(%(ids)s::uuid[], %(ats)s::timestamptz[]) AS f (id, at)
WHERE b.id = f.id
""",
    "task_refs": """
SELECT id, name, notify FROM {schema}.tasks WHERE id = ANY(%(ids)s::uuid[])
""",
}


def statements(schema: str) -> dict[str, bytes]:
    ident = sql.Identifier(schema)
    return {
        name: sql.SQL(body).format(schema=ident).as_bytes(None)
        for name, body in _STATEMENTS.items()
    }


async def counts_of(
    conn: AsyncConnection[Any], q: dict[str, bytes], ids: Sequence[UUID]
) -> dict[UUID, Counter[RunStatus]]:
    """The runs of these backfills counted by status, as this transaction sees them."""
    cur = await conn.execute(q["counts"], {"ids": list(ids)})
    counts: dict[UUID, Counter[RunStatus]] = {backfill_id: Counter() for backfill_id in ids}
    for backfill_id, status, n in await cur.fetchall():
        counts[backfill_id][RunStatus(status)] = n
    return counts


async def raise_finished(
    conn: AsyncConnection[Any],
    q: dict[str, bytes],
    schema: str,
    rules: EventRules,
    states: Sequence[tuple[BackfillState, datetime]],
) -> None:
    """Write the `backfill.finished` events of these backfills (each as it finished)."""
    if not states:
        return
    task_ids = list({state.record.task_id for state, _ in states})
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(q["task_refs"], {"ids": task_ids})
    refs = {}
    for row in await cur.fetchall():
        notify = None if row["notify"] is None else Notify.model_validate(row["notify"])
        refs[row["id"]] = TaskRef(row["id"], row["name"], notify)
    events: list[Event] = []
    for state, at in states:
        events += finished_event(rules, refs.get(state.record.task_id), state, at)
    await write_events(conn, schema, events)


async def settle(
    conn: AsyncConnection[Any],
    q: dict[str, bytes],
    schema: str,
    rules: EventRules,
    ended: Iterable[Run],
) -> None:
    """Finish the backfills of the `ended` runs none of whose runs waits or runs any
    more, in the caller's transaction (after it ended them). No statement when none of
    the runs is a backfill's: the claim and outcome paths of other runs pay nothing."""
    ending = settled_at(ended)
    if not ending:
        return
    ids = sorted(ending)
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(q["lock_active"], {"ids": ids})
    # Sent with the lock, run after it (so it sees the other replicas' ends committed
    # before the lock was ours): each run's end costs no count of the whole backfill.
    pending = await conn.execute(q["pending"], {"ids": ids})
    records = [BackfillRecord(**row) for row in await cur.fetchall()]
    waiting = {backfill_id for (backfill_id,) in await pending.fetchall()}
    records = [record for record in records if record.id not in waiting]
    if not records:
        return
    counts = await counts_of(conn, q, [r.id for r in records])
    done = []
    for record in records:
        finished = settled(BackfillState(record, counts[record.id]), ending[record.id])
        if finished is not None:
            done.append((BackfillState(finished, counts[record.id]), ending[record.id]))
    if done:
        params = {"ids": [s.record.id for s, _ in done], "ats": [at for _, at in done]}
        await conn.execute(q["finish"], params)
        await raise_finished(conn, q, schema, rules, done)
