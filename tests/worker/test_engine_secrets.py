"""No SASL password in any place a warm engine's Spark shows: its output, its event log and every
page of its UI, both switched on here as an operator would. Real Kafka over SASL_SSL/SCRAM-SHA-512
(tests/fixtures/kafka_broker.py): a direct Delta run, a json run through the SQL session (whose plans
the UI and event log print) and a Kafka-target run, all on one engine."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer

from tests.fixtures.kafka_broker import PASSWORD, USER
from tests.spark_jobs.helpers import RUN_TIMEOUT_S, make_spec
from worker.engine import WarmLauncher
from worker.launcher import SparkSubmitSettings

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka]

UI_PAGES = ("/jobs/", "/stages/", "/storage/", "/environment/", "/executors/", "/SQL/")
API_PATHS = ("jobs", "stages?details=true", "environment", "executors", "allexecutors",
             "sql?details=true&planDescription=true")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_password_in_the_engines_log_event_log_or_ui(real_kafka, real_topic, tmp_path: Path) -> None:
    topic, out = real_topic(partitions=2), real_topic(partitions=1)
    producer = Producer({"bootstrap.servers": real_kafka.bootstrap_servers})
    for i in range(40):
        producer.produce(topic, key=f"k{i}".encode(), value=f'{{"n": {i}}}'.encode(), partition=i % 2)
    assert producer.flush(30) == 0
    sasl = {"bootstrap.servers": real_kafka.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
            "ssl.ca.pem": real_kafka.ca.pem}
    events, port = tmp_path / "events", _free_port()
    events.mkdir()
    settings = SparkSubmitSettings(master="local[2]", conf={
        "spark.ui.enabled": "true", "spark.ui.port": str(port), "spark.port.maxRetries": "0",
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
        "spark.eventLog.compress": "false",  # the same events, in plain text: a search of it means something
    })
    ranges = {topic: {"0": (0, 20), "1": (0, 20)}}
    bootstrap = sasl["bootstrap.servers"]
    specs = [
        make_spec(bootstrap, ranges, {"type": "delta", "uri": str(tmp_path / "raw")}, kafka_config=sasl, value_format="string"),
        make_spec(bootstrap, ranges, {"type": "delta", "uri": str(tmp_path / "json"), "quarantine_uri": str(tmp_path / "q")},
                  kafka_config=sasl, value_format="json", schema="n INT"),
        make_spec(bootstrap, ranges, {"type": "kafka", "kafka_config": sasl, "topic": out}, kafka_config=sasl),
    ]
    log: list[str] = []
    warm = WarmLauncher(settings)
    try:
        for spec in specs:
            result = warm.launch(spec, workdir=tmp_path, timeout_s=RUN_TIMEOUT_S, on_log_line=log.append)
            assert result.status == "succeeded", (result.error, log[-40:])

        ui = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=ui, timeout=30, follow_redirects=True) as client:
            app = client.get("/api/v1/applications").json()[0]["id"]
            jobs = client.get(f"/api/v1/applications/{app}/jobs").json()
            pages = {path: client.get(path) for path in UI_PAGES}
            pages |= {path: client.get(f"/api/v1/applications/{app}/{path}") for path in API_PATHS}
            pages |= {f"job {j['jobId']}": client.get("/jobs/job/", params={"id": j["jobId"]}) for j in jobs}
            executions = client.get(f"/api/v1/applications/{app}/sql").json()
            pages |= {f"sql {e['id']}": client.get("/SQL/execution/", params={"id": e["id"]}) for e in executions}
    finally:
        warm.close()  # the event log is complete once the engine's session stops

    assert {j["jobGroup"] for j in jobs if j.get("jobGroup")} == {s.run_id for s in specs}, "the UI shows every run"
    assert executions, "the json and Kafka-target runs went through the SQL session"
    for name, page in pages.items():
        assert page.status_code == 200, name
        assert PASSWORD not in page.text, f"the password is on the UI's {name}"
    event_log = "".join(path.read_text(errors="replace") for path in events.rglob("*") if path.is_file())
    assert "SparkListenerJobStart" in event_log and all(s.run_id in event_log for s in specs)
    assert PASSWORD not in event_log, "the password is in the Spark event log"
    assert PASSWORD not in "\n".join(log), "the password is in the engine's output"
