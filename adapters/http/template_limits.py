"""What one render of a target's templates may cost (docs/api.md, "Templates").

Rendering runs on the event loop of the process that claims, calls and answers the API,
and whoever may write a task writes its templates (a dry run, which a read-only token
may ask for, renders too), so a render is bounded:

- **CPU**: a render may use `MAX_CPU_SECONDS` of this thread's CPU time, looked at on
  every step and every operation below;
- **steps**: every block the render enters (each iteration of a loop, each call of a
  macro, the template itself) is a step, and a render may take `step_limit(source)`
  of them, fewer for a longer template (a step may write its whole text);
- **text made**: what `{{ … }}` prints, and what `~`, `+`, `*`, a filter or a method
  builds, adds up to at most `MAX_MADE_CHARS` in one render, and no one of them may
  build more than `MAX_RENDERED_CHARS`: sizes a call asks for (a width, a count, a
  format's width) are looked at before it runs;
- integers: `*` and `**` may not build one of more than `MAX_INT_BITS` bits;
- the sandbox is the immutable one: no method changes a list, dict or set in place, and
  `lipsum` is gone.

The steps are counted by code the template is compiled with (`StepCounting` puts a call
at the start of every block), so a template pays a function call per block entered.
"""

from __future__ import annotations

import functools
import operator
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

# What one string may render to, and what one operation may build.
MAX_RENDERED_CHARS = 1_000_000
# What one render may build in all: printed, joined, multiplied, returned by calls.
MAX_MADE_CHARS = 10 * MAX_RENDERED_CHARS
# Steps for the shortest templates, and the text their steps may write in all: a loop
# of a template of N characters may repeat it MAX_STEP_CHARS / N times.
MAX_STEPS = 100_000
MAX_STEP_CHARS = 100_000_000
MAX_CPU_SECONDS = 1.0
MAX_INT_BITS = 100_000
_MAX_EXPONENT = 1_000

# A width or precision of a million or more in a format ("{:>1000000}", "%1000000d"),
# or one taken from the arguments ("%*d").
_HUGE_STR_FORMAT = re.compile(r"\{[^{}]*:[^{}]*\d{7,}[^{}]*\}")
_HUGE_PERCENT_FORMAT = re.compile(r"%[-+ #0]*(\d{7,}|\*)|%[-+ #0]*\d*\.(\d{7,}|\*)")


def step_limit(source_chars: int) -> int:
    """The steps a render of templates `source_chars` long in all may take."""
    return max(1, min(MAX_STEPS, MAX_STEP_CHARS // max(1, source_chars)))


class StepCounting(CodeGenerator):
    """Compiles a template so that entering any block counts a step, and `~` checks
    the length of what it joins."""

    def blockvisit(self, nodes_: Iterable[nodes.Node], frame: Frame) -> None:
        self.writeline("environment.step()")
        super().blockvisit(nodes_, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.joined((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Render(threading.local):
    steps = 0
    steps_left = 0
    made_left = 0
    cpu_until = 0.0


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """A sandbox whose renders are bounded; call `begin` before each render."""

    code_generator_class = StepCounting
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        self._render = _Render()
        printed = options.pop("finalize")

        def finalize(value: Any) -> Any:
            shown = printed(value)
            self._made(len(shown) if isinstance(shown, str) else len(str(shown)), "printed")
            return shown

        super().__init__(finalize=finalize, **options)
        del self.globals["lipsum"]  # paragraphs of Latin, made by a loop no step counts
        self.filters = {name: self._bounded_filter(name, f) for name, f in self.filters.items()}

    def begin(self, source_chars: int) -> None:
        """A render of templates `source_chars` long in all starts."""
        render = self._render
        render.steps = render.steps_left = step_limit(source_chars)
        render.made_left = MAX_MADE_CHARS
        render.cpu_until = time.thread_time() + MAX_CPU_SECONDS

    def step(self) -> None:
        render = self._render
        render.steps_left -= 1
        if render.steps_left < 0:
            raise SecurityError(
                f"the template took more than {render.steps} steps (loop iterations, "
                "macro calls); a longer template may take fewer"
            )
        self._check_cpu()

    def _check_cpu(self) -> None:
        if time.thread_time() > self._render.cpu_until:
            raise SecurityError(f"the template used more than {MAX_CPU_SECONDS:g} s of CPU")

    def _made(self, chars: int, how: str = "built") -> None:
        render = self._render
        render.made_left -= chars
        if render.made_left < 0:
            raise SecurityError(f"the template {how} more than {MAX_MADE_CHARS} characters")

    def _result(self, value: Any, what: str) -> Any:
        """Count what an operation built; refuse one past the bound of one operation."""
        if isinstance(value, str | bytes | list | tuple):
            if len(value) > MAX_RENDERED_CHARS:
                raise SecurityError(f"the result of {what} would be too large")
            self._made(len(value))
        self._check_cpu()
        return value

    def joined(self, parts: Iterable[Any]) -> str:
        texts = [str(part) for part in parts]
        if sum(map(len, texts)) > MAX_RENDERED_CHARS:
            raise SecurityError("the result of ~ would be too large")
        return str(self._result("".join(texts), "~"))

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        _check_binop(operator_, left, right)
        return self._result(_BINOPS[operator_](left, right), operator_)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        # range caps itself; dict, namespace and a format take values, not sizes.
        if not getattr(__obj, "_takes_values", False) and not any(
            __obj is f for f in __self.globals.values()
        ):
            _check_sizes(args, kwargs)
        if getattr(__obj, "__name__", "") == "replace" and len(args) >= 2:
            _check_replace(getattr(__obj, "__self__", None), args[0], args[1])
        return __self._result(super().call(__context, __obj, *args, **kwargs), "a call")

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        fmt = getattr(value, "__self__", None)
        if isinstance(fmt, str) and _HUGE_STR_FORMAT.search(fmt):
            raise SecurityError("a width or precision in this format is too large")
        formats = super().wrap_str_format(value)
        if formats is not None:
            formats._takes_values = True  # type: ignore[attr-defined]
        return formats

    def _bounded_filter(self, name: str, f: Callable[..., Any]) -> Callable[..., Any]:
        """`f`, with the sizes its arguments ask for looked at first (its value, the
        first argument after any context Jinja passes, is not a size; nor are the
        values a format is given) and what it returns counted."""
        at = 1 if hasattr(f, "jinja_pass_arg") else 0

        @functools.wraps(f)
        def bounded(*args: Any, **kwargs: Any) -> Any:
            value = args[at] if len(args) > at else None
            if name == "format":
                if isinstance(value, str):
                    _check_percent_format(value)
            else:
                _check_sizes(args[at + 1 :], kwargs)
            if name == "join" and len(args) > at + 1:
                if value is not None and not hasattr(value, "__len__"):  # an iterator
                    value = list(value)
                    args = (*args[:at], value, *args[at + 1 :])
                _check_join(value, args[at + 1])
            if name == "replace" and len(args) > at + 2:
                _check_replace(value, args[at + 1], args[at + 2])
            return self._result(f(*args, **kwargs), f"the filter {name}")

        return bounded


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "*": operator.mul,
    "**": operator.pow,
    "+": operator.add,
    "%": operator.mod,
}


def _check_binop(operator_: str, left: Any, right: Any) -> None:
    if operator_ == "**":
        if isinstance(right, int | float) and abs(right) > _MAX_EXPONENT:
            raise SecurityError(f"exponent above {_MAX_EXPONENT}")
        if _integer(left) and _integer(right) and left.bit_length() * right > MAX_INT_BITS:
            raise SecurityError("the result of ** would be too large")
    elif operator_ == "*":
        if (
            _integer(left)
            and _integer(right)
            and left.bit_length() + right.bit_length() > MAX_INT_BITS
        ):
            raise SecurityError("the result of * would be too large")
        for sequence, count in ((left, right), (right, left)):
            if _sized(sequence) and _integer(count) and len(sequence) * count > MAX_RENDERED_CHARS:
                raise SecurityError("the result of * would be too large")
    elif operator_ == "+":
        if _sized(left) and _sized(right) and len(left) + len(right) > MAX_RENDERED_CHARS:
            raise SecurityError("the result of + would be too large")
    elif operator_ == "%" and isinstance(left, str):
        _check_percent_format(left)


def _check_percent_format(fmt: str) -> None:
    if _HUGE_PERCENT_FORMAT.search(fmt):
        raise SecurityError("a width or precision in this format is too large")


def _check_sizes(args: Iterable[Any], kwargs: dict[str, Any]) -> None:
    """An integer argument past the bound of one operation is a size no call needs (a
    width, a count of slices): refused before the call builds it."""
    for value in (*args, *kwargs.values()):
        if _integer(value) and abs(value) > MAX_RENDERED_CHARS:
            raise SecurityError(f"an argument of {value} is too large for a template")


def _check_join(items: Any, separator: Any) -> None:
    if (
        isinstance(separator, str)
        and hasattr(items, "__len__")
        and len(separator) * max(0, len(items) - 1) > MAX_RENDERED_CHARS
    ):
        raise SecurityError("the result of join would be too large")


def _check_replace(text: Any, old: Any, new: Any) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        grows = text.count(old) * (len(new) - len(old)) if old else (len(text) + 1) * len(new)
        if len(text) + grows > MAX_RENDERED_CHARS:
            raise SecurityError("the result of replace would be too large")


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)
