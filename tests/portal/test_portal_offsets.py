"""The portal's offsets pages over HTTP against the sandbox Kafka, runs completed without Spark
(``run_without_spark``): which run wrote an offset, the history of the offsets' changes with who made
them, and the replay modes beyond those of ``test_portal_browser`` (a time ago, back to the starting
offsets) with their dry runs."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

from fastapi.testclient import TestClient

from tests.factories import Tenant, create_sandbox_pipeline
from tests.fixtures.kafka import SandboxKafka, produce_keyed
from tests.offsets.helpers import run_without_spark
from tests.portal.helpers import form_fields, sign_in


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def _history(html: str) -> list[list[str]]:
    body = html.split('<table id="history">')[1].split("</table>")[0]
    return [[_text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
            for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[1], re.DOTALL)]


def test_which_run_wrote_an_offset_links_to_the_run(client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]) -> None:
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 10)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    first = run_without_spark(client, tenant, pipeline["id"])
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 5)
    second = run_without_spark(client, tenant, pipeline["id"])
    sign_in(client, tenant.keys["viewer"])
    page = f"/portal/pipelines/{pipeline['id']}/offsets"

    found = client.get(page, params={"topic": topic, "partition": "0", "offset": "12"})
    assert found.status_code == 200
    answer = found.text.split('id="lookup-answer"')[1].split("</div>")[0]
    assert f'<a href="/portal/runs/{second["id"]}">run #2</a>' in answer and "which read 10–14" in _text(answer)
    early = client.get(page, params={"topic": topic, "partition": "0", "offset": "0"}).text
    assert f'<a href="/portal/runs/{first["id"]}">run #1</a>' in early
    ahead = client.get(page, params={"topic": topic, "partition": "0", "offset": "15"}).text
    assert f"No succeeded run wrote offset 15 of {topic}[0]: the pipeline has not read that far yet (it reads " \
           "from 15 next)" in _text(ahead)
    asked_badly = client.get(page, params={"topic": topic, "partition": "x", "offset": "-1"})
    assert asked_badly.status_code == 422
    assert dict(re.findall(r'<p class="error" id="err-([\w-]+)">([^<]+)</p>', asked_badly.text)) == {
        "partition": "Enter a partition number (0, 1, …)", "offset": "Enter an offset (0 or more)"}
    assert "No change yet" in found.text


def test_the_history_says_who_moved_the_offsets_when_and_from_where_to_where(
    client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=2)
    placed = produce_keyed(sandbox_kafka.bootstrap_servers, topic, 20)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    run_without_spark(client, tenant, pipeline["id"])
    moved = client.patch(f"/pipelines/{pipeline['id']}/offsets", headers=tenant.editor,
                         json={"shift_by": -3, "topics": [topic], "partitions": [0]})
    assert moved.status_code == 200, moved.text

    # Back to the starting offsets from the replay page: a dry run of every partition, then applied.
    csrf = sign_in(client, tenant.keys["admin"])
    replay = f"/portal/pipelines/{pipeline['id']}/replay"
    refused = client.post(replay, data={"csrf_token": csrf, "mode": "starting", "replay_mode": "replace"})
    assert refused.status_code == 422 and "Back to the starting offsets, records read again are appended" in refused.text
    preview = client.post(replay, data={"csrf_token": csrf, "mode": "starting", "replay_mode": "append"})
    assert preview.status_code == 200, preview.text
    assert "Back to the starting offsets; records read again are appended. 2 of 2 partitions would move" in \
        _text(preview.text)
    rows = re.findall(r"<tr><td>[^<]+</td><td class=\"num\">(\d+)</td><td class=\"num\">([\d,]+)</td>"
                      r"<td class=\"num\">([\d,]+)</td>", preview.text)
    ends = {p: len(offsets) for p, offsets in placed.items()}
    assert rows == [("0", str(ends[0] - 3), "0"), ("1", str(ends[1]), "0")]
    applied = client.post(replay, data=form_fields(preview.text, replay) | {"action": "apply"}, follow_redirects=False)
    assert applied.status_code == 303, applied.text

    history = _history(client.get(f"/portal/pipelines/{pipeline['id']}/offsets").text)
    assert [row[-3:] for row in history] == [
        [f"{topic}[0]", str(ends[0] - 3), "0"], [f"{topic}[1]", str(ends[1]), "0"], [f"{topic}[0]", str(ends[0]), str(ends[0] - 3)]]
    assert history[0][1:3] == ["you", "back to the starting offsets; records read again are appended"]
    assert history[2][1:3] == ["key “editor-key” (editor)", "shifted; records read again are appended"]  # an admin sees the key's name
    sign_in(client, tenant.keys["viewer"])
    as_viewer = _history(client.get(f"/portal/pipelines/{pipeline['id']}/offsets").text)
    assert re.fullmatch(r"API key [0-9a-f]{8}", as_viewer[0][1]) and re.fullmatch(r"API key [0-9a-f]{8}", as_viewer[2][1])


def test_a_replay_by_a_time_ago_shows_the_clusters_answer_beside_its_input(
    client: TestClient, tenant: Tenant, sandbox_kafka: SandboxKafka, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=1)
    produce_keyed(sandbox_kafka.bootstrap_servers, topic, 5)
    pipeline = create_sandbox_pipeline(client, tenant, sandbox_kafka.bootstrap_servers, [topic])
    csrf = sign_in(client, tenant.keys["editor"])
    replay = f"/portal/pipelines/{pipeline['id']}/replay"
    empty = client.post(replay, data={"csrf_token": csrf, "tp": f"{topic}|0", "mode": "duration"})
    assert empty.status_code == 422 and 'id="err-duration">Enter how far back, such as PT1H' in empty.text
    odd = client.post(replay, data={"csrf_token": csrf, "tp": f"{topic}|0", "mode": "duration", "duration": "1 hour"})
    assert odd.status_code == 422
    assert 'id="err-duration">not a positive ISO 8601 duration such as PT1H, P1D or P1DT12H30M' in odd.text
    # The sandbox cannot look timestamps up (README): the cluster's refusal is shown where the time was asked,
    # a timestamp an hour back from now.
    asked = client.post(replay, data={"csrf_token": csrf, "tp": f"{topic}|0", "mode": "duration", "duration": "pt1h"})
    assert asked.status_code == 422, asked.text
    assert re.search(rf'id="err-duration">{topic}\[0\]: no offset at or after \d{{4}}-\d\d-\d\dT', asked.text)
    assert 'value="pt1h"' in asked.text and '<table id="preview">' not in asked.text
