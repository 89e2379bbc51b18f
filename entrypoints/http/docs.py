"""OpenAPI pieces shared by the controllers: error responses, headers, the security scheme."""

from __future__ import annotations

import copy
import functools
from typing import Any

from litestar import Request, Response, Router
from litestar.datastructures import ResponseHeader
from litestar.exceptions import NotFoundException
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, License, SecurityRequirement, SecurityScheme, Tag
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from adapters.http.settings import package_version
from application.ports import RenderedRequest
from domain.calendars import Calendar
from domain.tasks import TaskSpec
from entrypoints.http.calendar_models import (
    CalendarByName,
    CalendarPage,
    CalendarPatch,
    CalendarResource,
    CalendarTasks,
)
from entrypoints.http.links import add_examples, add_links
from entrypoints.http.models import (
    ApplyRequest,
    BackfillBody,
    FireTimes,
    Health,
    PreviewRequest,
    Ready,
    RunPage,
    RunResource,
    TaskPage,
    TaskPatch,
    TaskResource,
    TaskSpecByName,
)
from entrypoints.http.problems import PROBLEM_JSON, Problem

BEARER = "bearer"
SECURITY: list[SecurityRequirement] = [{BEARER: []}]

_MEANING = {
    400: "The body is not valid JSON.",
    401: "No known API token was sent (only when tokens are configured).",
    403: "The token is read-only and the request changes something.",
    404: "No task (by id or name) or run with this id.",
    409: "A conflict: a duplicate task name, or a run that is no longer running.",
    412: "`If-Match` names a version the task is no longer at.",
    415: "The body is not sent as JSON.",
    422: "The request is not valid; `errors` names each field.",
    429: "Too many requests with an unknown token from this address; see `Retry-After`.",
    500: "An internal error; it is logged, and the answer reveals nothing of it.",
    503: "The task store is unavailable (a change whose answer was lost may have been made).",
}


def errors(*statuses: int, mutation: bool = True) -> dict[int, ResponseSpec]:
    """The problem-detail answers of a protected route: `statuses` plus 401 and 429 (the
    token guard's), 422 (every route refuses a query parameter it does not take), 403
    for mutations, 500 and 503."""
    codes = {*statuses, 401, 422, 429, 500, 503} | ({403} if mutation else set())
    return {
        code: ResponseSpec(
            data_container=Problem,
            description=_MEANING[code],
            media_type=PROBLEM_JSON,
            generate_examples=False,
        )
        for code in sorted(codes)
    }


# A route that takes no body still reads one, to refuse it (docs/api.md, "No body"): a
# body that is not JSON is a 400 (415 with another Content-Type), members a 422.
NO_BODY = (400, 415, 422)


def also(status: int, model: type[BaseModel], description: str) -> dict[int, ResponseSpec]:
    """A success answer besides the route's own status (a PUT that creates answers 201,
    a dry run 200); it carries the same headers (`accurate`)."""
    return {
        status: ResponseSpec(data_container=model, description=description, generate_examples=False)
    }


ETAG = ResponseHeader(
    name="ETag", description='The task\'s version, quoted: "<version>".', documentation_only=True
)
LOCATION = ResponseHeader(
    name="Location", description="The path of the created resource.", documentation_only=True
)


# Pydantic validates every body and serializes every answer, so its JSON Schema (2020-12,
# the dialect of OpenAPI 3.1) is the truth about them; Litestar's own translation drops
# patterns, discriminators and `additionalProperties: false`. The served document takes
# each model's schema from pydantic, under the same component names Litestar refers to.
# Problem is documented as it is read: `errors` comes with 422 answers only.
_DOCUMENTED: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (TaskSpec, "validation"),
    (TaskSpecByName, "validation"),
    (TaskPatch, "validation"),
    (PreviewRequest, "validation"),
    (ApplyRequest, "validation"),
    (BackfillBody, "validation"),
    (Calendar, "validation"),
    (CalendarByName, "validation"),
    (CalendarPatch, "validation"),
    (Problem, "validation"),
    *(
        (model, "serialization")
        for model in (TaskResource, RunResource, TaskPage, RunPage, FireTimes)
    ),
    *((model, "serialization") for model in (CalendarResource, CalendarPage, CalendarTasks)),
    *((model, "serialization") for model in (RenderedRequest, Health, Ready)),
]
# A model that reads differently from how it is written gets two schemas: the form a
# client writes keeps the model's name, the form the server answers is "<name>Output".
_INPUT, _OUTPUT = "-Input", "-Output"


class _AnswerSchema(GenerateJsonSchema):
    """Answers carry every field of their model, defaults included, so the schema of an
    answer marks every field required (a generated client then types them as always
    there, and keeps the request forms' defaulted fields optional)."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization":
            return field.get("serialization_exclude_if") is None
        return super().field_is_required(field, total)


@functools.cache
def model_schemas() -> dict[str, Any]:
    """Component schemas of every documented model: pydantic's, each titled by its own
    component name (generators name classes by title, so no two may share one), and with
    every union's discriminator required in each of its members (the server cannot tell
    the members apart without it, so it has no default)."""
    _, top = models_json_schema(
        _DOCUMENTED,
        ref_template="#/components/schemas/{model}",
        schema_generator=_AnswerSchema,
    )
    renamed = {name: _component_name(name) for name in top["$defs"]}
    schemas: dict[str, Any] = _renamed_refs(top["$defs"], renamed)
    schemas = {renamed[name]: schema for name, schema in schemas.items()}
    for name, schema in schemas.items():
        schema["title"] = name
    for schema in schemas.values():
        _require_discriminators(schema, schemas)
    return schemas


def _component_name(name: str) -> str:
    if name.endswith(_INPUT):
        return name.removesuffix(_INPUT)
    if name.endswith(_OUTPUT):
        return name.removesuffix(_OUTPUT) + "Output"
    return name


def _renamed_refs(node: Any, renamed: dict[str, str]) -> Any:
    """`node` with every reference to a component in `renamed` (a `$ref`, or a value of a
    discriminator's `mapping`) pointing at its new name."""
    if isinstance(node, dict):
        found: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found[key] = _renamed_ref(value, renamed)
            elif key == "discriminator" and isinstance(value, dict):
                mapping = {tag: _renamed_ref(ref, renamed) for tag, ref in value["mapping"].items()}
                found[key] = {**value, "mapping": mapping}
            else:
                found[key] = _renamed_refs(value, renamed)
        return found
    if isinstance(node, list):
        return [_renamed_refs(value, renamed) for value in node]
    return node


def _renamed_ref(ref: str, renamed: dict[str, str]) -> str:
    prefix, _, name = ref.rpartition("/")
    return f"{prefix}/{renamed.get(name, name)}"


def _require_discriminators(node: Any, schemas: dict[str, Any]) -> None:
    if isinstance(node, dict):
        discriminator = node.get("discriminator")
        if isinstance(discriminator, dict):
            tag = discriminator["propertyName"]
            for ref in discriminator.get("mapping", {}).values():
                member = schemas[str(ref).rsplit("/", 1)[-1]]
                member["properties"][tag].pop("default", None)
                if tag not in member.setdefault("required", []):
                    member["required"].insert(0, tag)
        for value in node.values():
            _require_discriminators(value, schemas)
    elif isinstance(node, list):
        for value in node:
            _require_discriminators(value, schemas)


def accurate(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with pydantic's model schemas, a schema on every response header, an
    explicit `security: []` on the open routes, links between operations, inclusive
    unions as `anyOf`, and without the 400 Litestar documents for parameter errors (this
    API answers 422)."""
    document = copy.deepcopy(document)
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict):
                _finish(operation)
    add_links(document)
    add_examples(document)
    components = document.setdefault("components", {})
    schemas = {**components.get("schemas", {}), **model_schemas()}
    components["schemas"] = {name: schemas[name] for name in sorted(_reachable(document, schemas))}
    _inclusive_unions(document)
    return document


def _inclusive_unions(node: Any) -> None:
    """A `oneOf` offering both integer and number (Litestar's rendering of a JSON value)
    is not exclusive: 60 matches both, so no integer would be valid. It becomes the
    `anyOf` it means."""
    if isinstance(node, dict):
        alternatives = node.get("oneOf")
        if isinstance(alternatives, list):
            types = {alt.get("type") for alt in alternatives if isinstance(alt, dict)}
            if {"integer", "number"} <= types:
                node["anyOf"] = node.pop("oneOf")
        for value in node.values():
            _inclusive_unions(value)
    elif isinstance(node, list):
        for value in node:
            _inclusive_unions(value)


def _reachable(document: dict[str, Any], schemas: dict[str, Any]) -> set[str]:
    """The component schemas the paths refer to, directly or through other schemas."""
    seen: set[str] = set()
    pending = _refs(document.get("paths", {}))
    while pending:
        name = pending.pop()
        if name not in seen and name in schemas:
            seen.add(name)
            pending |= _refs(schemas[name])
    return seen


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {str(node["$ref"]).rsplit("/", 1)[-1]} if "$ref" in node else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node)) if node else set()
    return set()


def _finish(operation: dict[str, Any]) -> None:
    # Only the routes outside the token-guarded router lack a requirement: say they are
    # open, rather than leave a reader to guess.
    operation.setdefault("security", [])
    responses = operation.get("responses", {})
    if "400" in responses and PROBLEM_JSON not in responses["400"].get("content", {}):
        del responses["400"]
    # Every success answer of a route carries the same headers; Litestar gives them only
    # to the route's own status.
    successes = [response for code, response in responses.items() if code.startswith("2")]
    headers = {name: h for response in successes for name, h in response.get("headers", {}).items()}
    for response in successes:
        if headers and "content" in response:
            response["headers"] = {**headers, **response.get("headers", {})}
    for response in responses.values():
        for header in response.get("headers", {}).values():
            header.setdefault("schema", {"type": "string"})


class JsonSchemaPlugin(JsonRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return self.render_json(request, accurate(openapi_schema))


class SwaggerPlugin(SwaggerRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, accurate(openapi_schema))


async def _problem_for_not_found(response: Response[Any]) -> Response[Any]:
    # Litestar answers an unknown path under /schema with an HTML page of its own; every
    # other unknown path is a problem document (docs/api.md, "Errors").
    if response.status_code == 404:
        raise NotFoundException()
    return response


def openapi_config() -> OpenAPIConfig:
    """OpenAPI 3.1 at /schema/openapi.json, with Swagger UI at /schema and /schema/swagger."""
    return OpenAPIConfig(
        # Litestar's own router, as it would build it, but for what an unknown path answers.
        openapi_router=Router(
            "/schema",
            route_handlers=[],
            include_in_schema=False,
            dto=None,
            return_dto=None,
            after_request=_problem_for_not_found,
        ),
        title="imbi-scheduler",
        version=package_version(),
        description=(
            "A self-hosted HTTP job scheduler. Errors are RFC 9457 problem details "
            "(`application/problem+json`). When API tokens are configured, every route but "
            "/healthz, /readyz, /metrics and /schema requires `Authorization: Bearer <token>`."
        ),
        license=License(name="BSD-3-Clause", identifier="BSD-3-Clause"),
        path="/schema",
        render_plugins=[SwaggerPlugin(path=["/", "/swagger"]), JsonSchemaPlugin()],
        components=Components(
            security_schemes={
                BEARER: SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="An API token from SCHEDULER_API_TOKENS.",
                )
            }
        ),
        tags=[
            Tag(name="tasks", description="Tasks: a trigger and an HTTP target."),
            Tag(name="runs", description="Runs: one per occurrence or manual fire."),
            Tag(name="backfills", description="Backfills: past occurrences run again."),
            Tag(name="events", description="Events: what tasks tell, and their delivery."),
            Tag(name="triggers", description="Trigger previews."),
            Tag(
                name="calendars",
                description="Calendars: dates that triggers exclude or roll around.",
            ),
            Tag(name="operations", description="Health, readiness and metrics."),
        ],
    )
