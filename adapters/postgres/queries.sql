-- Every statement of the PostgreSQL adapter, as named blocks.
--
-- `{schema}` is the store's schema, `{task_columns}` and `{run_columns}` the columns that
-- map onto domain.tasks.Task and domain.runs.Run (`{task_names}` the same task columns by
-- name alone), `{spec_state}` a task row's writable fields as one JSON object (composed
-- with psycopg.sql when a store is built); `%(name)s` are parameters. Result lists name their columns, never `*`, so
-- that a column added by the initializer does not break a prepared statement.


-- lock_schema --
-- Serialize initializers of one schema: the second waits, then finds nothing to do.
SELECT pg_advisory_xact_lock(%(key)s);

-- existing_relations --
-- Tables and indexes already in the schema (relkind 'r', 'p', 'i').
SELECT c.relname, c.relkind
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s;

-- existing_columns --
-- The live columns of the schema's tables.
SELECT c.relname, a.attname
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_class AS c ON c.oid = a.attrelid
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND a.attnum > 0 AND NOT a.attisdropped;

-- existing_constraints --
-- Constraint names in the schema (PostgreSQL has no ADD CONSTRAINT IF NOT EXISTS).
SELECT con.conname
FROM pg_catalog.pg_constraint AS con
JOIN pg_catalog.pg_namespace AS n ON n.oid = con.connamespace
WHERE n.nspname = %(schema)s;

-- partitions_of --
-- The partitions of a table with their ranges (adapters/postgres/partitions.py): the
-- bounds PostgreSQL prints, read back as timestamps (NULL: MINVALUE or MAXVALUE).
SELECT c.relname,
    (regexp_match(b.bound, $$FROM \('([^']*)'\)$$))[1]::timestamptz,
    (regexp_match(b.bound, $$TO \('([^']*)'\)$$))[1]::timestamptz,
    b.bound = 'DEFAULT'
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
CROSS JOIN LATERAL (SELECT pg_catalog.pg_get_expr(c.relpartbound, c.oid) AS bound) AS b
JOIN pg_catalog.pg_class AS p ON p.oid = i.inhparent
JOIN pg_catalog.pg_namespace AS n ON n.oid = p.relnamespace
WHERE n.nspname = %(schema)s AND p.relname = %(table)s;

-- indexes_of --
-- The indexes of one table, its primary key's among them.
SELECT indexname FROM pg_catalog.pg_indexes
WHERE schemaname = %(schema)s AND tablename = %(table)s;


-- ping --
-- The cheapest statement that proves the server answers.
SELECT 1;

-- notify --
-- Wake the listeners of a channel; sent in the transaction of the write it announces.
SELECT pg_notify(%(channel)s, %(payload)s);


-- create_task --
-- Create one task at version 1 in one statement, so in one round trip. `row` is the
-- task's row as JSON (adapters.postgres.rows.task_row_text). First the key-share lock on the
-- calendar its trigger names (`calendars`: none or that one; docs/storage.md "Lock
-- order"), then the row, its first history version (every writable field new; the
-- state read from the row, as update_task reads it), its task_calendars row, and the
-- NOTIFY that wakes the engines.
WITH locked AS (
    SELECT name FROM {schema}.calendars WHERE name = ANY(%(calendars)s::text[])
    ORDER BY name FOR KEY SHARE
), created AS (
    INSERT INTO {schema}.tasks ({task_names})
    SELECT {task_names} FROM jsonb_populate_record(NULL::{schema}.tasks, %(row)s::jsonb)
    WHERE (SELECT count(*) FROM locked) >= 0
    RETURNING {task_columns}, {spec_state} AS state
), recorded AS (
    INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)
    SELECT c.id, c.version, c.created_at, %(actor)s::text, 'api',
        (SELECT jsonb_object_agg(n.key, jsonb_build_array(NULL, n.value))
         FROM jsonb_each(c.state) AS n),
        c.state
    FROM created AS c
), named AS (
    INSERT INTO {schema}.task_calendars (task_id, calendar)
    SELECT c.id, n.calendar
    FROM created AS c CROSS JOIN unnest(%(calendars)s::text[]) AS n (calendar)
), notified AS (
    SELECT pg_notify(%(channel)s::text, c.id::text) AS sent FROM created AS c
)
SELECT c.id FROM created AS c CROSS JOIN notified;

-- insert_tasks --
-- Create tasks at version 1, in the transaction of an apply: `rows` is a JSON array of
-- task rows (adapters.postgres.rows.task_row), one parameter however many; each task's
-- first history version as create_task records it.
WITH created AS (
    INSERT INTO {schema}.tasks ({task_names})
    SELECT {task_names} FROM jsonb_populate_recordset(NULL::{schema}.tasks, %(rows)s::jsonb)
    RETURNING id, version, created_at, {spec_state} AS state
)
INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)
SELECT c.id, c.version, c.created_at, %(actor)s::text, 'api',
    (SELECT jsonb_object_agg(n.key, jsonb_build_array(NULL, n.value))
     FROM jsonb_each(c.state) AS n),
    c.state
FROM created AS c;

-- get_task --
-- One task by id.
SELECT {task_columns} FROM {schema}.tasks WHERE id = %(id)s;

-- lock_task --
-- One task by id, locked as a write of its runs locks it first (docs/storage.md, "Lock
-- order"): a backfill, so that the task's deletion waits for its runs to be written
-- and cancels those queued, or the backfill waits for the deletion and finds no task.
SELECT {task_columns} FROM {schema}.tasks WHERE id = %(id)s FOR NO KEY UPDATE;

-- get_task_by_name --
-- One task by its unique name.
SELECT {task_columns} FROM {schema}.tasks WHERE name = %(name)s;

-- lock_tasks --
-- Lock these tasks in id order, as the outcome counts do, so that two writers never wait
-- on each other in a cycle. Not FOR UPDATE, which a lease insert's key-share lock waits
-- on: see claim_due (a task then deleted takes the stronger lock as it goes).
SELECT id, version FROM {schema}.tasks WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id
FOR NO KEY UPDATE;

-- lock_task_leases --
-- The leases of these tasks (locked by lock_tasks), in run-id order, before their queued
-- runs and before the task's deletion deletes the leases by its cascade, in the order
-- it scans them: an outcome batch deletes them in run-id order (finish_runs).
SELECT run_id FROM {schema}.run_leases WHERE task_id = ANY(%(ids)s::uuid[])
ORDER BY run_id FOR UPDATE;

-- hold_task_ids --
-- The tasks a hold covers (application.store_values.HoldScope), locked as lock_tasks
-- locks them; hold_tasks reads them in a statement of its own.
SELECT id
FROM {schema}.tasks
WHERE {scope_covers}
ORDER BY id
FOR NO KEY UPDATE;

-- hold_tasks --
-- The tasks a hold covers, read after hold_task_ids locked them (a snapshot of its own,
-- with every task committed while it waited), and locked too: one committed meanwhile.
SELECT {task_columns}
FROM {schema}.tasks
WHERE {scope_covers}
ORDER BY id
FOR NO KEY UPDATE;

-- tasks_covered --
-- The tasks a scope covers, as hold_tasks reads them, locking none: one statement, so
-- one snapshot (an apply's answer never mixes two moments of its tasks).
SELECT {task_columns}
FROM {schema}.tasks
WHERE {scope_covers}
ORDER BY id;

-- list_tasks --
-- A page of tasks by (created_at, id), after a keyset position when one is given.
SELECT {task_columns}
FROM {schema}.tasks
WHERE (%(enabled)s::boolean IS NULL OR enabled = %(enabled)s::boolean)
  AND (%(tag)s::text IS NULL OR tags @> ARRAY[%(tag)s::text])
  AND (%(prefix)s::text IS NULL OR starts_with(name, %(prefix)s::text))
  AND (%(after_created_at)s::timestamptz IS NULL
       OR (created_at, id) > (%(after_created_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY created_at, id
LIMIT %(limit)s;

-- update_task --
-- Write a task's fields if it is still at the expected version; the schedule only on
-- request. The version it makes is recorded in the history: the fields that changed
-- (old -> new, read from the row as it was) and the state after.
WITH old AS (
    SELECT {spec_state} AS state
    FROM {schema}.tasks
    WHERE id = %(id)s AND version = %(expected_version)s
), updated AS (
    UPDATE {schema}.tasks SET
        name = %(name)s,
        description = %(description)s,
        trigger = %(trigger)s,
        target = %(target)s,
        enabled = %(enabled)s,
        tags = %(tags)s,
        misfire_grace_seconds = %(misfire_grace_seconds)s,
        max_running_instances = %(max_running_instances)s,
        jitter_seconds = %(jitter_seconds)s,
        pause_after_failures = %(pause_after_failures)s,
        catch_up = %(catch_up)s,
        max_catch_up = %(max_catch_up)s,
        overlap = %(overlap)s,
        notify = %(notify)s,
        history_limit = %(history_limit)s,
        next_fire_at = CASE WHEN %(reschedule)s::boolean
            THEN %(next_fire_at)s::timestamptz ELSE next_fire_at END,
        next_run_at = CASE WHEN %(reschedule)s::boolean
            THEN %(next_run_at)s::timestamptz ELSE next_run_at END,
        consecutive_failures = CASE WHEN %(reschedule)s::boolean
            THEN %(consecutive_failures)s::integer ELSE consecutive_failures END,
        updated_at = %(updated_at)s,
        version = version + 1
    WHERE id = %(id)s AND version = %(expected_version)s
        -- A new schedule only over the one it was planned from: a claim that moved it
        -- meanwhile (claims change no version) would have its occurrences claimed again.
        AND (NOT %(check_schedule)s::boolean
             OR next_fire_at IS NOT DISTINCT FROM %(read_next_fire_at)s::timestamptz)
    RETURNING {task_columns}, {spec_state} AS state
), recorded AS (
    INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)
    SELECT u.id, u.version, u.updated_at, %(actor)s::text, 'api',
        (SELECT coalesce(jsonb_object_agg(n.key, jsonb_build_array(o.state -> n.key, n.value)),
                         '{{}}'::jsonb)
         FROM jsonb_each(u.state) AS n
         WHERE (o.state -> n.key) IS DISTINCT FROM n.value),
        u.state
    FROM updated AS u CROSS JOIN old AS o
)
SELECT {task_names} FROM updated;

-- update_tasks --
-- update_task for many tasks in one statement (an apply): `rows` is a JSON array of task
-- rows (adapters.postgres.rows.task_row) each with its `expected_version` and
-- `reschedule`. Returns the ids it wrote: a task missing from them was not at its
-- expected version (or is gone), and the caller rolls the whole apply back.
WITH input AS (
    SELECT r.*, (e.value ->> 'expected_version')::integer AS expected_version,
        (e.value ->> 'reschedule')::boolean AS reschedule,
        (e.value ->> 'check_schedule')::boolean AS check_schedule,
        (e.value ->> 'read_next_fire_at')::timestamptz AS read_next_fire_at
    FROM jsonb_array_elements(%(rows)s::jsonb) AS e (value)
    CROSS JOIN LATERAL jsonb_populate_record(NULL::{schema}.tasks, e.value) AS r
), old AS (
    SELECT t.id, {spec_state_of_t} AS state
    FROM {schema}.tasks AS t JOIN input AS i ON t.id = i.id AND t.version = i.expected_version
), updated AS (
    UPDATE {schema}.tasks AS t SET
        name = i.name,
        description = i.description,
        trigger = i.trigger,
        target = i.target,
        enabled = i.enabled,
        tags = i.tags,
        misfire_grace_seconds = i.misfire_grace_seconds,
        max_running_instances = i.max_running_instances,
        jitter_seconds = i.jitter_seconds,
        pause_after_failures = i.pause_after_failures,
        catch_up = i.catch_up,
        max_catch_up = i.max_catch_up,
        overlap = i.overlap,
        notify = i.notify,
        history_limit = i.history_limit,
        next_fire_at = CASE WHEN i.reschedule THEN i.next_fire_at ELSE t.next_fire_at END,
        next_run_at = CASE WHEN i.reschedule THEN i.next_run_at ELSE t.next_run_at END,
        consecutive_failures = CASE WHEN i.reschedule
            THEN i.consecutive_failures ELSE t.consecutive_failures END,
        updated_at = i.updated_at,
        version = t.version + 1
    FROM input AS i
    WHERE t.id = i.id AND t.version = i.expected_version
        AND (NOT i.check_schedule OR t.next_fire_at IS NOT DISTINCT FROM i.read_next_fire_at)
    RETURNING t.id, t.version, t.updated_at, {spec_state_of_t} AS state
), recorded AS (
    INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)
    SELECT u.id, u.version, u.updated_at, %(actor)s::text, 'api',
        (SELECT coalesce(jsonb_object_agg(n.key, jsonb_build_array(o.state -> n.key, n.value)),
                         '{{}}'::jsonb)
         FROM jsonb_each(u.state) AS n
         WHERE (o.state -> n.key) IS DISTINCT FROM n.value),
        u.state
    FROM updated AS u JOIN old AS o ON o.id = u.id
)
SELECT id FROM updated;

-- task_version --
-- The stored version of a task, to tell a conflict from a missing task.
SELECT version FROM {schema}.tasks WHERE id = %(id)s;

-- delete_task --
-- Delete a task (only at the expected version, when one is given: If-Match); its leases
-- go with it (ON DELETE CASCADE), its runs and history stay, and the history records the
-- deletion as the task's last version.
WITH gone AS (
    DELETE FROM {schema}.tasks
    WHERE id = %(id)s
      AND (%(expected_version)s::integer IS NULL OR version = %(expected_version)s::integer)
    RETURNING id, version
)
INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)
SELECT id, version + 1, coalesce(%(at)s::timestamptz, now()), %(actor)s::text, 'api',
    '{{"deleted": [false, true]}}'::jsonb, NULL
FROM gone
RETURNING task_id;

-- task_history --
-- A task's versions, newest first, before a version when one is given.
SELECT task_id, version, at, actor, cause, changes, state
FROM {schema}.task_history
WHERE task_id = %(task_id)s AND (%(before)s::integer IS NULL OR version < %(before)s::integer)
ORDER BY version DESC
LIMIT %(limit)s;

-- task_version_at --
-- The version of a task in force at an instant: the last one made at or before it.
SELECT task_id, version, at, actor, cause, changes, state
FROM {schema}.task_history
WHERE task_id = %(task_id)s AND at <= %(at)s
ORDER BY version DESC
LIMIT 1;

-- delete_history_before --
-- Delete one bounded batch of versions made before the cutoff that no longer tell the
-- state at the cutoff: superseded by a later version made by then, or a deletion.
DELETE FROM {schema}.task_history
WHERE (task_id, version) IN (
    SELECT h.task_id, h.version FROM {schema}.task_history AS h
    WHERE h.at < %(cutoff)s
      AND (h.state IS NULL OR EXISTS (
          SELECT 1 FROM {schema}.task_history AS n
          WHERE n.task_id = h.task_id AND n.version > h.version AND n.at <= %(cutoff)s))
    ORDER BY h.at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
);

-- next_due_at --
-- The earliest next_run_at of an enabled task (the head of tasks_due_idx).
SELECT min(next_run_at) FROM {schema}.tasks WHERE enabled;


-- claim_due --
-- Lock the due tasks, earliest first (an index range scan of tasks_due_idx), skipping
-- the rows another claimer holds. `FOR NO KEY UPDATE`, the lock the claim's own UPDATE
-- takes: it excludes every other claimer and writer of the row, but not the key-share
-- lock a lease insert takes for its foreign key. With `FOR UPDATE`, a manual run or a
-- queued run starting (lease lock, then lease insert) deadlocked with a claim of the
-- same task (row lock, then lease lock) (docs/storage.md, "Lock order").
SELECT {task_columns}
FROM {schema}.tasks
WHERE enabled AND next_run_at <= %(now)s
ORDER BY next_run_at, id
LIMIT %(limit)s
FOR NO KEY UPDATE SKIP LOCKED;

-- lock_leases --
-- Take the lease locks of a batch of tasks in the order given (sorted, so no deadlock).
SELECT pg_advisory_xact_lock(key) FROM unnest(%(keys)b::bigint[]) AS key;

-- count_leases --
-- Unexpired leases per task, probing run_leases_task_idx once per task (however many runs
-- are in flight). A statement of its own, after lock_leases, so that its snapshot sees
-- every lease committed by whoever held a lock before us.
-- Its callers never prepare it (nor task_slots, which probes the same way): run_leases
-- is often empty when (auto)analyzed, and a prepared statement's generic plan made from
-- those statistics scans the whole table once per task, which a burst that fills it
-- with thousands of leases pays quadratically (docs/storage.md, "Plans"). Planned with
-- each call's parameters, the planner sees the table's real size.
SELECT t.id, c.leases
FROM unnest(%(task_ids)b::uuid[]) AS t (id),
LATERAL (
    SELECT count(*) AS leases
    FROM {schema}.run_leases AS l
    WHERE l.task_id = t.id AND l.expires_at > %(now)s
) AS c
WHERE c.leases > 0;

-- record_claims --
-- Write a batch of claims at once: each task's schedule fields and each run (already
-- finished when not called) with, for a running run, its lease. Every value is the
-- domain's (domain.claims: claimed_task_fields, new_run); this statement only writes them.
WITH claim AS (
    SELECT * FROM unnest(
        %(task_ids)b::uuid[], %(next_fire_at)b::timestamptz[],
        %(next_run_at)b::timestamptz[], %(last_run_at)b::timestamptz[],
        %(claimed_through)b::timestamptz[]
    ) AS c (task_id, next_fire_at, next_run_at, last_run_at, claimed_through)
), advanced AS (
    UPDATE {schema}.tasks AS t SET
        next_fire_at = c.next_fire_at,
        next_run_at = c.next_run_at,
        last_run_at = c.last_run_at,
        claimed_through = c.claimed_through
    FROM claim AS c
    -- `= ANY` lets the primary key drive the join, whatever the size of the table.
    WHERE t.id = ANY(%(task_ids)b::uuid[]) AND t.id = c.task_id
), recorded AS (
    INSERT INTO {schema}.runs (
        id, task_id, scheduled_for, coalesced, claimed_at, started_at, finished_at,
        lease_expires_at, status, error, manual, attempts, replica
    )
    SELECT * FROM unnest(
        %(run_ids)b::uuid[], %(run_task_ids)b::uuid[], %(scheduled_for)b::timestamptz[],
        %(coalesced)b::integer[], %(claimed_at)b::timestamptz[], %(started_at)b::timestamptz[],
        %(finished_at)b::timestamptz[], %(lease_expires_at)b::timestamptz[],
        %(status)b::text[], %(error)b::text[], %(manual)b::boolean[], %(attempts)b::integer[],
        %(replica)b::text[]
    )
    RETURNING id, task_id, lease_expires_at, replica
)
INSERT INTO {schema}.run_leases (run_id, task_id, expires_at, replica)
SELECT id, task_id, lease_expires_at, replica
FROM recorded
WHERE lease_expires_at IS NOT NULL;

-- renew_lease --
-- Move a running run's lease (its row, then its slot: the order of an outcome batch and
-- of the lost-run sweep) while it still holds; no row when it does not.
WITH renewed AS (
    UPDATE {schema}.runs SET lease_expires_at = %(expires_at)s
    WHERE id = %(run_id)s AND scheduled_for = %(scheduled_for)s
        AND status = 'running' AND lease_expires_at > %(now)s
    RETURNING {run_columns}
), moved AS (
    UPDATE {schema}.run_leases SET expires_at = %(expires_at)s
    WHERE run_id IN (SELECT id FROM renewed)
)
SELECT {run_columns} FROM renewed;

-- record_manual_run --
-- Insert a manual run (as domain.claims.new_run made it) and, when it runs, its lease;
-- the task is left as it is.
WITH recorded AS (
    INSERT INTO {schema}.runs (
        id, task_id, scheduled_for, coalesced, claimed_at, started_at, finished_at,
        lease_expires_at, status, error, manual, attempts, replica
    ) VALUES (
        %(id)s, %(task_id)s, %(scheduled_for)s, %(coalesced)s, %(claimed_at)s,
        %(started_at)s, %(finished_at)s, %(lease_expires_at)s, %(status)s, %(error)s,
        %(manual)s, %(attempts)s, %(replica)s
    )
    RETURNING id, task_id, lease_expires_at, replica
)
INSERT INTO {schema}.run_leases (run_id, task_id, expires_at, replica)
SELECT id, task_id, lease_expires_at, replica
FROM recorded
WHERE lease_expires_at IS NOT NULL;


-- lock_counted_tasks --
-- The tasks whose count a batch of outcomes may change, locked in id order (two batches
-- never wait on each other in a cycle) and read at their latest version, with the fields
-- domain.outcomes.count_outcomes reads. What counts is the domain's; this only narrows
-- the lock to the tasks of runs still running that the batch ends as succeeded or failed,
-- leaving out a task that only succeeds on a count of zero (nothing to write).
-- `queueing`: whether it has queued runs, which a pause this batch makes cancels.
SELECT t.id, t.enabled, t.consecutive_failures, t.failing, t.pause_after_failures,
    t.next_fire_at, t.next_run_at, t.updated_at, t.version,
    EXISTS (
        SELECT 1 FROM {schema}.runs AS q WHERE q.task_id = t.id AND q.status = 'queued'
    ) AS queueing
FROM {schema}.tasks AS t
JOIN (
    SELECT r.task_id, bool_or(o.status = 'failed') AS failing
    FROM unnest(%(run_ids)b::uuid[], %(status)b::text[]) AS o (run_id, status)
    JOIN {schema}.runs AS r ON r.id = o.run_id
    -- `|| ''` and `= ANY`: see finish_runs.
    WHERE r.id = ANY(%(run_ids)b::uuid[]) AND r.status || '' = 'running'
        AND o.status IN ('succeeded', 'failed')
    GROUP BY r.task_id
) AS c ON c.task_id = t.id
WHERE c.failing OR t.consecutive_failures <> 0 OR t.failing
ORDER BY t.id
-- Not FOR UPDATE, which a lease insert's key-share lock waits on: see claim_due.
FOR NO KEY UPDATE OF t;

-- finish_runs --
-- Record how a batch of running runs ended and free their leases. A run no longer running
-- (lost, already finished) is untouched and not returned.
WITH outcome AS (
    SELECT * FROM unnest(
        %(run_ids)b::uuid[], %(status)b::text[], %(attempts)b::integer[],
        %(http_status)b::integer[], %(response_excerpt)b::text[], %(error)b::text[],
        %(started_at)b::timestamptz[], %(finished_at)b::timestamptz[]
    ) AS o (run_id, new_status, new_attempts, new_http_status, new_excerpt, new_error,
            new_started_at, new_finished_at)
), finished AS (
    UPDATE {schema}.runs AS r SET
        status = o.new_status,
        attempts = o.new_attempts,
        http_status = o.new_http_status,
        response_excerpt = o.new_excerpt,
        error = o.new_error,
        started_at = coalesce(o.new_started_at, r.started_at),
        finished_at = o.new_finished_at
    FROM outcome AS o
    -- Each run is found by its primary key from the batch. `|| ''` keeps the status
    -- test out of every index: otherwise the planner may scan every running run
    -- (runs_running_idx, runs_status_listing_idx) whenever its statistics say that few
    -- are running, which is exactly when a burst has just started thousands. `= ANY`
    -- keeps each partition's primary key in the plan: joined alone, the planner may hash
    -- the batch and scan a week's partition whose statistics lag behind its rows.
    WHERE r.id = ANY(%(run_ids)b::uuid[]) AND r.id = o.run_id AND r.status || '' = 'running'
    RETURNING {run_columns}
), freed AS (
    -- The leases locked in run-id order before they go, as every deleter of several
    -- takes them (a task's deletion included: docs/storage.md, "Lock order").
    DELETE FROM {schema}.run_leases WHERE run_id IN (
        SELECT run_id FROM {schema}.run_leases WHERE run_id IN (SELECT id FROM finished)
        ORDER BY run_id FOR UPDATE
    )
)
SELECT {run_columns} FROM finished;

-- count_outcomes --
-- Write the counts domain.outcomes.count_outcomes decided on the tasks lock_counted_tasks
-- locked, record each pause in the task's history, and notify once per task it paused.
WITH counted AS (
    SELECT * FROM unnest(
        %(task_ids)b::uuid[], %(enabled)b::boolean[], %(consecutive_failures)b::integer[],
        %(failing)b::boolean[], %(next_fire_at)b::timestamptz[], %(next_run_at)b::timestamptz[],
        %(updated_at)b::timestamptz[], %(version)b::integer[], %(paused)b::boolean[]
    ) AS c (task_id, enabled, consecutive_failures, failing, next_fire_at, next_run_at,
            updated_at, version, paused)
), written AS (
    UPDATE {schema}.tasks AS t SET
        enabled = c.enabled,
        consecutive_failures = c.consecutive_failures,
        failing = c.failing,
        next_fire_at = c.next_fire_at,
        next_run_at = c.next_run_at,
        updated_at = c.updated_at,
        version = c.version
    FROM counted AS c
    WHERE t.id = ANY(%(task_ids)b::uuid[]) AND t.id = c.task_id
    RETURNING t.id, c.paused, t.version, t.updated_at, {spec_state_of_t} AS state
), recorded AS (
    -- A pause is a version of the task, made by no one: cause auto_pause.
    INSERT INTO {schema}.task_history (task_id, version, at, actor, cause, changes, state)
    SELECT id, version, updated_at, NULL, 'auto_pause', '{{"enabled": [true, false]}}'::jsonb,
        state
    FROM written
    WHERE paused
)
SELECT pg_notify(%(channel)s::text, id::text) FROM written WHERE paused;

-- get_run --
-- One run by id.
SELECT {run_columns} FROM {schema}.runs WHERE id = %(id)s;

-- get_runs --
-- Runs by id, in no particular order.
SELECT {run_columns} FROM {schema}.runs WHERE id = ANY(%(ids)b::uuid[]);

-- lock_run --
-- One run by id, locked until the transaction ends (cancel against finish).
SELECT {run_columns} FROM {schema}.runs WHERE id = %(id)s FOR UPDATE;

-- list_runs --
-- A task's runs, newest first, from the start of its history.
SELECT {run_columns}
FROM {schema}.runs
WHERE task_id = %(task_id)s AND (%(status)s::text IS NULL OR status = %(status)s::text)
ORDER BY scheduled_for DESC, id DESC
LIMIT %(limit)s;

-- list_runs_after --
-- A task's runs, newest first, strictly after a keyset position (an index range scan).
SELECT {run_columns}
FROM {schema}.runs
WHERE task_id = %(task_id)s AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (scheduled_for, id) < (%(after_scheduled_for)s::timestamptz, %(after_id)s::uuid)
ORDER BY scheduled_for DESC, id DESC
LIMIT %(limit)s;

-- recent_runs --
-- The last runs of each task of a page, newest first: one short range scan of the
-- history index per task (LATERAL), in one round trip for the whole page.
SELECT recent.*
FROM unnest(%(task_ids)s::uuid[]) WITH ORDINALITY AS wanted(id, position)
CROSS JOIN LATERAL (
    SELECT {run_columns}
    FROM {schema}.runs
    WHERE runs.task_id = wanted.id
    ORDER BY scheduled_for DESC, id DESC
    LIMIT %(limit)s
) AS recent
ORDER BY wanted.position, recent.scheduled_for DESC, recent.id DESC;

-- request_cancel --
-- Flag a run's lease so that the replica running it stops it (with the error `reason`;
-- null: the engine's default). A run asked before keeps the first reason. A run whose
-- lease went with its deleted task is asked through run_cancels instead.
WITH leased AS (
    UPDATE {schema}.run_leases
    SET cancel_requested = true,
        cancel_reason = CASE WHEN cancel_requested THEN cancel_reason ELSE %(reason)s::text END
    WHERE run_id = %(id)s::uuid
    RETURNING run_id
)
INSERT INTO {schema}.run_cancels (run_id, reason, requested_at)
SELECT %(id)s::uuid, %(reason)s::text, %(now)s::timestamptz WHERE NOT EXISTS (SELECT FROM leased)
ON CONFLICT (run_id) DO NOTHING;

-- cancel_requested --
-- Which of these runs have a cancel request, on their lease or in run_cancels.
SELECT run_id FROM {schema}.run_leases
WHERE run_id = ANY(%(ids)b::uuid[]) AND cancel_requested
UNION ALL
SELECT run_id FROM {schema}.run_cancels WHERE run_id = ANY(%(ids)b::uuid[]);

-- forget_cancels --
-- The cancel requests in run_cancels of runs no longer running (the lost-run sweep),
-- locked in run-id order as every deleter of several rows takes them.
DELETE FROM {schema}.run_cancels WHERE run_id IN (
    SELECT c.run_id FROM {schema}.run_cancels AS c
    WHERE NOT EXISTS (
        SELECT FROM {schema}.runs AS r WHERE r.id = c.run_id AND r.status = 'running'
    )
    ORDER BY c.run_id FOR UPDATE
);

-- expire_lost_runs --
-- Fail the running runs whose lease expired (their replica is gone) and free the leases.
WITH lost AS (
    UPDATE {schema}.runs SET status = 'failed', error = %(error)s, finished_at = %(finished_at)s
    WHERE status = 'running' AND lease_expires_at < %(now)s
    RETURNING {run_columns}
), freed AS (
    DELETE FROM {schema}.run_leases WHERE run_id IN (  -- in run-id order: see finish_runs
        SELECT run_id FROM {schema}.run_leases WHERE run_id IN (SELECT id FROM lost)
        ORDER BY run_id FOR UPDATE
    )
)
SELECT {run_columns} FROM lost;

-- delete_runs_before --
-- Delete one bounded batch of finished runs scheduled before the cutoff, oldest first.
DELETE FROM {schema}.runs
WHERE id = ANY(ARRAY(
    SELECT id FROM {schema}.runs
    WHERE status <> 'running' AND status <> 'queued' AND scheduled_for < %(cutoff)s
    ORDER BY scheduled_for
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
));

-- history_counts --
-- The tasks with a history_limit and their finished runs, each counted up to its
-- limit + batch (domain.retention.HistoryCount), read through runs_history_idx.
SELECT t.id, t.history_limit,
    (SELECT count(*) FROM (
        SELECT 1 FROM {schema}.runs AS r
        WHERE r.task_id = t.id AND r.status <> 'running' AND r.status <> 'queued'
        LIMIT t.history_limit + %(batch)s
    ) AS counted) AS finished
FROM {schema}.tasks AS t
WHERE t.history_limit IS NOT NULL;

-- delete_oldest_finished --
-- Delete the `counts` oldest finished runs of each of `task_ids` (domain.retention
-- decided how many). No SKIP LOCKED: two sweeps pick the same oldest runs, and the one
-- that waited finds them gone, so together they never delete more than was decided.
DELETE FROM {schema}.runs
WHERE id = ANY(ARRAY(
    SELECT o.id
    FROM unnest(%(task_ids)s::uuid[], %(counts)s::integer[]) AS t(id, n)
    CROSS JOIN LATERAL (
        SELECT r.id FROM {schema}.runs AS r
        WHERE r.task_id = t.id AND r.status <> 'running' AND r.status <> 'queued'
        ORDER BY r.scheduled_for, r.id
        LIMIT t.n
    ) AS o
));


-- Overlap (domain.overlap): queued runs, replaced runs, slots freed. Every decision is
-- the domain's; these statements read a task's slots under its lease lock and write
-- what the plan decided. A queue is read through runs_queued_idx, from its head.

-- task_slots --
-- The slots of tasks that may queue, read after lock_leases took their lease locks:
-- runs in flight, those of them nobody asked to stop yet (oldest started first), the
-- queued runs counted up to `bound` (domain.overlap.queue_count_bound) and the ids of
-- the `heads` oldest of them.
SELECT t.id,
    (SELECT count(*) FROM {schema}.run_leases AS l
     WHERE l.task_id = t.id AND l.expires_at > %(now)s) AS in_flight,
    ARRAY(
        SELECT l.run_id
        FROM {schema}.run_leases AS l JOIN {schema}.runs AS r ON r.id = l.run_id
        WHERE l.task_id = t.id AND l.expires_at > %(now)s AND NOT l.cancel_requested
        ORDER BY coalesce(r.started_at, r.claimed_at), r.id
    ) AS stoppable,
    (SELECT count(*) FROM (
        SELECT 1 FROM {schema}.runs AS q
        WHERE q.task_id = t.id AND q.status = 'queued'
        LIMIT t.bound
    ) AS b) AS queued,
    ARRAY(
        SELECT q.id FROM {schema}.runs AS q
        WHERE q.task_id = t.id AND q.status = 'queued'
        ORDER BY q.scheduled_for, q.id
        LIMIT t.heads
    ) AS heads
FROM unnest(%(task_ids)b::uuid[], %(bound)b::integer[], %(heads)b::integer[])
    AS t (id, bound, heads);

-- queued_tasks_of_runs --
-- The tasks of these runs that have a queued run (an index probe per task).
SELECT {task_columns} FROM {schema}.tasks
WHERE id IN (SELECT r.task_id FROM {schema}.runs AS r WHERE r.id = ANY(%(run_ids)b::uuid[]))
  AND EXISTS (
      SELECT 1 FROM {schema}.runs AS q
      WHERE q.task_id = tasks.id AND q.status = 'queued'
  );

-- start_queued --
-- Start queued runs as domain.overlap.start_fields decided, with their leases. A run no
-- longer queued (cancelled meanwhile) is left as it is. Queued runs are locked in the
-- queue's order (time, then id) by every writer of several: the scan of a partitioned
-- table goes partition by partition, the default one last (docs/storage.md, "Lock order").
WITH queue AS ({lock_queued_runs}), start AS (
    SELECT * FROM unnest(
        %(run_ids)b::uuid[], %(started_at)b::timestamptz[],
        %(lease_expires_at)b::timestamptz[], %(replica)b::text[]
    ) AS s (run_id, new_started_at, new_lease_expires_at, new_replica)
), started AS (
    UPDATE {schema}.runs AS r SET
        status = 'running',
        started_at = s.new_started_at,
        lease_expires_at = s.new_lease_expires_at,
        replica = s.new_replica
    FROM start AS s
    WHERE r.id = ANY(%(run_ids)b::uuid[]) AND r.id = s.run_id AND r.status = 'queued'
      AND (r.scheduled_for, r.id) IN (SELECT scheduled_for, id FROM queue)
    RETURNING {run_columns}
), leased AS (
    INSERT INTO {schema}.run_leases (run_id, task_id, expires_at, replica)
    SELECT id, task_id, lease_expires_at, replica FROM started
)
SELECT {run_columns} FROM started;

-- cancel_queued_runs --
-- Cancel these queued runs uncalled, each with its error, locked in the queue's order
-- (see start_queued).
WITH queue AS ({lock_queued_runs})
UPDATE {schema}.runs AS r SET status = 'cancelled', finished_at = %(now)s, error = c.new_error
FROM unnest(%(run_ids)b::uuid[], %(errors)b::text[]) AS c (run_id, new_error)
WHERE r.id = ANY(%(run_ids)b::uuid[]) AND r.id = c.run_id AND r.status = 'queued'
  AND (r.scheduled_for, r.id) IN (SELECT scheduled_for, id FROM queue)
RETURNING {run_columns};

-- cancel_task_queues --
-- Cancel the queued runs of these tasks (paused, deleted: every one; no longer queueing:
-- only the task's own, `backfilled` false, domain.overlap.dropped_queue). Answers those
-- of them a backfill made, whose backfills this may have ended
-- (adapters.postgres.backfill_ends).
-- Locked in the queue's order (see start_queued).
WITH queue AS (
    SELECT scheduled_for, id FROM {schema}.runs
    WHERE task_id = ANY(%(task_ids)b::uuid[]) AND status = 'queued'
      AND (%(backfilled)b::boolean OR backfill_id IS NULL)
    ORDER BY scheduled_for, id FOR NO KEY UPDATE
), cancelled AS (
    UPDATE {schema}.runs SET status = 'cancelled', finished_at = %(now)s, error = %(error)s
    WHERE task_id = ANY(%(task_ids)b::uuid[]) AND status = 'queued'
      AND (scheduled_for, id) IN (SELECT scheduled_for, id FROM queue)
    RETURNING {run_columns}
)
SELECT * FROM cancelled WHERE backfill_id IS NOT NULL;

-- ask_to_stop --
-- Ask the replicas running these runs to stop them, each with the error to end with.
-- A lease another transaction holds is left as it is, never waited for: its run is
-- ending (an outcome batch or the lost-run sweep deletes the lease) or being asked to
-- stop (a cancel). The claim asking holds the task's lease lock, which such a batch
-- wants next to start queued runs: waiting here made a cycle (docs/storage.md).
UPDATE {schema}.run_leases AS l SET cancel_requested = true, cancel_reason = c.reason
FROM unnest(%(run_ids)b::uuid[], %(reasons)b::text[]) AS c (run_id, reason)
WHERE l.run_id IN (
    SELECT run_id FROM {schema}.run_leases WHERE run_id = ANY(%(run_ids)b::uuid[])
    ORDER BY run_id FOR UPDATE SKIP LOCKED
) AND l.run_id = c.run_id;

-- cancel_reasons --
-- Which of these runs have a cancel request (on their lease or in run_cancels), and the
-- error it asks for.
SELECT run_id, cancel_reason FROM {schema}.run_leases
WHERE run_id = ANY(%(ids)b::uuid[]) AND cancel_requested
UNION ALL
SELECT run_id, reason FROM {schema}.run_cancels WHERE run_id = ANY(%(ids)b::uuid[]);
