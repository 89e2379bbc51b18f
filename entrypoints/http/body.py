"""Request bodies: parsed and validated here, so every error names the field as the
client wrote it (`domain.validation.field_errors`) and the OpenAPI document still shows
each body's schema.

Validation is strict about JSON types (docs/api.md, "Conventions"): pydantic's strict
mode on the JSON text, so a string is not a number or a boolean, a number is not a
boolean or an instant, and 2.0 is not an integer; RFC 3339 strings for instants, dates,
and strings for enums, stay what JSON has for them, and an integer is a number. Only
requests are: what a store reads back is validated as it always was.

Litestar's DTOs are its hook for decoding a body from raw bytes; these two use it for
nothing else (no field renaming, no transfer models).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from litestar.dto import AbstractDTO, DTOConfig, DTOFieldDefinition
from litestar.exceptions import ClientException
from litestar.typing import FieldDefinition
from pydantic import BaseModel, ValidationError

from application.patching import unknown_removals
from domain.errors import InvalidRequest
from domain.validation import NUL_MESSAGE, FieldError, described, field_errors, json_type, nul_at
from entrypoints.json_members import REPEATED, RepeatedMember, loads

if TYPE_CHECKING:  # only in signatures Litestar never inspects
    from litestar import Request
    from litestar._openapi.schema_generation import SchemaCreator
    from litestar.openapi.spec import Reference, Schema

M = TypeVar("M", bound=BaseModel)

JSON = "application/json"
# Task bodies are small; anything this large is a mistake or an attack. The one route
# that takes many tasks at once, `POST /tasks/apply`, has a limit of its own
# (entrypoints/http/sync.py: APPLY_MAX_BODY_BYTES).
MAX_BODY_BYTES = 1024 * 1024
MERGE_PATCH_JSON = "application/merge-patch+json"


# A NUL can only reach a decoded JSON string through this escape (raw control
# characters are not JSON), so bodies without it skip the walk.
_NUL_ESCAPE = b"\\u0000"
# pydantic's JSON parser reads NaN and Infinity, which JSON has not (and PostgreSQL's
# jsonb refuses): bodies holding those letters are read by the strict parser first.
_NOT_JSON_NUMBERS = (b"NaN", b"Infinity")


def refuse_nul(value: object) -> None:
    """Raises InvalidRequest naming the first field of `value` that holds U+0000."""
    where = nul_at(value)
    if where is not None:
        raise InvalidRequest(where, NUL_MESSAGE)


class _Body(AbstractDTO[M], Generic[M]):
    """A body documented as `M`; subclasses say how the raw bytes are read."""

    config: ClassVar[DTOConfig] = DTOConfig()
    accepted: ClassVar[tuple[str, ...]] = (JSON,)

    @classmethod
    def generate_field_definitions(
        cls, model_type: type[Any]
    ) -> Generator[DTOFieldDefinition, None, None]:
        yield from ()

    @classmethod
    def detect_nested_field(cls, field_definition: FieldDefinition) -> bool:
        return False

    @classmethod
    def create_for_field_definition(
        cls, field_definition: FieldDefinition, handler_id: str, backend_cls: Any = None
    ) -> None:
        return None  # no transfer model: decode_bytes does the work

    @classmethod
    def create_openapi_schema(
        cls, field_definition: FieldDefinition, handler_id: str, schema_creator: SchemaCreator
    ) -> Reference | Schema:
        return schema_creator.for_field_definition(FieldDefinition.from_annotation(cls.model_type))

    def decode_builtins(self, value: dict[str, Any]) -> Any:
        raise ClientException(status_code=415, detail="send the body as JSON")

    def _check_media_type(self) -> None:
        header = self.asgi_connection.headers.get("content-type")
        if header is None:
            return
        media_type = header.split(";", 1)[0].strip().lower()
        if media_type not in self.accepted:
            accepted = " or ".join(self.accepted)
            raise ClientException(
                status_code=415, detail=f"unsupported Content-Type {media_type!r}; send {accepted}"
            )


class JsonBody(_Body[M]):
    """A JSON body validated into the model `M`."""

    def decode_bytes(self, value: bytes) -> Any:
        self._check_media_type()
        if value.startswith(codecs.BOM_UTF8):  # pydantic's parser would say "expected value"
            raise malformed(_BOM)
        decoded: object = None
        try:
            decoded = read_json(value)  # a member given twice, which pydantic's parser keeps
        except (ValueError, RecursionError) as exc:  # read_json says what is wrong
            if isinstance(exc, InvalidRequest) or any(w in value for w in _NOT_JSON_NUMBERS):
                raise _unreadable(exc) from None
            # Not JSON: the validation below says so.
        if _NUL_ESCAPE in value:
            refuse_nul(decoded)
        try:
            return self.model_type.model_validate_json(value, strict=True)
        except ValidationError as exc:
            _refuse_unreadable(exc)
            raise InvalidRequest.of(field_errors(exc)) from None


class MergePatchBody(_Body[M]):
    """A JSON merge patch (RFC 7396) of the model `M`, returned as a plain object: the use
    case merges it into the stored value and validates the result."""

    accepted = (MERGE_PATCH_JSON, JSON)

    def decode_bytes(self, value: bytes) -> Any:
        self._check_media_type()
        try:
            patch = read_json(value)
        except (ValueError, RecursionError) as exc:  # read_json says what is wrong
            raise _unreadable(exc) from None
        if not isinstance(patch, dict):
            raise InvalidRequest("body", "a merge patch must be a JSON object")
        refuse_nul(patch)
        check_patch(self.model_type, patch)
        return patch


class JsonObjectBody(_Body[M]):
    """A JSON object documented as the model `M`, returned as a plain object: the route
    validates it in parts (each part's errors named by its own path)."""

    def decode_bytes(self, value: bytes) -> Any:
        self._check_media_type()
        try:
            body = read_json(value)
        except (ValueError, RecursionError) as exc:  # read_json says what is wrong
            raise _unreadable(exc) from None
        if not isinstance(body, dict):
            raise InvalidRequest("body", "must be a JSON object")
        refuse_nul(body)
        return body


def strictly(model: type[M], data: dict[str, Any], prefix: str = "") -> M:
    """`data`, a JSON object already decoded (a route that validates its body in parts),
    validated into `model` as `JsonBody` validates a body: strictly, as JSON. Raises
    InvalidRequest naming every bad field, under `prefix` (`tasks[3]`)."""
    try:
        return model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        _refuse_unreadable(exc)
        raise InvalidRequest.of(field_errors(exc, prefix)) from None


# How deep pydantic's JSON parser reads: deeper is refused whatever the route.
MAX_NESTING = 200


def _refuse_unreadable(exc: ValidationError) -> None:
    """A 400 for a body the JSON parser would not read: not JSON at all, or nested
    deeper than it goes (valid JSON, but no field of a task needs it)."""
    invalid = [error for error in exc.errors() if error["type"] == "json_invalid"]
    if not invalid:
        return
    reason = str(invalid[0]["msg"])
    if "recursion limit" in reason:
        raise ClientException(
            status_code=400,
            detail=f"the request body nests arrays and objects more than {MAX_NESTING} deep",
        )
    raise malformed(reason)


def check_patch(model: type[BaseModel], patch: dict[str, Any]) -> None:
    """Refuse a merge patch whose members have the wrong JSON types, as `JsonBody`
    refuses a body's: `patch` is validated strictly against `model`, the patch's schema
    (every member optional). The merged result is validated by the use case, as a whole;
    so here a member the patch leaves out (`missing`) is no error, and nor is a null,
    which removes a member rather than giving it a value, unless it names no field of the
    model (`application.patching.unknown_removals`). Raises InvalidRequest."""
    unknown = unknown_removals(patch, model)  # a null naming no field would do nothing
    try:
        model.model_validate_json(json.dumps(_without_nulls(patch)), strict=True)
    except ValidationError as exc:
        _refuse_unreadable(exc)  # nested deeper than any field reads: a 400, as for a body
        kept = [error for error in exc.errors(include_url=False) if error["type"] != "missing"]
        if kept:
            raise InvalidRequest.of([*unknown, *described(kept)]) from None
    if unknown:
        raise InvalidRequest.of(unknown)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value


async def refuse_body(request: Request[Any, Any, Any]) -> None:
    """The `before_request` hook of a route that takes no body (docs/api.md, "No body").

    An empty body, or `{}`, is no body: many clients send one, whatever its Content-Type
    (curl's `-d '{}'` says form-urlencoded). So the body is read as JSON whatever its
    Content-Type, and then refused before anything is done: a 422 naming each member
    ("unknown field", as in every body), or `body` for a value that is not an object.
    So a misspelt option never silently does nothing. Text that is not JSON is a 400,
    or a 415 when sent with another Content-Type than JSON (it was never meant as JSON)."""
    raw = await request.body()
    if not raw.strip():
        return
    try:
        body = read_json(raw)
    except (ValueError, RecursionError) as exc:  # read_json says what is wrong
        header = request.headers.get("content-type")
        media_type = None if header is None else header.split(";", 1)[0].strip().lower()
        if media_type not in (None, JSON):
            raise ClientException(
                status_code=415, detail=f"unsupported Content-Type {media_type!r}; send no body"
            ) from None
        raise _unreadable(exc) from None
    if not isinstance(body, dict):
        raise InvalidRequest(
            "body", f"this request takes no body: send none, or {{}}, not {json_type(body)}"
        )
    refuse_nul(body)
    if body:
        raise InvalidRequest.of(
            [FieldError(name, "unknown field (this request takes no body)") for name in body]
        )


def malformed(reason: str) -> ClientException:
    if "int_max_str_digits" in reason:  # Python's own advice, meant for its programmers
        reason = "a number has more than 4,300 digits"
    return ClientException(status_code=400, detail=f"the request body is not valid JSON: {reason}")


def _unreadable(exc: Exception) -> Exception:
    """The 400 for a body `json.loads` could not read; the 422 naming a member it gives
    twice."""
    if isinstance(exc, InvalidRequest):
        return exc
    if isinstance(exc, RecursionError):
        return ClientException(
            status_code=400,
            detail=f"the request body nests arrays and objects more than {MAX_NESTING} deep",
        )
    return malformed(str(exc))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(value: bytes) -> Any:
    """A body read as JSON text is exchanged (RFC 8259): UTF-8, without a byte order
    mark, as pydantic's parser reads the bodies of the other routes (`json.loads` would
    also take UTF-16 and UTF-32, and a mark). Raises ValueError saying what is wrong:
    InvalidRequest naming a member an object gives twice."""
    if value.startswith(codecs.BOM_UTF8):
        raise ValueError(_BOM)
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return loads(text, parse_constant=_reject_constant)
    except RepeatedMember as exc:
        raise InvalidRequest(exc.field, REPEATED) from None


_BOM = "it starts with a byte order mark: send UTF-8 without one"
