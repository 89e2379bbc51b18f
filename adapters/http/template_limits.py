"""What one render of a target's templates may cost (docs/api.md, "Templates").

Rendering runs on the event loop, and whoever may write a task writes its templates, so
a render is bounded, or one task could hold a replica's engine and API (a dry run of it
needs only a read token):

- **steps**: every block the render enters (each iteration of a loop, each call of a
  macro, the template itself) is a step, and a render may take `step_limit(source)`
  of them, fewer for a longer template (a step may write its whole text);
- **text**: what `{{ … }}` prints adds up to at most `MAX_PRINTED_CHARS` in one render
  (printed into a variable or a macro's result too), and no `~`, `+` or `*` builds a
  string or list longer than `MAX_RENDERED_CHARS`;
- the sandbox is the immutable one: no method changes a list, dict or set in place.

The steps are counted by code the template is compiled with (`StepCounting` puts a call
at the start of every block), so a template pays a function call per block entered.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Iterable
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

# What one string may render to, and what `~`, `+` and `*` may build.
MAX_RENDERED_CHARS = 1_000_000
# What a render's `{{ … }}` may print in all, wherever it goes.
MAX_PRINTED_CHARS = 10 * MAX_RENDERED_CHARS
# Steps for the shortest templates, and the text their steps may write in all: a loop
# of a template of N characters may repeat it MAX_STEP_CHARS / N times.
MAX_STEPS = 100_000
MAX_STEP_CHARS = 100_000_000
_MAX_EXPONENT = 1_000


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
    printable = 0


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """A sandbox whose renders are bounded; call `begin` before each render."""

    code_generator_class = StepCounting
    intercepted_binops = frozenset({"*", "**", "+"})

    def __init__(self, **options: Any) -> None:
        self._render = _Render()
        printed = options.pop("finalize")

        def finalize(value: Any) -> Any:
            shown = printed(value)
            self._print(len(shown) if isinstance(shown, str) else len(str(shown)))
            return shown

        super().__init__(finalize=finalize, **options)

    def begin(self, source_chars: int) -> None:
        """A render of templates `source_chars` long in all starts."""
        self._render.steps = self._render.steps_left = step_limit(source_chars)
        self._render.printable = MAX_PRINTED_CHARS

    def step(self) -> None:
        render = self._render
        render.steps_left -= 1
        if render.steps_left < 0:
            raise SecurityError(
                f"the template took more than {render.steps} steps (loop iterations, "
                "macro calls); a longer template may take fewer"
            )

    def _print(self, chars: int) -> None:
        render = self._render
        render.printable -= chars
        if render.printable < 0:
            raise SecurityError(f"the template printed more than {MAX_PRINTED_CHARS} characters")

    def joined(self, parts: Iterable[Any]) -> str:
        texts = [str(part) for part in parts]
        if sum(map(len, texts)) > MAX_RENDERED_CHARS:
            raise SecurityError("the result of ~ would be too large")
        return "".join(texts)

    def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "**":
            if isinstance(right, int | float) and abs(right) > _MAX_EXPONENT:
                raise SecurityError(f"exponent above {_MAX_EXPONENT}")
            return operator.pow(left, right)
        if operator_ == "+":
            if _sized(left) and _sized(right) and len(left) + len(right) > MAX_RENDERED_CHARS:
                raise SecurityError("the result of + would be too large")
            return operator.add(left, right)
        for sequence, count in ((left, right), (right, left)):
            if (
                _sized(sequence)
                and isinstance(count, int)
                and len(sequence) * count > MAX_RENDERED_CHARS
            ):
                raise SecurityError("the result of * would be too large")
        return operator.mul(left, right)


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)
