"""The real OpenViking server from PyPI, in its own virtual environment, configured for an offline run.

`ensure_venv()` creates `bench/.venv-openviking` (git-ignored) and pip-installs `openviking==0.5.2` into it once;
`OpenVikingServer` writes an `ov.conf` whose embedding and VLM point at our model server, and runs
`openviking-server` on a free loopback port with local storage in a temporary workspace, dev-mode auth.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import harness

VERSION = "0.5.2"
VENV = harness.ROOT / "bench" / ".venv-openviking"
STAMP = VENV / f".installed-{VERSION}"
EMBEDDING_DIM = 512


def ensure_venv(python: str = "python3.11") -> Path:
    """The venv's python, creating it and installing OpenViking when the stamp is missing."""
    venv_python = VENV / "bin" / "python"
    if not STAMP.exists():
        if not venv_python.exists():
            subprocess.run([python, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [
                str(venv_python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"openviking=={VERSION}",
            ],
            check=True,
        )
        STAMP.touch()
    return venv_python


def ov_conf(*, workspace: Path, model_url: str, host: str, port: int) -> dict:
    """OpenViking's configuration: both model roles at our OpenAI-compatible server, local storage, no auth key."""
    model = {"provider": "openai", "api_base": model_url, "api_key": "unused"}
    return {
        "storage": {
            "workspace": str(workspace),
            "vectordb": {"name": "context", "backend": "local"},
            "agfs": {"backend": "local"},
        },
        "embedding": {
            "dense": {
                **model,
                "model": "usem3",
                "dimension": EMBEDDING_DIM,
                "input": "text",
                "encoding_format": "float",
            }
        },
        "vlm": {**model, "model": "deterministic-summary"},
        "server": {"host": host, "port": port},
    }


class OpenVikingServer(harness.ServerProcess):
    name = "openviking-server"

    def __init__(self, *, workdir: Path, model_url: str, port: int):
        self.workdir = workdir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.config_path = workdir / "ov.conf"
        self.log_path = workdir / "openviking-server.log"
        self.config = ov_conf(workspace=workdir / "data", model_url=model_url, host="127.0.0.1", port=port)

    @property
    def command(self) -> str:
        return f"bench/.venv-openviking/bin/openviking-server --config {self.config_path.name}"

    def start(self, timeout_s: float = 180.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config, indent=2))
        # HOME inside the workdir: OpenViking reads and writes ~/.openviking; the bench never touches the real one.
        env = dict(os.environ, HOME=str(self.workdir), OPENVIKING_CONFIG_FILE=str(self.config_path))
        env.pop("DJANGO_SETTINGS_MODULE", None)
        self._launch(
            [
                str(VENV / "bin" / "openviking-server"),
                "--config",
                str(self.config_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            env,
            self.workdir,
            timeout_s,
            poll_s=0.5,
        )

    def rss_mb(self) -> float:
        import psutil

        proc = psutil.Process(self.proc.pid)
        return round(sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20, 1)


if __name__ == "__main__":
    print(ensure_venv(sys.argv[1] if len(sys.argv) > 1 else "python3.11"))
