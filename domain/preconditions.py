"""What a `PUT` by name's conditional headers allow (docs/api.md, "Headers"): one rule
for tasks and calendars alike."""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import CalendarVersionConflict, PreconditionNotMet, VersionConflict


@dataclass(frozen=True, slots=True)
class PutConditions:
    """`If-Match: "<version>"` (`version`), `If-Match: *` (`must_exist`) and
    `If-None-Match: *` (`only_create`) of one PUT."""

    version: int | None = None
    must_exist: bool = False
    only_create: bool = False

    def check(self, kind: str, name: str, stored: bool) -> None:
        """Raise VersionConflict when an `If-Match` finds no `kind` named `name`
        (`stored` false), PreconditionNotMet when `If-None-Match: *` finds one. Whether a
        stored one is at `version` is the caller's to check, with its own conflict."""
        if not stored and (self.version is not None or self.must_exist):
            # A calendar's conflict, so that the answer says to read the calendar again.
            conflict = CalendarVersionConflict if kind == "calendar" else VersionConflict
            raise conflict(
                name,
                -1 if self.version is None else self.version,
                detail=f"no {kind} named {name!r} exists (If-Match)",
            )
        if stored and self.only_create:
            raise PreconditionNotMet(f"a {kind} named {name!r} exists (If-None-Match: *)")
