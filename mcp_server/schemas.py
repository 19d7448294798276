"""A request serializer as JSON Schema, for a tool that takes a REST request body whole: drf-spectacular's mapping,
as /api/schema/ writes the body (OpenAPI 3.1, whose schemas are JSON Schema), asked for the serializer itself rather
than for a route that takes it."""

from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.plumbing import build_root_object, normalize_result_object
from drf_spectacular.settings import patched_settings, spectacular_settings
from rest_framework.settings import api_settings


def _inlined(node, components: dict):
    """A schema with its `#/components/schemas/…` references replaced by what they name: a tool's input schema
    stands alone."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inlined(components[node["$ref"].rsplit("/", 1)[1]], components)
        return {key: _inlined(value, components) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(item, components) for item in node]
    return node


def request_schema(serializer_class) -> dict:
    """The body `serializer_class` validates, as the project's schema class maps it for a POST (core/openapi.py:
    a strict serializer's unknown fields are refused) and the generator's hooks finish it (an enum becomes a
    component, inlined here)."""
    generator = SchemaGenerator()
    with patched_settings({"OAS_VERSION": "3.1.0"}), GENERATOR_STATS.silence():
        inspector = api_settings.DEFAULT_SCHEMA_CLASS()
        inspector.registry, inspector.method = generator.registry, "POST"
        # A context of its own: without one the inspector would build it from the route's view, and there is none.
        body = inspector.resolve_serializer(serializer_class(context={"request": None}), "request").ref
        # the document the generator would write for no route but this serializer's component, which the hooks
        # finish as they finish /api/schema/
        components = generator.registry.build(spectacular_settings.APPEND_COMPONENTS)
        result = build_root_object(paths={}, components=components, webhooks=[], version=None)
        for hook in spectacular_settings.POSTPROCESSING_HOOKS:
            result = hook(result=result, generator=generator, request=None, public=True)
    schema = _inlined(body, normalize_result_object(result)["components"]["schemas"])
    # the serializer's docstring is for developers; an unknown field is a 422, as on REST
    return {**{k: v for k, v in schema.items() if k != "description"}, "additionalProperties": False}
