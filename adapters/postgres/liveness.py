"""How a connection notices that its database vanished without a word.

A server that dies without resetting its connections (a host powered off, a failover
that moves an address, a network partition that drops packets) leaves a client that is
waiting for an answer waiting on a socket that will never speak again. The operating
system's defaults end such a connection only after two hours of silence (TCP
keepalive) or fifteen minutes of unacknowledged data, and meanwhile the replica's
engine is stuck in the middle of a pass: it claims nothing, and nothing says so.

So every connection the scheduler opens asks libpq for keepalive probes after 10 s of
silence (every 5 s, two unanswered ones end it) and for a user timeout of 20 s on data
the server has not acknowledged: a vanished database is noticed within about 20 s, the
pass fails like any lost connection, and the engine retries on a new one
(docs/reliability.md, "A database that vanishes silently"). A slow query is not
affected: a live server answers the probes while it works. A setting the URL gives
itself wins; a Unix-socket connection ignores them.
"""

from __future__ import annotations

from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

LIVENESS_DEFAULTS: dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": "10",  # seconds of silence before the first probe
    "keepalives_interval": "5",  # seconds between unanswered probes
    "keepalives_count": "2",  # unanswered probes that end the connection
    "tcp_user_timeout": "20000",  # milliseconds that sent data may stay unacknowledged
}


# libpq learned `tcp_user_timeout` in version 12; an older one refuses the keyword.
_USER_TIMEOUT_SINCE = 120000


def with_liveness(conninfo: str) -> str:
    """`conninfo` (a URL or a libpq keyword/value string) with LIVENESS_DEFAULTS for
    the settings it does not give itself (and that the libpq in use knows)."""
    given = conninfo_to_dict(conninfo)
    missing = {name: value for name, value in LIVENESS_DEFAULTS.items() if name not in given}
    if pq.version() < _USER_TIMEOUT_SINCE:
        missing.pop("tcp_user_timeout", None)
    return make_conninfo(conninfo, **missing) if missing else conninfo
