"""The model endpoint both servers use: an OpenAI-compatible HTTP server in its own process.

    .venv/bin/python -m bench.vs_openviking.model_server PORT

Embeddings are the packaged USE model's (`retrieval.embedders.UseEmbedder`, 512 dims), the vectors ovsite computes
in process, so both servers rank on the same vectors. Chat replies are deterministic: a summary prompt is answered
with the head of the text it quotes, so OpenViking's L0/L1 summaries carry the document's own words (no model is
available offline; the point is latency, not summary quality). It is the test suite's `tests/fake_openai.py`
server, run in a separate process so its embedding work never shares a GIL with the benchmark's clients.

With `MODEL_SERVER_EMBED_LOG=path` in its environment it also appends every embedding request's inputs to that file
(one JSON line per request: `{"inputs": [...]}`), so a probe can see which texts a server embedded; the replies are
unchanged (score_probe.py uses it).
"""

import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

# OpenViking's summary prompts quote the text after one of these headings (openviking/prompts/templates/semantic).
_QUOTED = re.compile(
    r"(?:【File Content】|\[Files and Their Summaries in Directory\]|【Content】)\s*\n(.*?)"
    r"(?:\n\s*\n(?:Output requirements|Note:|\[|【)|\Z)",
    re.S,
)
SUMMARY_CHARS = 400


def deterministic_reply(body: dict) -> str:
    """The head of the quoted text, else of the last user message: same prompt, same reply."""
    messages = body.get("messages") or []
    text = ""
    for message in reversed(messages):
        content = message.get("content")
        if isinstance(content, list):  # multimodal parts: keep the text ones
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        if message.get("role") == "user" and content:
            text = content
            break
    match = _QUOTED.search(text)
    quoted = match.group(1) if match else text
    return " ".join(quoted.split())[:SUMMARY_CHARS] or "ok"


def _log_embedding_inputs(server, path: Path) -> None:
    """Wraps the server's embedding handler: the inputs go to `path` (JSON lines), the reply is the handler's."""
    embeddings = server._embeddings
    lock = threading.Lock()

    def logged(body: dict, mode: str) -> dict:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with lock, path.open("a", encoding="utf-8") as log:
            log.write(json.dumps({"inputs": inputs}, ensure_ascii=False) + "\n")
        return embeddings(body, mode)

    server._embeddings = logged


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ovsite.settings")
    from tests.fake_openai import FakeOpenAI

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = FakeOpenAI(port=port)
    server.script.chat = deterministic_reply
    server.script.usage = (0, 0)
    server.script.keep_requests = False
    if os.environ.get("MODEL_SERVER_EMBED_LOG"):
        _log_embedding_inputs(server, Path(os.environ["MODEL_SERVER_EMBED_LOG"]))
    server.start()
    print(server.url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
