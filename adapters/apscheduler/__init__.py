"""The engine on APScheduler 4 (the optional `apscheduler` extra): ADR 0002.

Every `apscheduler` import of the project lives in this package.
"""

from adapters.apscheduler.engine import APSchedulerEngine

__all__ = ["APSchedulerEngine"]
