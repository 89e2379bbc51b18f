"""The cron tests' shared setup (test_triggers_cron_*): the zones they name, and builders
of UTC instants and cron triggers.

Transitions used (from zoneinfo, 2026 unless said):
- America/New_York: 03-08 02:00 EST -> 03:00 EDT (07:00Z); 11-01 02:00 EDT -> 01:00 EST (06:00Z)
- Europe/London: 03-29 01:00 GMT -> 02:00 BST (01:00Z); 10-25 02:00 BST -> 01:00 GMT (01:00Z)
- Australia/Lord_Howe (30 min): 10-04 02:00 +10:30 -> 02:30 +11 (10-03 15:30Z);
  04-05 02:00 +11 -> 01:30 +10:30 (04-04 15:00Z)
- America/Santiago (midnight): 04-05 00:00 -03 -> 04-04 23:00 -04 (04-05 03:00Z);
  09-06 00:00 -04 -> 01:00 -03 (09-06 04:00Z)
- America/Havana (midnight): 03-08 00:00 -05 -> 01:00 -04 (05:00Z); 11-01 01:00 -04 -> 00:00 -05
  (05:00Z)
- Pacific/Apia: 2011-12-29 23:59:59 -10 -> 2011-12-31 00:00 +14 (2011-12-30 10:00Z)
"""

from __future__ import annotations

from datetime import datetime, timezone

from domain.triggers import CronTrigger

UTC = timezone.utc
NY = "America/New_York"
LONDON = "Europe/London"
LORD_HOWE = "Australia/Lord_Howe"
SANTIAGO = "America/Santiago"
HAVANA = "America/Havana"
APIA = "Pacific/Apia"


def utc(
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    microsecond: int = 0,
) -> datetime:
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)


def cron(expression: str, zone: str = "UTC", **bounds: datetime) -> CronTrigger:
    return CronTrigger(expression=expression, timezone=zone, **bounds)
