"""Errors the scheduler raises on purpose. Entry points map them to answers."""

from __future__ import annotations

from uuid import UUID

from domain.validation import FieldError


class SchedulerError(Exception):
    """Root of every error this project raises on purpose."""


class TaskNotFound(SchedulerError, LookupError):
    def __init__(self, ref: UUID | str) -> None:
        super().__init__(f"no task with id or name {str(ref)!r}")
        self.ref = ref


class RunNotFound(SchedulerError, LookupError):
    def __init__(self, run_id: UUID | str) -> None:
        super().__init__(f"no run with id {str(run_id)!r}")
        self.run_id = run_id


class DuplicateTaskName(SchedulerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a task named {name!r} already exists")
        self.name = name


class VersionConflict(SchedulerError):
    """The task changed since the version the caller read (a stale If-Match)."""

    def __init__(
        self,
        ref: UUID | str,
        expected: int,
        actual: int | None = None,
        *,
        detail: str | None = None,
    ) -> None:
        found = "" if actual is None else f", it is at version {actual}"
        super().__init__(detail or f"task {str(ref)!r} is not at version {expected}{found}")
        self.expected = expected
        self.actual = actual


class WriteContended(SchedulerError):
    """A write without If-Match lost to concurrent writers of the same row every time it
    tried (application/contention.py): nothing of it was written; retrying is safe."""

    def __init__(self, what: str, attempts: int) -> None:
        super().__init__(
            f"{what} was changed by other requests during each of {attempts} attempts to "
            "write it; nothing was changed, retry shortly"
        )


class ScheduleMoved(SchedulerError):
    """A write that re-plans a task's schedule found it moved since the task was read:
    a claim advanced it meanwhile (claims change no version). Written anyway, the plan
    made from the old read could claim those occurrences again, each a second call with
    its `Idempotency-Key`; the caller reads the task again and plans anew."""

    def __init__(self, task_id: UUID) -> None:
        super().__init__(f"task {task_id} was claimed while it was being changed")
        self.task_id = task_id


class PreconditionNotMet(SchedulerError):
    """A conditional write whose condition does not hold: `If-Match` naming a task that
    does not exist, `If-None-Match: *` naming one that does."""


class RunNotRunning(SchedulerError):
    def __init__(self, run_id: UUID | str, status: str) -> None:
        super().__init__(f"run {str(run_id)!r} is {status}, not running")
        self.run_id = run_id
        self.status = status


class InvalidRequest(SchedulerError, ValueError):
    """A request that breaks a rule. Each error names its field by the dotted path in the
    request as the client wrote it ("trigger.expression")."""

    def __init__(self, field: str, message: str) -> None:
        self.errors = [FieldError(field, message)]
        super().__init__(f"{field}: {message}")

    @property
    def field(self) -> str:
        return self.errors[0].field

    @property
    def message(self) -> str:
        return self.errors[0].message

    @classmethod
    def of(cls, errors: list[FieldError]) -> InvalidRequest:
        first, *rest = errors
        invalid = cls(first.field, first.message)
        invalid.errors.extend(rest)
        invalid.args = ("; ".join(f"{e.field}: {e.message}" for e in errors),)
        return invalid


class StoreUnavailable(SchedulerError):
    """The store could not be reached (connection lost, server restarting).

    The failed call's transaction rolled back, unless the connection died after its
    COMMIT was sent and before the answer came (CommitUnanswered): then it may have
    landed.
    """


class TransactionCollided(StoreUnavailable):
    """The database rolled the transaction back for colliding with another (a deadlock,
    a serialization failure): nothing of it was written, and trying it again at once
    is safe. Unavailable to every caller that does not try again itself (a 503)."""


class CommitUnanswered(StoreUnavailable):
    """The connection was lost after the transaction's COMMIT was sent and before its
    answer came: the transaction may have landed, or not. A claim or a manual run looks
    for its runs before giving them up (they are called when they were written)."""


class CalendarNotFound(SchedulerError, LookupError):
    def __init__(self, ref: UUID | str) -> None:
        super().__init__(f"no calendar with id or name {str(ref)!r}")
        self.ref = ref


class DuplicateCalendarName(SchedulerError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a calendar named {name!r} already exists")
        self.name = name


class CalendarInUse(SchedulerError):
    """A calendar that tasks name cannot be deleted (docs/api.md, "Calendars")."""

    def __init__(self, name: str, tasks: list[str]) -> None:
        shown = ", ".join(repr(task) for task in tasks[:20])
        more = f" and {len(tasks) - 20} more" if len(tasks) > 20 else ""
        super().__init__(f"calendar {name!r} is named by tasks {shown}{more}; change them first")
        self.name = name
        self.tasks = tasks


class CalendarVersionConflict(VersionConflict):
    """The calendar changed since the version the caller read (a stale If-Match)."""

    def __init__(
        self, name: str, expected: int, actual: int | None = None, *, detail: str | None = None
    ) -> None:
        found = "" if actual is None else f", it is at version {actual}"
        detail = detail or f"calendar {name!r} is not at version {expected}{found}"
        super().__init__(name, expected, actual, detail=detail)


class BackfillNotFound(SchedulerError, LookupError):
    def __init__(self, backfill_id: UUID | str) -> None:
        super().__init__(f"no backfill with id {str(backfill_id)!r}")
        self.backfill_id = backfill_id
