"""OpenAPI pieces shared by the controllers: error responses, headers, the security scheme."""

from __future__ import annotations

import copy
import functools
from typing import Any

from litestar import Request
from litestar.datastructures import ResponseHeader
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityRequirement, SecurityScheme, Tag
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from adapters.http.settings import package_version
from application.ports import RenderedRequest
from domain.tasks import TaskSpec
from entrypoints.http.body import JSON, MERGE_PATCH_JSON
from entrypoints.http.models import (
    FireTimes,
    Health,
    PreviewRequest,
    Ready,
    RunPage,
    RunResource,
    TaskPage,
    TaskPatch,
    TaskResource,
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
    500: "An internal error; it is logged, and the answer reveals nothing of it.",
    503: "The task store is unavailable; nothing was changed.",
}


def errors(*statuses: int, mutation: bool = True) -> dict[int, ResponseSpec]:
    """The problem-detail answers of a protected route: `statuses` plus 401, 403 for
    mutations, 500 and 503."""
    codes = {*statuses, 401, 500, 503} | ({403} if mutation else set())
    return {
        code: ResponseSpec(
            data_container=Problem,
            description=_MEANING[code],
            media_type=PROBLEM_JSON,
            generate_examples=False,
        )
        for code in sorted(codes)
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
_DOCUMENTED: list[tuple[type[BaseModel], JsonSchemaMode]] = [
    (TaskSpec, "validation"),
    (TaskPatch, "validation"),
    (PreviewRequest, "validation"),
    *(
        (model, "serialization")
        for model in (TaskResource, RunResource, TaskPage, RunPage, FireTimes)
    ),
    *((model, "serialization") for model in (RenderedRequest, Problem, Health, Ready)),
]


@functools.cache
def model_schemas() -> dict[str, Any]:
    """Component schemas of every documented model, as pydantic writes them."""
    _, top = models_json_schema(_DOCUMENTED, ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = top["$defs"]
    return schemas


def accurate(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with pydantic's model schemas, each merge-patch body also documented
    as `application/json` (both are accepted), a schema on every response header, and
    without the 400 Litestar documents for parameter errors (this API answers 422)."""
    document = copy.deepcopy(document)
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict):
                _finish(operation)
    components = document.setdefault("components", {})
    schemas = {**components.get("schemas", {}), **model_schemas()}
    # Pydantic names a model that reads differently from how it is written twice
    # ("X-Input", "X-Output"); Litestar's own "X" is then left unused.
    components["schemas"] = {name: schemas[name] for name in sorted(_reachable(document, schemas))}
    return document


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
    content = operation.get("requestBody", {}).get("content", {})
    if MERGE_PATCH_JSON in content:
        content.setdefault(JSON, content[MERGE_PATCH_JSON])
    responses = operation.get("responses", {})
    if "400" in responses and PROBLEM_JSON not in responses["400"].get("content", {}):
        del responses["400"]
    for response in responses.values():
        for header in response.get("headers", {}).values():
            header.setdefault("schema", {"type": "string"})


class JsonSchemaPlugin(JsonRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return self.render_json(request, accurate(openapi_schema))


class SwaggerPlugin(SwaggerRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, accurate(openapi_schema))


def openapi_config() -> OpenAPIConfig:
    """OpenAPI 3.1 at /schema/openapi.json, with Swagger UI at /schema and /schema/swagger."""
    return OpenAPIConfig(
        title="imbi-scheduler",
        version=package_version(),
        description=(
            "A self-hosted HTTP job scheduler. Errors are RFC 9457 problem details "
            "(`application/problem+json`). When API tokens are configured, every route but "
            "/healthz, /readyz, /metrics and /schema requires `Authorization: Bearer <token>`."
        ),
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
            Tag(name="triggers", description="Trigger previews."),
            Tag(name="operations", description="Health, readiness and metrics."),
        ],
    )
