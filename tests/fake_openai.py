"""A real local HTTP server speaking the OpenAI API (embeddings and chat) for tests of the LLM paths.

It answers over HTTP so the real `openai` client — its timeouts, status handling and parsing — is exercised.
Embeddings are the packaged USE model's, so retrieval through this server still ranks meaningfully.
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Script:
    """What the server does next: `mode` is "ok", "error" (HTTP `status`, with a Retry-After header of
    `retry_after` seconds when set), "drop" (the connection closed without an answer), "garbage" or "wrong_dim".

    Chat replies: `chat` is a string, or a callable of the request body returning one; `usage` the
    (prompt_tokens, completion_tokens) reported. `delay_s` delays every answer (a hang, for a client timeout).
    `mode` applies once `after` requests have been answered as "ok" (a failure part-way through a job), to `times`
    requests when set (a transient failure: "ok" again after them), else to every one."""

    mode: str = "ok"
    after: int = 0
    times: int | None = None
    status: int = 500
    retry_after: float | None = None
    delay_s: float = 0.0
    chat: object = "ok"
    usage: tuple = (11, 7)
    requests: list = field(default_factory=list)  # {"path", "body", "at": time.monotonic() on arrival}
    keep_requests: bool = True  # a long benchmark run turns it off: the log would only grow

    def chat_requests(self) -> list[dict]:
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]


class FakeOpenAI:
    def __init__(self, port: int = 0):
        self.script = Script()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.answered = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        # shutdown() waits for the serving loop's next poll: the default 0.5 s would be paid by every test's teardown.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self):
        _use().embed(["warm up"])  # load the model now, not inside a client's timeout
        self._thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _embeddings(self, body: dict, mode: str) -> dict:
        from retrieval.embedders import UseEmbedder

        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        with _ENCODE_LOCK:  # one encode at a time: concurrent numpy encodes under one GIL take seconds each
            vectors = _use().embed(inputs)
        if mode == "wrong_dim":
            vectors = vectors[:, : UseEmbedder.dim // 2]
        return {
            "object": "list",
            "model": body.get("model", "fake"),
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0},
        }

    def _chat(self, body: dict) -> dict:
        reply = self.script.chat(body) if callable(self.script.chat) else self.script.chat
        prompt_tokens, completion_tokens = self.script.usage
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                arrived = time.monotonic()
                script = fake.script
                with fake.lock:
                    fake.answered += 1
                    failing = fake.answered - script.after  # this request's place in the failing run, from 1
                    mode = script.mode if 0 < failing and (script.times is None or failing <= script.times) else "ok"
                if script.keep_requests:
                    script.requests.append({"path": self.path, "body": body, "at": arrived})
                if script.delay_s:
                    time.sleep(script.delay_s)
                    if fake.stopping.is_set():
                        return None
                if mode == "error":
                    headers = {"Retry-After": f"{script.retry_after:g}"} if script.retry_after is not None else {}
                    return self._send(
                        script.status, {"error": {"message": "scripted failure", "type": "server"}}, headers=headers
                    )
                if mode == "drop":
                    self.close_connection = True
                    return None
                if mode == "garbage":
                    return self._send(200, b"this is not json", raw=True)
                if self.path.endswith("/embeddings"):
                    return self._send(200, fake._embeddings(body, mode))
                if self.path.endswith("/chat/completions"):
                    return self._send(200, fake._chat(body))
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(self, status, payload, raw=False, headers=None):
                data = payload if raw else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


_USE_LOCK = threading.Lock()
_ENCODE_LOCK = threading.Lock()
_USE_INSTANCE = None


def _use():
    global _USE_INSTANCE
    with _USE_LOCK:
        if _USE_INSTANCE is None:
            from retrieval.embedders import UseEmbedder

            _USE_INSTANCE = UseEmbedder(threads=1)
    return _USE_INSTANCE
