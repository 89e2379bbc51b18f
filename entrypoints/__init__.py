"""Entry points: settings, the composition root (container), the HTTP API and the CLI."""
