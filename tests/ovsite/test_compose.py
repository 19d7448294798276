"""compose.yaml and the Dockerfile run the Procfile's layout (issue 30): read with PyYAML, no Docker daemon needed.

Services, ports, environment, healthchecks and start order are checked as compose would use them; the commands are
the Procfile's, token for token, so `make serve` and a compose deployment run the same processes.
"""

import json
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OVSITE_SERVICES = ("release", "web", "worker", "beat")
LONG_RUNNING = ("web", "worker", "beat")


def procfile() -> dict[str, str]:
    """Process type → command line, as honcho (and Heroku) read a Procfile: `name: command`, anything else skipped."""
    return dict(re.findall(r"^([A-Za-z0-9_-]+):\s*(.+)$", (ROOT / "Procfile").read_text(), re.MULTILINE))


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def test_procfile_has_the_release_step_and_the_three_processes():
    assert list(procfile()) == ["release", "web", "worker", "beat"]


def test_every_part_of_the_layout_is_a_service(services):
    assert set(services) == {"postgres", "redis", *OVSITE_SERVICES}
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services["redis"]["image"].startswith("redis:")
    for name in OVSITE_SERVICES:
        assert services[name]["build"] == "." and services[name]["image"] == "ovsite:local", name


def test_long_running_services_run_the_procfile_commands(services):
    commands = procfile()
    for name in LONG_RUNNING:
        # The exec form: no shell between compose and the process, which gets the stop signal itself.
        assert services[name]["command"] == shlex.split(commands[name]), name
    assert services["release"]["command"] == ["sh", "-c", commands["release"]]


def test_the_image_serves_the_web_command_and_installs_the_runtime_only():
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = re.search(r"^CMD (.+)$", dockerfile, re.MULTILINE).group(1)
    assert json.loads(cmd) == shlex.split(procfile()["web"])
    installs = re.findall(r"pip install (.+)", dockerfile)
    assert installs == ["-r requirements.txt"]
    assert re.search(r"^USER (?!root)\w+", dockerfile, re.MULTILINE)


def test_web_publishes_the_port_uvicorn_listens_on(services):
    web = services["web"]
    port = str(web["environment"]["UVICORN_PORT"])
    assert [mapping.rsplit(":", 1)[1] for mapping in web["ports"]] == [port]
    assert web["environment"]["UVICORN_HOST"] == "0.0.0.0"
    assert "/health" in " ".join(web["healthcheck"]["test"]) and f":{port}/" in " ".join(web["healthcheck"]["test"])


def test_database_and_broker_urls_point_at_their_services(services):
    postgres = services["postgres"]["environment"]
    for name in OVSITE_SERVICES:
        env = services[name]["environment"]
        database = urlsplit(env["DATABASE_URL"])
        assert (database.scheme, database.hostname, database.port) == ("postgres", "postgres", 5432), name
        assert database.username == postgres["POSTGRES_USER"], name
        assert database.password == postgres["POSTGRES_PASSWORD"], name
        assert database.path == "/" + postgres["POSTGRES_DB"], name
        assert urlsplit(env["CELERY_BROKER_URL"]).hostname == "redis", name


@pytest.mark.parametrize("variable", ["OVSITE_ROOT_API_KEY", "OVSITE_SECRET_KEY"])
def test_the_secrets_are_required(services, variable):
    """`${VAR:?message}`: compose refuses to start without it, instead of serving in dev mode or with the public
    development key."""
    for name in OVSITE_SERVICES:
        assert re.fullmatch(r"\$\{" + variable + r":\?[^}]+\}", services[name]["environment"][variable]), name


def test_every_long_running_service_has_a_healthcheck(services):
    for name in ("postgres", "redis", *LONG_RUNNING):
        check = services[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"], name


def test_services_start_once_their_dependencies_are_ready(services):
    healthy = {"condition": "service_healthy"}
    assert services["release"]["depends_on"] == {"postgres": healthy, "redis": healthy}
    assert services["release"]["restart"] == "no"
    for name in LONG_RUNNING:
        assert services[name]["depends_on"] == {
            "postgres": healthy,
            "redis": healthy,
            "release": {"condition": "service_completed_successfully"},
        }, name
        assert services[name]["restart"] == "unless-stopped", name


def test_the_broker_keeps_queued_tasks_across_a_restart(services):
    assert services["redis"]["command"][-2:] == ["--appendonly", "yes"]
