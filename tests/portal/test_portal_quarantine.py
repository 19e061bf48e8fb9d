"""Reprocessing the quarantine through the portal: the pipeline's page offers it where there is a
quarantine, the form counts (a dry run) or lands the records of a UTC window, a time that is not one is
refused beside its input, a viewer may not, and the run's page shows what the reprocess did."""

from __future__ import annotations

import re
import uuid
from html import unescape
from typing import Any

from fastapi.testclient import TestClient

from api.core.db import unit_of_work
from api.runs import lifecycle
from api.runs.models import Run
from tests.factories import Tenant, create_connection, create_pipeline
from tests.portal.helpers import sign_in


def _json_pipeline(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    return create_pipeline(client, tenant, name="orders", state="paused")  # json into a Delta append table


def _run_of(location: str) -> str:
    match = re.fullmatch(r"/portal/runs/([0-9a-f-]+)\?notice=reprocess-queued", location)
    assert match, location
    return match.group(1)


def test_the_form_counts_or_lands_the_records_of_a_window(client: TestClient, tenant: Tenant) -> None:
    pipeline = _json_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    assert f'href="/portal/pipelines/{pipeline["id"]}/quarantine"' in client.get(f"/portal/pipelines/{pipeline['id']}").text
    action = f"/portal/pipelines/{pipeline['id']}/quarantine"
    assert 'name="since"' in client.get(action).text

    counted = client.post(action, data={"csrf_token": csrf, "since": "2026-12-07T09:30", "until": "",
                                        "action": "count"}, follow_redirects=False)

    assert counted.status_code == 303, counted.text
    run = client.get(f"/runs/{_run_of(counted.headers['location'])}", headers=tenant.viewer).json()
    assert run["trigger"] == "reprocess"
    assert (run["reprocess"]["dry_run"], run["reprocess"]["since"], run["reprocess"]["until"]) == (
        True, "2026-12-07T09:30:00Z", None)
    page = client.get(counted.headers["location"]).text
    assert "Reprocess of the quarantine (dry run: nothing written)" in page
    assert "The reprocess of the quarantine is queued" in page
    cancel = client.post(f"/runs/{run['id']}/cancel", headers=tenant.editor)
    assert cancel.status_code == 200, cancel.text

    landed = client.post(action, data={"csrf_token": csrf, "since": "", "until": "", "action": "land"},
                         follow_redirects=False)

    run = client.get(f"/runs/{_run_of(landed.headers['location'])}", headers=tenant.viewer).json()
    assert run["reprocess"] == {"ranges": None, "since": None, "until": None, "dry_run": False, "selected": None,
                                "decoded": None, "still_quarantined": None}


def test_a_time_that_is_not_one_is_refused_beside_its_input(client: TestClient, tenant: Tenant) -> None:
    pipeline = _json_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["editor"])
    action = f"/portal/pipelines/{pipeline['id']}/quarantine"

    bad = client.post(action, data={"csrf_token": csrf, "since": "yesterday", "until": "", "action": "land"})
    backwards = client.post(action, data={"csrf_token": csrf, "since": "2026-12-07T10:00", "until": "2026-12-07T09:00",
                                          "action": "land"})

    assert bad.status_code == backwards.status_code == 422
    assert re.search(r'<p class="error" id="err-since">Enter a date and time', bad.text)
    assert "until must be after since" in unescape(backwards.text)
    assert client.get(f"/pipelines/{pipeline['id']}/runs", headers=tenant.viewer).json()["total"] == 0


def test_a_pipeline_without_a_quarantine_is_not_offered_it_and_a_viewer_may_not(client: TestClient,
                                                                                tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    plain = create_pipeline(client, tenant, conn["id"], state="paused",
                            source={"connection_id": conn["id"], "topics": ["logs"], "value_format": "string"})
    sign_in(client, tenant.keys["editor"])
    assert "/quarantine" not in client.get(f"/portal/pipelines/{plain['id']}").text
    assert 'id="no-quarantine"' in client.get(f"/portal/pipelines/{plain['id']}/quarantine").text
    json_pipeline = _json_pipeline(client, tenant)
    csrf = sign_in(client, tenant.keys["viewer"])

    refused = client.post(f"/portal/pipelines/{json_pipeline['id']}/quarantine",
                          data={"csrf_token": csrf, "action": "land"}, follow_redirects=False)

    assert refused.status_code == 403


def test_the_run_page_shows_what_a_reprocess_did(client: TestClient, app: Any, tenant: Tenant) -> None:
    pipeline = _json_pipeline(client, tenant)
    queued = client.post(f"/pipelines/{pipeline['id']}/quarantine/reprocess", json={}, headers=tenant.editor).json()
    with unit_of_work(app.state.engine) as session:
        run = session.get(Run, uuid.UUID(queued["id"]))
        assert run is not None
        lifecycle.claim(session, run.id, worker="w", lease_s=30)
        lifecycle.commit_succeeded(session, run, summary={"rows_written": 18, "rows_quarantined": 0, "result": {
            "partitions": [], "reprocessed": {"dry_run": False, "selected": 24, "decoded": 18, "still_quarantined": 6}}})
    sign_in(client, tenant.keys["viewer"])

    page = client.get(f"/portal/runs/{queued['id']}").text

    shown = {name: unescape(re.sub(r"<[^>]+>", "", value)) for name, value in
             re.findall(r'<dd id="reprocess-(\w+)">(.*?)</dd>', page)}
    assert shown == {"selected": "24", "decoded": "18", "still": "6"}
    assert "Landed in the table" in page
