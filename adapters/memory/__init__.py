"""The in-memory adapter: a TaskStore, its wakers and a no-op executor, in one process."""

from adapters.memory.executor import NoopExecutor
from adapters.memory.store import InMemoryTaskStore
from adapters.memory.waker import InMemoryNotifier, InMemoryWaker

__all__ = ["InMemoryNotifier", "InMemoryTaskStore", "InMemoryWaker", "NoopExecutor"]
