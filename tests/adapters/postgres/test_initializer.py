"""The initializer: idempotent, upgrades by added columns, safe when run concurrently,
and precise about a malformed schemata.toml."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

import pytest

from adapters.postgres import PostgresTaskStore, SchemataError, create_pool, initialize
from adapters.postgres.initializer import initialize_sync
from adapters.postgres.queries import RUN_COLUMNS, TASK_COLUMNS
from adapters.postgres.schemata import parse_schemata, read_schemata
from domain.errors import StoreUnavailable
from tests.adapters.postgres.support import T0, query
from tests.fixtures.postgres import drop_schema
from tests.fixtures.tasks import make_task

ROOT_FILE = Path(__file__).resolve().parents[3] / "schemata.toml"


@pytest.fixture
async def fresh_schema(database_url: str) -> AsyncIterator[str]:
    """A schema name nobody has initialized yet; dropped afterwards."""
    schema = f"i_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        await drop_schema(database_url, schema)


@asynccontextmanager
async def initialized_store(url: str, schema: str) -> AsyncIterator[PostgresTaskStore]:
    """A store on `schema`, initialized, over a pool of one connection (as a replica's
    statements are prepared on it)."""
    await initialize(url, schema)
    pool = create_pool(url, max_size=1)
    await pool.open(wait=True)
    try:
        yield PostgresTaskStore(pool, schema)
    finally:
        await pool.close()


async def shape(url: str, schema: str) -> list[tuple[str, ...]]:
    """Everything the initializer creates, as the catalog sees it."""
    columns = await query(
        url,
        "SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, '')"
        " FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
        schema,
        schema,
    )
    indexes = await query(
        url,
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1, 2",
        schema,
        schema,
    )
    constraints = await query(
        url,
        "SELECT conname, pg_get_constraintdef(c.oid) FROM pg_constraint AS c"
        " JOIN pg_namespace AS n ON n.oid = c.connamespace WHERE n.nspname = %s ORDER BY 1",
        schema,
        schema,
    )
    return [*columns, *indexes, *constraints]


@pytest.mark.postgres
async def test_running_twice_changes_nothing(database_url: str, fresh_schema: str) -> None:
    done = await initialize(database_url, fresh_schema)
    assert any("CREATE TABLE" in statement for statement in done)
    before = await shape(database_url, fresh_schema)
    assert await initialize(database_url, fresh_schema) == []
    assert await asyncio.to_thread(initialize_sync, database_url, fresh_schema) == []
    assert await shape(database_url, fresh_schema) == before


@pytest.mark.postgres
async def test_the_declared_shape_is_created(database_url: str, fresh_schema: str) -> None:
    await initialize(database_url, fresh_schema)
    found = await shape(database_url, fresh_schema)
    columns = {(row[0], row[1]) for row in found if len(row) == 5}
    assert {("tasks", name) for name in TASK_COLUMNS} <= columns
    assert {("runs", name) for name in RUN_COLUMNS} <= columns
    definitions = {row[1]: row[2] for row in found if len(row) == 3}
    assert definitions["tasks_due_idx"].endswith("(next_run_at, id) WHERE enabled")
    assert "(task_id, scheduled_for DESC, id DESC)" in definitions["runs_history_idx"]
    assert "WHERE (status = 'running'::text)" in definitions["runs_running_idx"]
    constraints = {row[0]: row[1] for row in found if len(row) == 2}
    assert constraints["run_leases_task_id_fkey"].endswith("ON DELETE CASCADE")
    assert "runs_task_id_fkey" not in constraints  # a deleted task's runs stay


@pytest.mark.postgres
async def test_an_added_column_upgrades_an_existing_database(
    database_url: str, fresh_schema: str, tmp_path: Path
) -> None:
    async with initialized_store(database_url, fresh_schema) as store:
        task = await store.create_task(make_task())
        for _ in range(6):  # let psycopg prepare the statements on this connection
            await store.get_task(task.id)
        # A column and an index on the last table, run_leases.
        head, column, tail = ROOT_FILE.read_text().rpartition('replica = "text NOT NULL"\n')
        upgraded = head + column + "note = \"text DEFAULT 'none'\"\n" + tail
        # And one on tasks, whose statements this connection has prepared.
        upgraded = upgraded.replace(
            'version = "integer NOT NULL DEFAULT 1"\n',
            'version = "integer NOT NULL DEFAULT 1"\nlabel = "text"\n',
            1,
        )
        upgraded += (
            '\n[[tables.indexes]]\nname = "run_leases_note_idx"\ncolumns = ["note"]\n'
            "where = \"note <> 'none'\"\n"
        )
        path = tmp_path / "schemata.toml"
        path.write_text(upgraded)
        done = await initialize(database_url, fresh_schema, path=path)
        assert done == [
            f'ALTER TABLE "{fresh_schema}"."tasks" ADD COLUMN IF NOT EXISTS "label" text',
            f'ALTER TABLE "{fresh_schema}"."run_leases" ADD COLUMN IF NOT EXISTS "note" text'
            " DEFAULT 'none'",
            f'CREATE INDEX IF NOT EXISTS "run_leases_note_idx" ON "{fresh_schema}"."run_leases"'
            " USING btree (\"note\") WHERE note <> 'none'",
        ]
        assert await initialize(database_url, fresh_schema, path=path) == []
        # The rows that were there, and the statements prepared before, still work.
        assert await store.get_task(task.id) == task
        [claimed] = await store.claim_due(T0, 10, "r")
        notes = await query(database_url, "SELECT note FROM {schema}.run_leases", fresh_schema)
        assert notes == [("none",)]
        assert claimed.run.task_id == task.id


@pytest.mark.postgres
async def test_concurrent_initializers_are_safe(database_url: str, fresh_schema: str) -> None:
    results = await asyncio.gather(*(initialize(database_url, fresh_schema) for _ in range(5)))
    assert sorted(map(bool, results)) == [False] * 4 + [True]
    assert await initialize(database_url, fresh_schema) == []


@pytest.mark.postgres
async def test_an_unreachable_server_is_store_unavailable(fresh_schema: str) -> None:
    with pytest.raises(StoreUnavailable):
        await initialize("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2", fresh_schema)


def test_the_packaged_copy_is_the_root_file() -> None:
    packaged = resources.files("adapters.postgres").joinpath("schemata.toml").read_text()
    assert packaged == ROOT_FILE.read_text()
    assert read_schemata() == parse_schemata(ROOT_FILE.read_text())


MINIMAL = """
[[tables]]
name = "things"
[tables.columns]
id = "uuid NOT NULL"
state = "text"
[tables.primary_key]
columns = ["id"]
"""


@pytest.mark.parametrize(
    ("old", "new", "table", "key"),
    [
        pytest.param('state = "text"', 'state = "texte"', "things", "columns.state", id="type"),
        pytest.param(
            'state = "text"',
            'state = "text; DROP TABLE x"',
            "things",
            "columns.state",
            id="injected-type",
        ),
        pytest.param(
            'state = "text"',
            "state = \"text DEFAULT (SELECT 'x')\"",
            "things",
            "columns.state",
            id="default-not-literal",
        ),
        pytest.param('state = "text"', "state = 3", "things", "columns.state", id="not-a-string"),
        pytest.param('state = "text"', '"State" = "text"', "things", "columns.State", id="name"),
        pytest.param("[tables.columns]", "[tables.colums]", "things", "colums", id="unknown-key"),
        pytest.param('columns = ["id"]', 'columns = ["ident"]', "things", "primary_key.columns"),
        pytest.param('name = "things"', 'name = "things; --"', "#1", "name", id="table-name"),
        pytest.param(
            'columns = ["id"]',
            'columns = ["id"]\n[[tables.indexes]]\nname = "things_state"\ncolumns = ["status"]',
            "things",
            "indexes[0].columns",
            id="index-column",
        ),
        pytest.param(
            'columns = ["id"]',
            'columns = ["id"]\n[[tables.indexes]]\nname = "s"\ncolumns = ["state"]\n'
            "where = \"state = 'a'; DROP TABLE things\"",
            "things",
            "indexes[0].where",
            id="injected-predicate",
        ),
        pytest.param(
            'columns = ["id"]',
            'columns = ["id"]\n[[tables.foreign_keys]]\nname = "fk"\ncolumns = ["id"]\n'
            'references = { table = "elsewhere", columns = ["id"] }',
            "things",
            "foreign_keys[0].references.table",
            id="foreign-table",
        ),
    ],
)
def test_a_malformed_file_names_the_table_and_key(old: str, new: str, table: str, key: str) -> None:
    assert old in MINIMAL
    with pytest.raises(SchemataError) as error:
        parse_schemata(MINIMAL.replace(old, new, 1))
    assert (error.value.table, error.value.key) == (table, key)
    assert f"table {table!r}, key {key!r}" in str(error.value)


def test_a_file_that_is_not_toml() -> None:
    with pytest.raises(SchemataError, match="not valid TOML"):
        parse_schemata("[[tables]\nname =")


def test_the_minimal_file_parses() -> None:
    [table] = parse_schemata(MINIMAL)
    assert (table.name, [c.definition for c in table.columns]) == (
        "things",
        ["uuid NOT NULL", "text"],
    )


@pytest.mark.postgres
async def test_a_database_from_before_task_history_gets_a_version_of_each_task(
    database_url: str, fresh_schema: str
) -> None:
    async with initialized_store(database_url, fresh_schema) as store:
        task = await store.create_task(make_task())
        # As a version of the scheduler that kept no history left it.
        await query(database_url, "DROP TABLE {schema}.task_history", fresh_schema)

        done = await initialize(database_url, fresh_schema)

        assert any(statement.startswith("INSERT INTO") for statement in done)
        [version] = await store.task_history(task.id, None, 10)
        assert (version.version, version.at, version.changes) == (
            task.version,
            task.created_at,
            {},
        )
        assert version.state == task.spec().model_dump(mode="json")
        assert await store.task_version_at(task.id, task.created_at) == version
        assert await initialize(database_url, fresh_schema) == []  # once
        # The next change is recorded against it: only what changed.
        changed = task.model_copy(update={"description": "after the upgrade"})
        await store.update_task(changed, task.version, reschedule=False, actor="ops")
        newest, _ = await store.task_history(task.id, None, 10)
        assert (newest.actor, set(newest.changes)) == ("ops", {"description"})
