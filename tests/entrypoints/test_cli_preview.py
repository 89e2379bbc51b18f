"""`imbi-scheduler preview`: fire times printed local and UTC for each trigger kind, a
DST policy and a calendar file tried before a task uses them, and bad input named by its
option (exit 65)."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain.errors import InvalidRequest
from entrypoints.cli import EXIT_CODES, main

pytestmark = pytest.mark.usefixtures("no_scheduler_environment")


def test_preview_prints_local_and_utc_fire_times(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "preview",
            "30 2 * * *",
            "--timezone",
            "America/New_York",
            "--count",
            "4",
            "--after",
            "2026-03-06T12:00:00Z",
        ]
    )

    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split() == ["local", "(America/New_York)", "UTC", "flags"]
    # 02:30 on 2026-03-08 does not exist in New York: it fires at 03:30 EDT.
    assert [line.split() for line in lines[1:]] == [
        ["2026-03-07", "02:30:00", "EST", "(-05:00)", "2026-03-07T07:30:00Z"],
        [
            "2026-03-08",
            "03:30:00",
            "EDT",
            "(-04:00)",
            "2026-03-08T07:30:00Z",
            "gap_shifted,",
            "named",
            "2026-03-08",
            "02:30:00",
        ],
        ["2026-03-09", "02:30:00", "EDT", "(-04:00)", "2026-03-09T06:30:00Z"],
        ["2026-03-10", "02:30:00", "EDT", "(-04:00)", "2026-03-10T06:30:00Z"],
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(
            ["--every", "PT6H", "--start-at", "2026-01-01T00:00:00Z"],
            ["2026-01-01T06:00:00Z", "2026-01-01T12:00:00Z"],
            id="interval",
        ),
        pytest.param(
            ["--months", "1", "--hour", "9", "--start-date", "2026-01-31"],
            ["2026-01-31T09:00:00Z", "2026-02-28T09:00:00Z"],
            id="calendar-month-end",
        ),
        pytest.param(
            ["--run-at", "2026-03-08T02:30:00", "--timezone", "America/New_York"],
            ["2026-03-08T07:30:00Z"],
            id="one-shot-in-a-gap",
        ),
    ],
)
def test_preview_of_the_other_trigger_kinds(
    capsys: pytest.CaptureFixture[str], args: list[str], expected: list[str]
) -> None:
    code = main(["preview", *args, "--count", "2", "--after", "2026-01-01T00:00:00Z"])

    lines = capsys.readouterr().out.splitlines()[1:]
    assert code == 0
    assert [line.split()[4] for line in lines if line[0].isdigit()] == expected
    assert ("(no more fire times)" in lines) == (len(expected) < 2)


def test_preview_reads_no_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A preview on an operator's shell, whose server settings are not this command's.
    monkeypatch.setenv("SCHEDULER_PORT", "not a port")
    monkeypatch.setenv("SCHEDULER_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")

    code = main(["preview", "0 9 * * *", "--count", "1", "--after", "2026-01-01T00:00:00Z"])

    assert code == 0
    assert capsys.readouterr().out.splitlines()[1].split()[4] == "2026-01-01T09:00:00Z"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["61 * * * *"], "EXPR"),
        (["* * * * *", "--timezone", "Mars/Olympus"], "--timezone"),
        (["--every", "0"], "--every"),
        (["--every", "-5"], "--every: must be a positive number of seconds, got -5"),
        (["* * * * *", "--count", "500"], "--count"),
        (["* * * * *", "--after", "yesterday"], "--after"),
    ],
)
def test_bad_preview_input_exits_65_naming_the_option(
    capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    code = main(["preview", *args])

    err = capsys.readouterr().err
    assert code == EXIT_CODES[InvalidRequest] == 65
    assert err.startswith(f"imbi-scheduler: error: {option}")


def test_preview_tries_a_dst_policy_and_a_calendar_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ics = tmp_path / "closed.ics"
    ics.write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:1\r\n"
        "DTSTART;VALUE=DATE:20260302\r\nDTEND;VALUE=DATE:20260304\r\nEND:VEVENT\r\n"
        "END:VCALENDAR\r\n"
    )
    code = main(
        [
            "preview",
            "0 9 * * *",
            "--calendar",
            str(ics),
            "--calendar-policy",
            "previous_business_day",
            "--after",
            "2026-02-28T10:00:00Z",
            "--count",
            "3",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    # 03-02 rolls back onto 03-01 09:00 (fires once, as that one); 03-03 would pass 03-02.
    assert [line.split()[4] for line in out.splitlines()[1:4]] == [
        "2026-03-01T09:00:00Z",
        "2026-03-04T09:00:00Z",
        "2026-03-05T09:00:00Z",
    ]
    assert "not fired: 2026-03-03 09:00:00  rolled_away (closed)" in out
    assert "fired as another: 2026-03-02 09:00:00  merged (closed)" in out

    code = main(
        [
            "preview",
            "30 1 * * *",
            "--timezone",
            "America/New_York",
            "--dst",
            "fold=both",
            "--after",
            "2026-11-01T00:00:00Z",
            "--count",
            "2",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [line.split()[-1] for line in lines[1:]] == ["fold_first", "fold_second"]

    # Every second of the two closed days: the first 1,000 not fired, and a word that
    # there are more.
    code = main(
        [
            "preview",
            "* * * * * *",
            "--calendar",
            str(ics),
            "--after",
            "2026-03-02T00:00:00Z",
            "--count",
            "1",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[1].split()[4] == "2026-03-04T00:00:00Z"
    assert sum(line.startswith("not fired: 2026-03-02 ") for line in lines) == 1000
    assert lines[-1] == "(and more not fired: only the first 1000 are told)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dst", "gap=never"], "--dst gap: Input should be"),
        (["--dst", "gaps=skip"], "--dst: 'gaps=skip': write gap=VALUE"),
        (["--calendar", "bad.ics"], "--calendar: line 3 does not parse as iCalendar"),
        (["--calendar", "bad.json"], "bad.json is not JSON: Expecting value at line 2"),
        (["--calendar", "twice.json"], "twice.json weekdays: given twice in one object"),
        (["--calendar", "dates.json"], "--calendar.dates.0: "),
    ],
)
def test_preview_rejects_a_bad_policy_or_calendar_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "bad.ics").write_text("BEGIN:VCALENDAR\nVERSION:2.0\nnot a line\nEND:VCALENDAR\n")
    (tmp_path / "bad.json").write_text('{\n  "weekdays": [SAT]\n}')
    (tmp_path / "twice.json").write_text('{"weekdays": ["SAT"], "weekdays": ["SUN"]}')
    (tmp_path / "dates.json").write_text('{"dates": ["2026-02-30"]}')
    args = [str(tmp_path / a) if a.endswith((".ics", ".json")) else a for a in args]
    code = main(["preview", "0 9 * * *", *args])
    assert code == 65
    assert message in capsys.readouterr().err
