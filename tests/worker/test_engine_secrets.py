"""No credential in any place a warm engine's Spark shows: its output, its event log and every page
of its UI, both switched on here as an operator would. Real Kafka (tests/fixtures/kafka_broker.py)
over SASL_SSL/SCRAM-SHA-512 (no password) and over OAUTHBEARER with a real OIDC token server
(tests/fixtures/oidc.py: no client secret, no token): a direct Delta run, a json run (decoded in its
tasks) and a Kafka-target run through the SQL session (whose plans the UI and event log print) of
each cluster, all six on one engine."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from spark_jobs.spec import Egress, RunSpec
from tests.fixtures.kafka_broker import PASSWORD, USER, RealKafka
from tests.fixtures.oidc import CLIENT_ID, CLIENT_SECRET, RealIdp
from tests.spark_jobs.helpers import RUN_TIMEOUT_S, make_spec
from worker.launch import SparkSubmitSettings, WarmLauncher

pytestmark = [pytest.mark.slow, pytest.mark.real_kafka]

UI_PAGES = ("/jobs/", "/stages/", "/storage/", "/environment/", "/executors/", "/SQL/")
API_PATHS = ("jobs", "stages?details=true", "environment", "executors", "allexecutors",
             "sql?details=true&planDescription=true")
JWT = re.compile(r"eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+")  # a token the OIDC server issued, in any text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _everything_the_engine_shows(specs: list[RunSpec], tmp_path: Path) -> dict[str, str]:
    """Run ``specs`` on one warm engine with its UI and event log switched on, as an operator would;
    the text of every UI page, the event log and the engine's output, by name."""
    events, port = tmp_path / "events", _free_port()
    events.mkdir()
    settings = SparkSubmitSettings(master="local[2]", conf={
        "spark.ui.enabled": "true", "spark.ui.port": str(port), "spark.port.maxRetries": "0",
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
        "spark.eventLog.compress": "false",  # the same events, in plain text: a search of it means something
    })
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
    assert executions, "the Kafka-target run went through the SQL session"
    assert all(page.status_code == 200 for page in pages.values()), {n: p.status_code for n, p in pages.items()}
    event_log = "".join(path.read_text(errors="replace") for path in events.rglob("*") if path.is_file())
    assert "SparkListenerJobStart" in event_log and all(s.run_id in event_log for s in specs)
    return {f"the UI's {name}": page.text for name, page in pages.items()} | {
        "the Spark event log": event_log, "the engine's output": "\n".join(log)}


def _specs(bootstrap: str, kafka_config: dict[str, str], topic: str, out: str, tmp_path: Path) -> list[RunSpec]:
    """A direct Delta run, a json run and a Kafka-target run (through the SQL session) of ``topic``."""
    ranges = {topic: {"0": (0, 20), "1": (0, 20)}}
    return [
        make_spec(bootstrap, ranges, {"type": "delta", "uri": str(tmp_path / "raw")}, kafka_config=kafka_config,
                  value_format="string"),
        make_spec(bootstrap, ranges, {"type": "delta", "uri": str(tmp_path / "json"), "quarantine_uri": str(tmp_path / "q")},
                  kafka_config=kafka_config, value_format="json", schema="n INT"),
        make_spec(bootstrap, ranges, {"type": "kafka", "kafka_config": kafka_config, "topic": out}, kafka_config=kafka_config),
    ]


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(topic, key=f"k{i}".encode(), value=f'{{"n": {i}}}'.encode(), partition=i % 2)
    assert producer.flush(30) == 0


def test_no_password_oauth_client_secret_or_token_in_the_engines_log_event_log_or_ui(
    real_kafka: RealKafka, real_topic: Any, oauth_kafka: RealKafka, real_idp: RealIdp, oauth_topic: Any, tmp_path: Path
) -> None:
    """Both clusters' runs on one engine: what it shows after the six is searched for every secret."""
    topic, out = real_topic(partitions=2), real_topic(partitions=1)
    _produce(real_kafka.bootstrap_servers, topic)
    sasl = {"bootstrap.servers": real_kafka.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
            "ssl.ca.pem": real_kafka.ca.pem}
    oauth_in, oauth_out = oauth_topic(partitions=2), oauth_topic(partitions=1)
    _produce(oauth_kafka.bootstrap_servers, oauth_in)
    oauth = {"bootstrap.servers": oauth_kafka.bootstrap("OAUTH"), "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
             "sasl.oauthbearer.client.id": CLIENT_ID, "sasl.oauthbearer.client.secret": CLIENT_SECRET,
             "sasl.oauthbearer.token.endpoint.url": real_idp.token_url}
    loopback = Egress(allow=("127.0.0.0/8",))  # the token server is on loopback, denied by default
    (tmp_path / "scram").mkdir()
    (tmp_path / "oauth").mkdir()
    specs = _specs(sasl["bootstrap.servers"], sasl, topic, out, tmp_path / "scram") + [
        spec.model_copy(update={"egress": loopback})
        for spec in _specs(oauth["bootstrap.servers"], oauth, oauth_in, oauth_out, tmp_path / "oauth")]
    asked = len(real_idp.requests())

    shown = _everything_the_engine_shows(specs, tmp_path)

    assert real_idp.requests()[asked:], "the runs fetched their tokens"
    for where, text in shown.items():
        assert PASSWORD not in text, f"the password is in {where}"
        assert CLIENT_SECRET not in text, f"the OAuth client secret is in {where}"
        assert not JWT.search(text), f"a bearer token is in {where}"
