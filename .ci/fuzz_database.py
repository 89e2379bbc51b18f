"""A throwaway database for .ci/fuzz on the server SCHEDULER_TEST_DATABASE_URL names.

create NETNS SOCKET_DIR: create one and print its URL (through the Unix socket in
SOCKET_DIR when NETNS is set, since a private network namespace cannot reach TCP
127.0.0.1 outside it); drop URL: drop it.
"""

from __future__ import annotations

import os
import sys
import uuid

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

SERVER = os.environ.get("SCHEDULER_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def create(netns: str, socket_dir: str) -> str:
    name = f"scheduler_fuzz_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = conninfo_to_dict(SERVER)
    params["dbname"] = name
    if netns:
        params["host"] = socket_dir
        params.pop("hostaddr", None)
    return make_conninfo(**params)


def drop(url: str) -> None:
    name = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
        )


if __name__ == "__main__":
    if sys.argv[1] == "create":
        print(create(sys.argv[2], sys.argv[3]))
    else:
        drop(sys.argv[2])
