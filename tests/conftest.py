"""Shared fixtures. Store fixtures live in tests/fixtures/, one module per adapter."""

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.memory",
    "tests.fixtures.postgres",
    "tests.fixtures.backends",
    "tests.fixtures.target",
    "tests.fixtures.logs",
    "tests.fixtures.proxy",
]
