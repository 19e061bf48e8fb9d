"""Fuzzing Inlet from its contract: schemathesis cases generated from ``openapi.yaml``, sent over TCP
to the app served by uvicorn, each response checked against the contract and the error shape.

Shared by ``tests/fuzz/test_contract_fuzz.py`` (small, fixed-seed, in ``make test``) and
``bench/fuzz_api.py`` (larger, prints figures). Failures are collected, not raised inside
Hypothesis, so one run reports every distinct failure instead of stopping at (and shrinking) the first.

Outbound Kafka: every ``bootstrap_servers`` a case carries is pointed at a closed loopback port, and
the seeded connection points there too, so connection tests and offset reads fail fast on 127.0.0.1
and never reach a generated host name.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import requests
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, Verbosity, given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAPI = REPO_ROOT / "openapi.yaml"
PROBLEM_JSON = "application/problem+json"
AUTHS = ("admin", "editor", "viewer", "operator", "none")
PATH_IDS = ("tenant_id", "key_id", "connection_id", "pipeline_id", "run_id", "webhook_id")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLOSED_PORT = free_port()  # bound then released: nothing listens there
HARMLESS_BOOTSTRAP = f"127.0.0.1:{CLOSED_PORT}"


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port in a thread; yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                           lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, name="fuzz-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


class NullDispatcher:
    """No Celery worker runs under the fuzzer: triggered runs stay queued."""

    def send_run(self, run_id: uuid.UUID) -> None:
        pass

    def send_schedules(self, slots: object) -> None:
        pass

    def send_continuation(self, pipeline_id: object, slot: object, delay_s: object) -> None:
        pass

    def send_webhook_deliveries(self, delivery_ids: object) -> None:
        pass

    def send_table_maintenance(self, pipeline_id: object) -> None:
        pass


@dataclass
class World:
    """One tenant that owns real objects, and the credentials each fuzzed caller uses."""

    headers: dict[str, dict[str, str]]
    ids: dict[str, str]


def seed_world(base_url: str, operator_token: str) -> World:
    """A tenant with a key per role, a spare key (the one ``key_id`` names, so revoking it is harmless),
    a connection to the closed port, a paused pipeline on it, a queued run, and a webhook to the closed
    port (no webhook worker runs: nothing is sent)."""
    op = {"Authorization": f"Bearer {operator_token}"}
    with httpx.Client(base_url=base_url, timeout=30) as http:
        def ok(response: httpx.Response) -> dict[str, Any]:
            assert response.status_code in (200, 201, 202), response.text
            return response.json()

        tenant = ok(http.post("/tenants", json={"name": f"fuzz-{uuid.uuid4().hex[:10]}"}, headers=op))
        keys = {role: ok(http.post(f"/tenants/{tenant['id']}/api-keys", json={"name": role, "role": role},
                                   headers=op))["key"] for role in ("admin", "editor", "viewer")}
        admin = {"Authorization": f"Bearer {keys['admin']}"}
        spare = ok(http.post("/api-keys", json={"name": "spare", "role": "viewer"}, headers=admin))
        conn = ok(http.post("/connections", json={"name": "fuzz-conn", "bootstrap_servers": HARMLESS_BOOTSTRAP,
                                                  "security_protocol": "PLAINTEXT"}, headers=admin))
        pipeline = ok(http.post("/pipelines", headers=admin, json={
            "name": "fuzz-pipe", "source": {"connection_id": conn["id"], "topics": ["orders"],
                                            "value_format": "string"},
            "target": {"type": "delta", "path": "bronze/fuzz"}, "schedule": None, "state": "paused"}))
        run = ok(http.post(f"/pipelines/{pipeline['id']}/runs", headers=admin))
        webhook = ok(http.post("/webhooks", json={"url": f"http://127.0.0.1:{CLOSED_PORT}/hook"}, headers=admin))
    headers = {role: {"Authorization": f"Bearer {key}"} for role, key in keys.items()}
    headers["operator"] = op
    headers["none"] = {}
    return World(headers=headers, ids={"tenant_id": tenant["id"], "key_id": spare["id"],
                                       "connection_id": conn["id"], "pipeline_id": pipeline["id"],
                                       "run_id": run["id"], "webhook_id": webhook["id"]})


def load_schema() -> Any:
    return schemathesis.openapi.from_path(str(OPENAPI))


def operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


def _harmless(case: Any, connection_id: str | None) -> Any:
    """Point any bootstrap servers at the closed port; with ``connection_id``, aim a pipeline body at
    the real connection so creates and replaces get past the reference check."""
    body = case.body
    if isinstance(body, dict):
        if "bootstrap_servers" in body:
            body["bootstrap_servers"] = HARMLESS_BOOTSTRAP
        source = body.get("source")
        if connection_id and isinstance(source, dict) and "connection_id" in source:
            source["connection_id"] = connection_id
    return case


def case_strategy(operation: Any, world: World) -> st.SearchStrategy[Any]:
    """Valid and invalid cases, half of them with the path ids of the world's real objects."""
    names = {p.name for p in operation.path_parameters}
    unknown = names - set(PATH_IDS)
    assert not unknown, f"{operation.label}: no real id to fill path parameter(s) {sorted(unknown)}"
    real = {name: world.ids[name] for name in names}
    strategies = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        strategies.append(operation.as_strategy(mode).map(lambda c: _harmless(c, None)))
        if real:
            strategies.append(operation.as_strategy(mode, path_parameters=real)
                              .map(lambda c: _harmless(c, world.ids["connection_id"])))
        elif operation.body:
            strategies.append(operation.as_strategy(mode).map(lambda c: _harmless(c, world.ids["connection_id"])))
    return st.one_of(strategies)


def problem_conformance(response: schemathesis.Response) -> str | None:
    """Every error is RFC 9457 problem+json with type, title, status and detail."""
    if response.status_code < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    if content_type.split(";")[0].strip() != PROBLEM_JSON:
        return f"error {response.status_code} is {content_type or 'untyped'}, not {PROBLEM_JSON}"
    try:
        body = response.json()
    except ValueError:
        return f"error {response.status_code} body is not JSON"
    missing = [k for k in ("type", "title", "status", "detail") if not isinstance(body, dict) or k not in body]
    if missing:
        return f"error {response.status_code} problem lacks {missing}"
    if body["status"] != response.status_code:
        return f"problem status {body['status']} != HTTP {response.status_code}"
    return None


def server_error(operation: Any, status: int) -> str | None:
    """No 5xx, except the upstream answers an operation documents (a 502/504 when the Kafka cluster
    it must reach cannot be used): those are the contract, not a failure of the server."""
    if status < 500:
        return None
    if status != 500 and str(status) in operation.definition.raw.get("responses", {}):
        return None
    return f"server error {status}"


CHECKS = [response_schema_conformance, content_type_conformance]


@dataclass
class Failure:
    operation: str
    auth: str
    check: str
    status: int
    message: str
    reproduce: str

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.operation, self.check, (self.message.splitlines() or [""])[0][:200], self.status)


@dataclass
class FuzzResult:
    cases: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    def distinct(self) -> list[Failure]:
        seen: dict[tuple[str, str, str, int], Failure] = {}
        for failure in self.failures:
            seen.setdefault(failure.key, failure)
        return list(seen.values())


def fuzz_operation(operation: Any, auth: str, world: World, base_url: str, *, max_examples: int,
                   seed: int, result: FuzzResult | None = None) -> FuzzResult:
    """Send up to ``max_examples`` generated cases of ``operation`` as ``auth``; collect every failure."""
    result = result or FuzzResult()
    headers = world.headers[auth]
    http = requests.Session()

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
                         suppress_health_check=list(HealthCheck), phases=[Phase.generate],
                         verbosity=Verbosity.quiet, print_blob=False)
    @given(case=case_strategy(operation, world))
    def send(case: Any) -> None:
        response = case.call(base_url=base_url, session=http, headers=headers, timeout=30)
        result.cases += 1
        result.statuses[response.status_code] = result.statuses.get(response.status_code, 0) + 1
        reproduce = f"{case.method} {response.request.url}"
        broken = server_error(operation, response.status_code)
        if broken:
            result.failures.append(Failure(operation.label, auth, "server_error", response.status_code,
                                           f"{broken}: {response.content[:300]!r}", reproduce))
        problem = problem_conformance(response)
        if problem:
            result.failures.append(Failure(operation.label, auth, "problem_json", response.status_code, problem,
                                           reproduce))
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except FailureGroup as group:  # every check that failed on this response
            for failure in group.exceptions:
                title = getattr(failure, "title", type(failure).__name__)
                message = getattr(failure, "message", str(failure))
                result.failures.append(Failure(operation.label, auth, str(title), response.status_code,
                                               str(message), reproduce))

    try:
        send()
    finally:
        http.close()
    return result


def report(failures: list[Failure], limit: int = 20) -> str:
    lines = []
    for f in failures[:limit]:
        first = (f.message.splitlines() or [""])[0][:300]
        lines.append(f"- {f.operation} as {f.auth}: [{f.check}] HTTP {f.status}: {first}\n    {f.reproduce}")
    if len(failures) > limit:
        lines.append(f"... and {len(failures) - limit} more")
    return "\n".join(lines)
