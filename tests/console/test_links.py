"""An explanation's runs and backfills are links, their ids short (entrypoints/http/
console/links.py)."""

from __future__ import annotations

from entrypoints.http.console.links import linked_ids

RUN = "0721f69f-1b2c-4d5e-8f90-a1b2c3d4e5f6"
BACKFILL = "df97b01e-0000-4000-8000-000000000001"


def test_each_named_run_and_backfill_links_its_page_by_a_short_id() -> None:
    text = f"failed: run {RUN} failed: HTTP 500 (backfill {BACKFILL}; before it, run {RUN}: failed)"

    shown = str(linked_ids(text))

    run_link = f'run <a href="/ui/runs/{RUN}" title="{RUN}">0721f69f…</a>'
    backfill_link = (
        f'backfill <a href="/ui/runs?backfill={BACKFILL}" title="{BACKFILL}">df97b01e…</a>'
    )
    assert shown == (
        f"failed: {run_link} failed: HTTP 500 ({backfill_link}; before it, {run_link}: failed)"
    )


def test_the_rest_of_the_sentence_is_escaped_and_other_ids_stay_text() -> None:
    text = f'failed: run {RUN} failed: <script>alert("x")</script> task {RUN}'

    shown = str(linked_ids(text))

    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert shown.endswith(f"task {RUN}")  # only runs and backfills have pages to link
