"""The OpenAPI schema is served and names the routes clients use."""


def test_openapi_schema_lists_the_public_routes(api):
    response = api.client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for route in (
        "/api/v1/search/find",
        "/api/v1/search/search",
        "/api/v1/search/recall",
        "/api/v1/content/write",
        "/api/v1/sessions",
    ):
        assert route in paths, route


def test_health_and_ready(api):
    assert api.get("/health") == (200, {"status": "ok", "healthy": True})
    status, body = api.get("/ready")
    assert status == 200 and body["result"]["ready"] is True
    assert list(body["result"]["checks"]) == [
        "database",
        "migrations",
        "embedder",
        "stored_vectors",
        "broker",
        "workers",
    ]
