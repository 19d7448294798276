"""The MCP package's place in the layers (issue 24): it calls the services and validates with the request serializers
(`<app>/requests.py`), as the REST views do, never the views; and the input schemas it derives from those
serializers are the request bodies /api/schema/ describes."""

import ast
import asyncio
from pathlib import Path

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.settings import patched_settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "profiles", "retrieval", "sessions_app", "assembly", "mcp_server", "ovsite")


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


# What routes requests to views: the URL confs, and the admin (a ModelAdmin's get_urls).
ROUTING = ("views.py", "urls.py", "admin_urls.py", "admin.py")


def test_only_views_and_url_confs_import_a_views_module():
    project = {f"{package}.views" for package in PACKAGES}
    importers = {
        str(path.relative_to(ROOT)): sorted(imported_modules(path) & project)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.name not in ROUTING
    }
    assert {path: modules for path, modules in importers.items() if modules} == {}


def _inlined(node, components: dict):
    if isinstance(node, dict):
        if "$ref" in node:
            return _inlined(components[node["$ref"].rsplit("/", 1)[1]], components)
        return {key: _inlined(value, components) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(item, components) for item in node]
    return node


def test_body_tools_take_the_request_bodies_of_the_rest_schema():
    """The whole /api/schema/ document, as JSON Schema (OpenAPI 3.1), against the tools' own derivation: the same
    properties, enums, nullability and strictness, whatever the generator's hooks do to a component."""
    from mcp_server.tools import build_server

    with patched_settings({"OAS_VERSION": "3.1.0"}):
        document = SchemaGenerator().get_schema(request=None, public=True)
    components = document["components"]["schemas"]
    tools = {tool.name: tool.input_schema for tool in asyncio.run(build_server().list_tools())}
    for tool, path in (("find", "/api/v1/search/find"), ("search", "/api/v1/search/search")):
        body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        expected = {k: v for k, v in _inlined(body, components).items() if k != "description"}
        assert tools[tool] == expected, tool
    assert tools["search"]["properties"]["mode"]["allOf"][0]["enum"] == ["list", "context", "bootstrap"]
    assert tools["recall"]["properties"].keys() == tools["search"]["properties"].keys() - {"mode"}
