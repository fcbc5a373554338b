"""Fake servers for tests: a server on a free 127.0.0.1 port, served on a daemon thread."""

from __future__ import annotations

import math
import threading
from typing import Any


class LocalServer:
    """Base of the tests' fake HTTP servers: ``serve(httpd)`` runs ``httpd`` (bound to port 0) on a
    daemon thread and sets ``url``, its ``/v1`` root; ``close()`` stops it and frees the port."""

    httpd: Any
    url: str

    def serve(self, httpd: Any) -> None:
        self.httpd = httpd
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def send_json(handler: Any, reply: object, status: int = 200) -> None:
    """Answer an ``http.server`` request with ``reply`` as JSON."""
    import json

    data = json.dumps(reply).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class ModelServer(LocalServer):
    """A fake OpenAI-compatible model server whose answers are a deterministic function of the request,
    for comparing two clients' outputs byte for byte: ``/chat/completions`` ranks a window's passages by a
    digest of their text (as RankGPT/RankZephyr text, or, when the request asks for log-probabilities,
    FIRST's first-token top log-probabilities over the letters), ``/completions`` gives query likelihood
    (``echo``: every prompt token's log-probability from a digest of the prompt) or yes/no log-probabilities
    (``logprobs: 20``). Every request body is kept in ``bodies``."""

    def __init__(self) -> None:
        import json
        import re
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        server = self

        def weight(text: str) -> float:
            import hashlib

            return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") / 2**32

        def chat(body: dict) -> dict:
            content = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
            passages = re.findall(r"^\[([0-9]+|[A-Z])\] (.*)$", content, flags=re.M)
            order = sorted(passages, key=lambda p: -weight(p[1]))
            if body.get("logprobs"):
                top = [{"token": label, "logprob": -float(r)} for r, (label, _) in enumerate(order)]
                return {"choices": [{"logprobs": {"content": [{"token": order[0][0], "top_logprobs": top}]}}]}
            answer = " > ".join(f"[{label}]" for label, _ in order)
            return {"choices": [{"message": {"role": "assistant", "content": answer}}]}

        def completion(body: dict) -> dict:
            prompt = body["prompt"]
            if body.get("echo"):
                starts = [0] + [i for i in range(1, len(prompt)) if prompt[i] == " " and prompt[i - 1] != " "]
                tokens = [prompt[a:b] for a, b in zip(starts, starts[1:] + [len(prompt)])]
                values = [None] + [-weight(prompt[: s + 1]) for s in starts[1:]]
                logprobs = {"tokens": tokens, "token_logprobs": values, "text_offset": starts}
                return {"choices": [{"text": prompt, "logprobs": logprobs}]}
            yes = 0.05 + 0.9 * weight(prompt)
            top = {"yes": math.log(yes), "no": math.log(1 - yes - 0.01), "maybe": math.log(0.01)}
            return {"choices": [{"text": "yes", "logprobs": {"tokens": ["yes"], "top_logprobs": [top]}}]}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.bodies.append(body)
                send_json(self, chat(body) if self.path.endswith("/chat/completions") else completion(body))

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.serve(Server(("127.0.0.1", 0), Handler))
