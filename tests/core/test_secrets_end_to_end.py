"""A connection's password through the whole pipeline, found nowhere it should not be.

Real API, Redis, ``inlet worker`` and ``inlet scheduler`` processes, spark-submit and the sandbox
Kafka. The sandbox cannot authenticate SASL (its brokers do not serve SaslHandshake), so the data
travels on a PLAINTEXT source connection while a SASL_PLAINTEXT/PLAIN connection holding the
password is created, tested, rotated, and used as the Kafka *target* of a second pipeline: its run
takes the password through the worker's secret store, the job spec and the spark-submit executors to
librdkafka, and ends ``kafka_auth``. The Delta pipeline runs, replays, and runs again.

Then every database row, every API response, the worker and scheduler logs, the run logs, spark's
output, every file left under the test's directories, and the argv and environment of every process
(polled while the runs execute) are searched for both passwords.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from api.models import metadata
from tests.factories import (
    connection_body,
    create_pipeline,
    make_tenant,
    plaintext_connection_body,
)
from tests.fixtures.kafka import produce_keyed
from tests.runs.helpers import delta_coordinates, wait_for_run

pytestmark = pytest.mark.slow


class ProcessWatch(threading.Thread):
    """Reads /proc/*/cmdline and /proc/*/environ of every process, over and over, for the needles."""

    def __init__(self, needles: list[bytes]) -> None:
        super().__init__(name="process-watch", daemon=True)
        self.needles, self.hits, self.spark_seen = needles, [], 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    cmdline = (proc / "cmdline").read_bytes()
                    environ = (proc / "environ").read_bytes()
                except OSError:
                    continue
                if b"spark_jobs/ingest.py" in cmdline or b"spark_jobs/engine.py" in cmdline:
                    self.spark_seen += 1
                for where, data in (("cmdline", cmdline), ("environ", environ)):
                    if any(n in data for n in self.needles):
                        self.hits.append((proc.name, where, cmdline[:300]))


def test_password_goes_nowhere_it_should_not(stack, sandbox_kafka, kafka_topic, tmp_path: Path) -> None:
    first, second = (f"e2e-Pa55-{uuid.uuid4().hex}" for _ in range(2))
    needles = [first.encode(), second.encode()]
    watch = ProcessWatch(needles)
    watch.start()
    responses: list[tuple[str, str, Any]] = []

    def call(method: str, url: str, headers: dict[str, str], **kwargs: Any) -> Any:
        response = stack.client.request(method, url, headers=headers, **kwargs)
        responses.append((method, url, response))
        return response

    tenant = make_tenant(stack.client)
    source, target_topic = kafka_topic(partitions=3), kafka_topic(partitions=1)
    produced = produce_keyed(sandbox_kafka.bootstrap_servers, source, 30)
    plain = call("POST", "/connections", tenant.editor, json=plaintext_connection_body(sandbox_kafka.bootstrap_servers)).json()
    sasl_body = connection_body(bootstrap_servers=sandbox_kafka.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", credentials={"username": "ingest", "password": first}, options={})
    sasl = call("POST", "/connections", tenant.editor, json=sasl_body)
    assert sasl.status_code == 201, sasl.text
    sasl = sasl.json()
    tested = call("POST", f"/connections/{sasl['id']}/test", tenant.editor)
    assert tested.status_code != 500, tested.text
    rotated = call("PATCH", f"/connections/{sasl['id']}", {**tenant.editor, "Content-Type": "application/merge-patch+json"},
                   json={"credentials": {"username": "ingest", "password": second}})
    assert rotated.status_code == 200 and rotated.json()["credentials_version"] == 2, rotated.text
    call("POST", f"/connections/{sasl['id']}/test", tenant.editor)
    call("POST", "/connections:test", tenant.editor, json={**sasl_body, "credentials": {"username": "ingest", "password": second}})

    delta = create_pipeline(stack.client, tenant, plain["id"], schedule=None, state="paused",
                            source={"connection_id": plain["id"], "topics": [source], "value_format": "raw"},
                            target={"type": "delta", "path": "secrets/e2e"})
    forward = create_pipeline(stack.client, tenant, plain["id"], schedule=None, state="paused",
                              source={"connection_id": plain["id"], "topics": [source], "value_format": "raw"},
                              target={"type": "kafka", "connection_id": sasl["id"], "topic": target_topic})
    stack.start_worker()
    stack.start_scheduler()

    def run(pipeline: dict[str, Any]) -> dict[str, Any]:
        triggered = call("POST", f"/pipelines/{pipeline['id']}/runs", tenant.editor)
        assert triggered.status_code == 202, triggered.text
        return wait_for_run(stack, triggered.json()["id"], tenant.viewer)

    runs = [run(delta)]
    offsets = f"/pipelines/{delta['id']}/offsets"
    replay = call("PATCH", offsets, tenant.editor, json={"shift_by": -3, "clamp": True, "replay_mode": "replace"})
    assert replay.status_code == 200, replay.text
    runs.append(run(delta))
    runs.append(run(forward))
    watch.stop.set()
    watch.join(5)

    assert [r["state"] for r in runs] == ["succeeded", "succeeded", "failed"], (runs, stack.log_text())
    assert runs[2]["error"]["kind"] == "kafka_auth", runs[2]  # the job did take the password to the broker
    assert delta_coordinates(delta["status"]["target_uri"]) == sorted(
        (source, p, o) for p, offs in produced.items() for o in offs)
    assert watch.spark_seen, "the process watch never saw a Spark job's process (the warm engine or spark-submit)"
    assert watch.hits == [], watch.hits

    # Every response of the API, the reads included.
    for path in ("/connections", f"/connections/{sasl['id']}", f"/pipelines/{forward['id']}", offsets,
                 f"/pipelines/{delta['id']}/runs", f"/pipelines/{forward['id']}/runs", "/audit-events",
                 *(f"/runs/{r['id']}" for r in runs), *(f"/runs/{r['id']}/log" for r in runs)):
        assert call("GET", path, tenant.admin).status_code == 200, path
    call("GET", "/metrics", {"Authorization": f"Bearer {stack.settings.admin_token.get_secret_value()}"})
    call("GET", "/readyz", {})
    for method, url, response in responses:
        text = response.content + "".join(f"{k}: {v}" for k, v in response.headers.items()).encode()
        assert not any(n in text for n in needles), f"{method} {url} answered a password"
    assert any(r["id"] in url and url.endswith("/log") and resp.text for _, url, resp in responses for r in runs[2:])

    # Every row of every table.
    engine = create_engine(stack.settings.resolved_database_url)
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            for row in conn.execute(select(table)).all():
                assert not any(n.decode() in repr(tuple(row)) for n in needles), f"table {table.name} holds a password"
    engine.dispose()

    # Every file the test's processes left: logs (worker, scheduler, spark's output), work dir, tables,
    # the (encrypted) local secret store.
    stack.stop_all()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "worker.log" for p in files) and any(p.suffix == ".parquet" for p in files)
    for path in files:
        assert not any(n in path.read_bytes() for n in needles), f"{path} holds a password"
    assert not [p for p in Path(stack.env["INLET_WORK_DIR"]).rglob("*") if p.is_file()], "the runs left files behind"
