"""The HTTP executor adapter: calls task targets with httpx behind the outbound guard."""

from adapters.http.executor import HttpExecutor
from adapters.http.guard import OutboundDenied, OutboundGuard
from adapters.http.settings import HttpExecutorSettings

__all__ = ["HttpExecutor", "HttpExecutorSettings", "OutboundDenied", "OutboundGuard"]
