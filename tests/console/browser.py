"""A real Chromium (Debian's package) driven by Playwright, with no browser download.

Under CI=true a missing browser or Playwright fails the tests; elsewhere it skips them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.fixtures.ci import missing as ci_missing

CHROMIUM = os.environ.get("SCHEDULER_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Where a failing browser test leaves its screenshot (git ignores it).
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".artifacts" / "console"


def missing(reason: str) -> None:
    """Fail under CI (the browser tests must run there), skip elsewhere."""
    ci_missing(f"browser tests cannot run: {reason}")


def launch(playwright: Any) -> Any:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
