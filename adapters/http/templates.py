"""Target templates: url, header values and body strings rendered by a sandboxed Jinja2."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Protocol

import httpx
from jinja2 import StrictUndefined, TemplateError, meta, nodes
from jinja2.environment import Template
from pydantic import JsonValue

from adapters.http.template_limits import MAX_RENDERED_CHARS, BoundedSandbox
from domain.errors import InvalidRequest
from domain.tasks import URL_MAX_LENGTH, HttpTarget, check_http_url

# The names a template may use (docs/api.md, "Templates").
NAMES = frozenset({"task", "run", "scheduled_for", "now", "last_run"})
_COMPILED_CACHE = 4096
# What a header value may not hold (a line break is refused by name first); a space or
# tab around a rendered value is not part of it (RFC 9110, 5.5) and is not sent.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class TargetStrings(Protocol):
    """What a render reads of a target (an `HttpTarget`, or its strings in a worker)."""

    @property
    def url(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def body(self) -> JsonValue: ...


class TemplateFailed(Exception):
    """A template did not render; `field` is the dotted path of the string."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"template {field} failed to render: {detail}")
        self.field = field
        self.detail = detail


def rfc3339(instant: datetime) -> str:
    """`instant` in UTC with a `Z`, as docs/api.md writes times."""
    return instant.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _printed(value: Any) -> Any:
    """What `{{ expression }}` prints: null (`last_run` before the first run, an unset
    task field) prints as nothing, never as Python's "None", and a boolean as JSON
    spells it, `true` or `false`, never "True", and an object or a list as JSON, never
    as Python's repr (docs/api.md, "Templates")."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return value


def template_strings(target: TargetStrings) -> Iterator[tuple[str, str]]:
    """(dotted field path, source) of every string a template target renders."""
    yield "target.url", target.url
    for name, value in target.headers.items():
        yield f"target.headers.{name}", value
    yield from _body_strings("target.body", target.body)


def _body_strings(path: str, value: JsonValue) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _body_strings(f"{path}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _body_strings(f"{path}.{index}", item)


def _dunder_attributes(ast: nodes.Template, source: str) -> str:
    """The `.__name__` attributes a template reads, in the order written ("" if none).
    Every object has such attributes (`__class__`, `__init__`) and the sandbox refuses
    each at render, so a template reading one would fail every run: it is refused when
    written instead. Item syntax (`body["__key__"]`) is left alone: a body may have
    such a key."""
    names = {
        node.attr
        for node in ast.find_all(nodes.Getattr)
        if node.attr.startswith("__") and node.attr.endswith("__")
    }
    return ", ".join(f".{name}" for name in sorted(names, key=lambda n: source.find(n)))


def _check_url(url: str) -> None:
    """A rendered URL, checked as a stored one is, and as the HTTP client will read it."""
    if len(url) > URL_MAX_LENGTH:
        raise ValueError(f"is {len(url)} characters long; a URL may have {URL_MAX_LENGTH}")
    check_http_url(url)
    try:
        httpx.URL(url).host  # noqa: B018 - the host decoded as the request will (IDNA)
    except (httpx.InvalidURL, ValueError) as exc:  # IDNA's errors are ValueErrors
        raise ValueError(f"is not a URL the client can call: {exc}") from None


def _shown(text: str) -> str:
    """`text` quoted for an error message, cut short (a render may make a megabyte)."""
    if len(text) <= 120:
        return repr(text)
    return f"{text[:100]!r}… ({len(text)} characters)"


class Templates:
    def __init__(self) -> None:
        self._env = BoundedSandbox(undefined=StrictUndefined, autoescape=False, finalize=_printed)
        self._compiled: dict[str, Template] = {}
        self._rendered_left = MAX_RENDERED_CHARS

    def check(self, target: HttpTarget) -> None:
        """Parse every template of `target`. Raises InvalidRequest for one that does
        not parse or that uses a name outside NAMES."""
        for field, source in template_strings(target):
            try:
                ast = self._env.parse(source)
            except TemplateError as exc:
                raise InvalidRequest(field, f"template does not parse: {exc}") from None
            unknown = meta.find_undeclared_variables(ast) - NAMES
            if unknown:
                names = ", ".join(sorted(unknown))
                allowed = ", ".join(sorted(NAMES))
                raise InvalidRequest(field, f"template uses unknown {names} (known: {allowed})")
            dunder = _dunder_attributes(ast, source)
            if dunder:
                raise InvalidRequest(
                    field,
                    f"template reads {dunder}, which the sandbox never allows:"
                    " a name that begins and ends with __ is no part of the task or the run",
                )

    def render(
        self, target: TargetStrings, context: Mapping[str, Any]
    ) -> tuple[str, dict[str, str], JsonValue]:
        """The url, headers and body of `target` rendered. Raises TemplateFailed."""
        self._env.begin(sum(len(source) for _, source in template_strings(target)))
        self._rendered_left = MAX_RENDERED_CHARS  # what all its strings may come to
        url = self._render("target.url", target.url, context)
        try:
            _check_url(url)
        except ValueError as exc:
            raise TemplateFailed("target.url", f"{_shown(url)} {exc}") from None
        headers = {}
        for name, value in target.headers.items():
            field = f"target.headers.{name}"
            rendered = self._render(field, value, context).strip(" \t")
            if "\r" in rendered or "\n" in rendered:
                raise TemplateFailed(field, "the value contains a line break")
            if control := _CONTROL.search(rendered):
                raise TemplateFailed(
                    field, f"the value contains a control character ({control.group()!r})"
                )
            headers[name] = rendered
        return url, headers, self._render_body("target.body", target.body, context)

    def _render_body(self, path: str, value: JsonValue, context: Mapping[str, Any]) -> JsonValue:
        if isinstance(value, str):
            return self._render(path, value, context)
        if isinstance(value, dict):
            return {k: self._render_body(f"{path}.{k}", v, context) for k, v in value.items()}
        if isinstance(value, list):
            return [self._render_body(f"{path}.{i}", v, context) for i, v in enumerate(value)]
        return value

    def _render(self, field: str, source: str, context: Mapping[str, Any]) -> str:
        pieces: list[str] = []
        try:
            # Piece by piece: a render past the bound stops there, never held whole.
            for piece in self._template(source).generate(context):
                self._rendered_left -= len(piece)
                if self._rendered_left < 0:
                    raise TemplateFailed(
                        field,
                        f"the target's strings render to more than {MAX_RENDERED_CHARS}"
                        " characters in all",
                    )
                pieces.append(piece)
        except TemplateFailed:
            raise
        except MemoryError:  # in a worker, past the memory it may map (template_worker)
            raise TemplateFailed(field, "it needed more memory than a render may use") from None
        except Exception as exc:  # a template raises whatever its expressions raise
            raise TemplateFailed(field, f"{type(exc).__name__}: {exc}") from None
        rendered = "".join(pieces)
        if not rendered.isascii():
            try:
                rendered.encode()
            except UnicodeEncodeError as exc:  # what no request nor row can carry
                raise TemplateFailed(
                    field,
                    f"renders {rendered[exc.start]!r} at {exc.start}, a lone surrogate,"
                    " which UTF-8 cannot encode",
                ) from None
        return rendered

    def _template(self, source: str) -> Template:
        template = self._compiled.get(source)
        if template is None:
            if len(self._compiled) >= _COMPILED_CACHE:
                self._compiled.clear()
            template = self._compiled[source] = self._env.from_string(source)
        return template
