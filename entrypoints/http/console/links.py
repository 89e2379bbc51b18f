"""Sentences that name runs and backfills by id (an explanation's detail), with each id
a link to its page, shown short: a 36-character id is a string a person cannot use."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_NAMED_ID = re.compile(
    r"\b(run|backfill) ([0-9a-f]{8})(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"
)


def linked_ids(text: str) -> Markup:
    """`text`, escaped, with each "run <id>" and "backfill <id>" a link to that run's
    page or the backfill's runs, the id shortened to its first eight characters (the
    whole id in the link's title)."""

    def link(found: re.Match[str]) -> str:
        kind, head, rest = found.groups()
        whole = head + rest
        href = f"/ui/runs/{whole}" if kind == "run" else f"/ui/runs?backfill={whole}"
        return f'{kind} <a href="{href}" title="{whole}">{head}…</a>'

    # Safe: the text is escaped first (a hex id and its dashes come through it as they
    # are), and what is put in holds only those ids and fixed markup.
    return Markup(_NAMED_ID.sub(link, str(escape(text))))  # noqa: S704
