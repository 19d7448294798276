"""Real server processes for tests: gunicorn on the test database, started and stopped by their own pid."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """One gunicorn worker process on the test database (dev mode: loopback callers need no key)."""

    def __init__(self, log_dir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"gunicorn-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> "Gunicorn":
        env = dict(
            os.environ, OVSITE_PG_DATABASE=connection.settings_dict["NAME"], DJANGO_SETTINGS_MODULE="ovsite.settings"
        )
        env.pop("OVSITE_ROOT_API_KEY", None)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "ovsite.wsgi",
                    "-b",
                    f"127.0.0.1:{self.port}",
                    "-w",
                    "1",
                    "--timeout",
                    "120",
                    "--log-level",
                    "warning",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer /health in {timeout_s} s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
