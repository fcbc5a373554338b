"""Fake servers for tests: a server on a free 127.0.0.1 port, served on a daemon thread."""

from __future__ import annotations

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
