"""The running sandbox's control interface: a small JSON-over-HTTP server on 127.0.0.1, its client,
and the state file through which other processes find both.

The state file holds two lines: the bootstrap servers, then the control address. Tests, the demo
and ``inlet sandbox-kafka <fault>`` read it to create topics and inject faults into a sandbox that
runs in another process.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sandbox.cluster import SandboxCluster, SandboxError

# operation → (SandboxCluster method, its JSON arguments)
_OPERATIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "create-topic": ("create_topic", ("name", "partitions", "replication")),
    "delete-topic": ("delete_topic", ("name",)),
    "broker-down": ("broker_down", ("broker_id",)),
    "broker-up": ("broker_up", ("broker_id",)),
    "set-rtt": ("set_rtt", ("broker_id", "ms")),
    "request-errors": ("push_request_errors", ("api_key", "errors")),
    "clear-request-errors": ("clear_request_errors", ("api_key",)),
    "delete-records": ("delete_records", ("topic", "partition", "before_offset")),
}


def write_state_file(path: Path, bootstrap_servers: str, control_address: str) -> None:
    # Written whole then renamed, so a reader never sees half a file.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{bootstrap_servers}\n{control_address}\n")
    tmp.replace(path)


def read_state_file(path: Path) -> tuple[str, str]:
    """``(bootstrap_servers, control_address)`` of the sandbox that wrote ``path``."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise SandboxError(f"no sandbox state file at {path}: is `inlet sandbox-kafka` running?") from None
    if len(lines) < 2 or not lines[0] or not lines[1]:
        raise SandboxError(f"{path} is not a sandbox state file")
    return lines[0], lines[1]


class ControlServer:
    """Serves the operations of one ``SandboxCluster`` on ``127.0.0.1:port`` (0: any free port)."""

    def __init__(self, cluster: SandboxCluster, port: int = 0) -> None:
        self.cluster = cluster
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(cluster))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ControlServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sandbox-control", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()


def _handler_for(cluster: SandboxCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/status":
                return self._reply(HTTPStatus.NOT_FOUND, {"error": f"unknown path {self.path}"})
            self._reply(HTTPStatus.OK, {"bootstrap_servers": cluster.bootstrap_servers, "brokers": cluster.brokers})

        def do_POST(self) -> None:
            operation = _OPERATIONS.get(self.path.strip("/"))
            if operation is None:
                return self._reply(HTTPStatus.NOT_FOUND, {"error": f"unknown operation {self.path}"})
            method, params = operation
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                unknown = set(body) - set(params)
                if unknown:
                    raise ValueError(f"unknown argument(s): {', '.join(sorted(unknown))}")
                getattr(cluster, method)(**body)
            except (ValueError, TypeError, SandboxError) as exc:
                return self._reply(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            self._reply(HTTPStatus.OK, {"ok": True})

        def _reply(self, status: HTTPStatus, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per fault injected is noise in test output

    return Handler


class SandboxControlClient:
    """Talks to a sandbox in another process; same fault methods as ``SandboxCluster``."""

    def __init__(self, bootstrap_servers: str, control_address: str, *, timeout_s: float = 10.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.control_address = control_address.rstrip("/")
        self.timeout_s = timeout_s

    @classmethod
    def from_state_file(cls, path: Path | str) -> SandboxControlClient:
        return cls(*read_state_file(Path(path)))

    def status(self) -> dict[str, Any]:
        return self._request("GET", "/status")

    def create_topic(self, name: str, partitions: int, replication: int = 1) -> None:
        self._post("create-topic", name=name, partitions=partitions, replication=replication)

    def delete_topic(self, name: str) -> None:
        self._post("delete-topic", name=name)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        self._post("delete-records", topic=topic, partition=partition, before_offset=before_offset)

    def broker_down(self, broker_id: int) -> None:
        self._post("broker-down", broker_id=broker_id)

    def broker_up(self, broker_id: int) -> None:
        self._post("broker-up", broker_id=broker_id)

    def set_rtt(self, broker_id: int, ms: int) -> None:
        self._post("set-rtt", broker_id=broker_id, ms=ms)

    def push_request_errors(self, api_key: int | str, errors: Sequence[int | str]) -> None:
        self._post("request-errors", api_key=api_key, errors=list(errors))

    def clear_request_errors(self, api_key: int | str) -> None:
        self._post("clear-request-errors", api_key=api_key)

    def _post(self, operation: str, **args: Any) -> None:
        self._request("POST", f"/{operation}", args)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.control_address + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
            raise SandboxError(f"{path.strip('/')}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise SandboxError(f"sandbox control interface at {self.control_address} unreachable: {exc}") from None


# Either drives a sandbox: in this process, or in another one through its control interface.
ClusterLike = SandboxCluster | SandboxControlClient
