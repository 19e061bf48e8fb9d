"""The pipeline list reads as many SQL statements for ten pipelines as for one: each listed pipeline's
newest run comes from one query for the whole page, not one query per pipeline. Statements are counted
on the app's engine with a ``before_cursor_execute`` listener while the page renders."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.factories import Tenant, create_connection, create_pipeline
from tests.portal.helpers import sign_in


def _render_counting(client: TestClient, app: Any, path: str) -> tuple[list[str], str]:
    """The page at ``path`` and every SQL statement the app sent while rendering it."""
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(app.state.engine, "before_cursor_execute", record)
    try:
        page = client.get(path)
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    assert page.status_code == 200, page.text
    return statements, page.text


def _last_runs(html: str) -> dict[str, str | None]:
    """Each listed pipeline's name → the run its "Last run" cell links to (None: "never")."""
    out: dict[str, str | None] = {}
    for row in re.findall(r'<tr>\s*(<td><a href="/portal/pipelines/.*?)</tr>', html, re.DOTALL):
        name = re.search(r'<a href="/portal/pipelines/[0-9a-f-]+">([^<]+)</a>', row)
        assert name, row
        run = re.search(r'<a href="/portal/runs/([0-9a-f-]+)">', row)
        out[name.group(1)] = run.group(1) if run else None
        if run is None:
            assert "<td>never</td>" in row, row
    return out


def _pipeline_with_runs(client: TestClient, tenant: Tenant, connection_id: str, name: str, runs: int) -> str | None:
    """A pipeline that was run ``runs`` times (each run cancelled before the next); its newest run's id."""
    pipeline = create_pipeline(client, tenant, connection_id, name=name)
    newest = None
    for _ in range(runs):
        if newest is not None:
            cancelled = client.post(f"/runs/{newest}/cancel", headers=tenant.editor)
            assert cancelled.status_code == 200, cancelled.text
        run = client.post(f"/pipelines/{pipeline['id']}/runs", headers=tenant.editor)
        assert run.status_code == 202, run.text
        newest = run.json()["id"]
    return newest


def test_the_pipeline_list_reads_as_many_statements_for_ten_pipelines_as_for_one(
    client: TestClient, app: Any, tenant: Tenant
) -> None:
    conn = create_connection(client, tenant)
    expected = {"p-00": _pipeline_with_runs(client, tenant, conn["id"], "p-00", runs=2)}
    sign_in(client, tenant.keys["viewer"])

    for_one, html = _render_counting(client, app, "/portal/pipelines")
    assert _last_runs(html) == expected  # the newer of p-00's two runs

    for i in range(1, 10):
        expected[f"p-{i:02d}"] = _pipeline_with_runs(client, tenant, conn["id"], f"p-{i:02d}", runs=i % 3)
    for_ten, html = _render_counting(client, app, "/portal/pipelines")

    assert "10 pipelines" in html
    assert _last_runs(html) == expected
    assert [v is None for v in expected.values()].count(True) == 3  # p-03, p-06, p-09 never ran
    assert len(for_ten) == len(for_one), "\n".join(for_ten)
