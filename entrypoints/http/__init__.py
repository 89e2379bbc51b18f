"""The Litestar HTTP API: `create_app(container)` builds it."""

from entrypoints.http.app import create_app

__all__ = ["create_app"]
