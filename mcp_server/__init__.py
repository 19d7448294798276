"""The MCP endpoint (`/mcp`, streamable HTTP, the official `mcp` SDK): agent tools over the service functions the
REST views call. A plain package, not a Django app; ovsite/asgi.py mounts it beside Django.

- `tools`: the tools. Each validates its arguments with its REST route's request serializer (`<app>/requests.py`)
  and calls the same service, so an answer is the REST answer and bad input the REST error envelope, as a tool error.
- `schemas`: the input schemas of the tools that take a REST request body whole, from those serializers.
- `app`: the ASGI application (/mcp beside Django), the API-key check, and each HTTP request's id and metrics.
"""

MCP_PATH = "/mcp"
