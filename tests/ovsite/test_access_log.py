"""`make run`'s access log names the socket's peer (issue 39, "the newcomer's hour"): uvicorn, trusting proxy headers
from loopback by default, printed a dev-mode request's `X-Forwarded-For` as its client, a spoofed address on the
very request dev mode refuses for carrying that header. The server here is started with the command `make -n run`
prints, so a change of the Makefile's recipe is what this test runs."""

import re
import shlex
import subprocess

import httpx

from tests.live import ROOT, Process, child_env, database_env, free_port, wait_until

SPOOFED = "203.0.113.77"


def make_run_command(port: int) -> list[str]:
    """The command `make run` serves with (its last recipe line), as make prints it without running it."""
    printed = subprocess.run(
        ["make", "-n", "--no-print-directory", "run", f"PORT={port}", "HOST=127.0.0.1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [line] = [line for line in printed.splitlines() if " -m uvicorn " in line]
    return shlex.split(line)


def test_make_run_logs_the_socket_peer_not_a_spoofed_forwarded_for(seeded, tmp_path):
    port = free_port()
    env = child_env(**database_env())
    env.pop("OVSITE_ROOT_API_KEY", None)  # dev mode, which refuses a proxied request
    server = Process("make-run-uvicorn", make_run_command(port), env, tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url), 120, "make run's /health", server, every_s=0.1)
        response = httpx.post(
            f"{url}/api/v1/search/find", json={"query": "coffee"}, headers={"X-Forwarded-For": SPOOFED}, timeout=30
        )
        assert response.status_code == 401 and response.json()["error"]["details"]["reason"] == "dev_mode_proxied"
        line = wait_until(lambda: _access_line(server, "/api/v1/search/find"), 10, "the access log line", server)
    finally:
        server.stop()
    # uvicorn's line: `INFO:     127.0.0.1:54321 - "POST /api/v1/search/find HTTP/1.1" 401 Unauthorized`
    assert re.search(r'\b127\.0\.0\.1:\d+ - "POST /api/v1/search/find HTTP/1\.1" 401\b', line), line
    assert SPOOFED not in server.tail(100_000), server.tail()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def _access_line(server: Process, path: str) -> str | None:
    return next((line for line in server.tail(100_000).splitlines() if f"POST {path} " in line), None)
