"""The validation context of a value read back from a store.

A value read back was checked when it was written, or was written before a rule it would
now break (a calendar step's cap, a name shape) and must still be read: the checks
written in Python (a URL's parts, header names, caps added later) are skipped for it;
pydantic's own (types, lengths, patterns) still run. A claim reads thousands of targets
a second, and those checks were half of reading one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pydantic import ValidationInfo

# Read-only: one shared mapping, that no validator may change for every later read.
READ_BACK: Mapping[str, bool] = MappingProxyType({"stored": True})


def read_back(info: ValidationInfo) -> bool:
    """Whether this validation reads back a stored value (context `READ_BACK`)."""
    # By identity: an isinstance test against Mapping (an ABC) was a tenth of a claim.
    return info.context is READ_BACK
