"""What runs in a template worker process (`adapters.http.template_workers`): renders,
one at a time, under a bound on the process's memory. `main` reads requests on stdin
and writes answers on stdout, each a 4-byte length and that many bytes of JSON, after
an empty one that says it is ready.

The bounds of `template_limits` look at the operations they know before they run; one
they do not know can still build a large value from small arguments (`indent` of a
million lines, `wordwrap` with a long break, `urlize` with a long `target`). Here such
a value meets the address-space limit this process set on itself, and the process that
claims and calls goes on: it only waits, and stops waiting after a timeout.

Requests and answers are JSON, never pickles: what a worker sends back was made by a
template, and the process that reads it must not run what it reads. A worker whose
memory stays grown after a render (past RESIDENT_GROWTH) says so, and is replaced.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import struct
import sys
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from pydantic import JsonValue

from adapters.http.templates import TemplateFailed, Templates

# A worker that answers with this is to be replaced: a render left it holding more
# memory than it started with by RESIDENT_GROWTH (CPython may keep what it took).
SPENT = "spent"
RESIDENT_GROWTH = 64 * 1024 * 1024

# Requests and answers: a 4-byte length, then JSON in UTF-8 (a lone surrogate, which a
# template may print, passed as it is).
FRAME = struct.Struct(">I")
_PR_SET_PDEATHSIG = 1


def dump(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def load(data: bytes) -> Any:
    return json.loads(data.decode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class TemplateStrings:
    """What `Templates.render` reads of a target: its url, header values and body."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: JsonValue = None


def serve(requests: BinaryIO, answers: BinaryIO, memory_bytes: int) -> None:
    """Answer renders until `requests` ends (the parent closed it, or is gone)."""
    _limit_memory(memory_bytes)
    templates = Templates()
    resident = _resident()
    answers.write(FRAME.pack(0))  # ready: its imports are done
    answers.flush()
    while True:
        head = requests.read(FRAME.size)
        if len(head) < FRAME.size:
            return
        answer = _answer(templates, load(requests.read(FRAME.unpack(head)[0])))
        if _resident() - resident > RESIDENT_GROWTH:
            answer[SPENT] = True
        data = dump(answer)
        answers.write(FRAME.pack(len(data)) + data)
        answers.flush()


def _answer(templates: Templates, request: dict[str, Any]) -> dict[str, Any]:
    strings = TemplateStrings(**request["target"])
    try:
        url, headers, body = templates.render(strings, request["context"])
    except TemplateFailed as exc:  # out of memory too: a failed allocation is given back
        return {"failed": [exc.field, exc.detail]}
    return {"rendered": [url, headers, body]}


def _resident() -> int:
    return _statm(1)


def _limit_memory(memory_bytes: int) -> None:
    """Allow this process `memory_bytes` of address space beyond what it has mapped."""
    limit = _statm(0) + memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _statm(column: int) -> int:
    """Bytes from /proc/self/statm: column 0 what is mapped, 1 what is resident."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[column]) * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    """The worker process: `python -c "...; main()" MEMORY_BYTES PARENT_PID`."""
    _die_with_parent(int(sys.argv[2]))
    serve(sys.stdin.buffer, sys.stdout.buffer, int(sys.argv[1]))


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux's
    PR_SET_PDEATHSIG): a worker busy with a long render when its replica was killed
    would otherwise run it to its end, seconds of CPU for nobody."""
    # Not Linux: the closed pipe still ends it, once its render is done.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before the request above took effect
        os._exit(0)
