"""Contracts every route keeps: problem+json errors, ETag/If-Match, Idempotency-Key, list pagination."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.core.config import Settings
from api.main import create_app
from tests.factories import (
    Tenant,
    assert_problem,
    connection_body,
    create_connection,
    create_pipeline,
    operator,
    pipeline_body,
)

# --- problem+json outside the routes -------------------------------------------------------------


def test_unknown_route_is_404(client: TestClient, tenant: Tenant) -> None:
    body = assert_problem(client.get("/no/such/route", headers=tenant.viewer), 404)
    assert body == {"type": "https://inlet.dev/problems/not-found", "title": "Not Found", "status": 404,
                    "detail": "No route matches /no/such/route", "instance": "/no/such/route"}


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/tenants"), ("PUT", "/pipelines"), ("POST", "/healthz")])
def test_wrong_method_is_405(client: TestClient, tenant: Tenant, method: str, path: str) -> None:
    response = client.request(method, path, headers=tenant.admin)
    body = assert_problem(response, 405)
    assert body["detail"] == f"{method} is not allowed on {path}"
    assert "allow" in response.headers


def test_body_over_the_limit_is_413(client: TestClient, tenant: Tenant, settings: Settings) -> None:
    conn = create_connection(client, tenant)
    huge = pipeline_body(conn["id"], name="x", description="y" * (settings.max_body_bytes + 1))
    body = assert_problem(client.post("/pipelines", json=huge, headers=tenant.editor), 413)
    assert str(settings.max_body_bytes) in body["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must hold on the bytes read
        yield b'{"name": "'
        for _ in range(settings.max_body_bytes // 65536 + 1):
            yield b"y" * 65536
        yield b'"}'

    streamed = client.post("/pipelines", content=chunks(), headers={**tenant.editor, "Content-Type": "application/json"})
    assert_problem(streamed, 413)
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0


def test_small_streamed_body_still_works(client: TestClient, tenant: Tenant) -> None:
    import json

    conn = create_connection(client, tenant)
    raw = json.dumps(pipeline_body(conn["id"])).encode()
    streamed = client.post("/pipelines", content=iter([raw[:10], raw[10:]]),
                           headers={**tenant.editor, "Content-Type": "application/json"})
    assert streamed.status_code == 201, streamed.text


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", None])
def test_non_json_body_is_415(client: TestClient, tenant: Tenant, content_type: str | None) -> None:
    headers = {**tenant.editor, **({"Content-Type": content_type} if content_type else {})}
    response = client.post("/connections", content=b'{"name": "x"}', headers=headers)
    assert_problem(response, 415)


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/merge-patch+json"])
def test_json_media_types_are_accepted(client: TestClient, tenant: Tenant, content_type: str) -> None:
    conn = create_connection(client, tenant)
    patched = client.patch(f"/connections/{conn['id']}", content=b'{"options": {"client.id": "new"}}',
                           headers={**tenant.editor, "Content-Type": content_type})
    assert patched.status_code == 200, patched.text
    assert patched.json()["options"] == {"client.id": "new"}


def test_unexpected_error_is_a_bare_500(client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    from api.pipelines import service

    def boom(**_: object) -> None:
        raise RuntimeError("SELECT secret FROM internals")

    monkeypatch.setattr(service, "list_pipelines", boom)
    response = client.get("/pipelines", headers=tenant.viewer)
    body = assert_problem(response, 500)
    assert "SELECT" not in response.text and "Traceback" not in response.text
    assert body["type"] == "https://inlet.dev/problems/internal-error"


def test_a_database_out_of_reach_is_a_503_problem_not_a_500(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    app = create_app(Settings(database_url=f"postgresql+psycopg://inlet@127.0.0.1:{port}/inlet", data_dir=tmp_path))

    with TestClient(app, raise_server_exceptions=False) as down:
        response = down.get("/pipelines", headers={"Authorization": "Bearer some-key"})

    body = assert_problem(response, 503)
    assert body["type"] == "https://inlet.dev/problems/database-unavailable" and response.headers["retry-after"] == "1"
    assert "psycopg" not in response.text and str(port) not in response.text


# --- ETag and If-Match -----------------------------------------------------------------------------

def _connection(client: TestClient, tenant: Tenant) -> tuple[str, str]:
    conn = create_connection(client, tenant)
    return f"/connections/{conn['id']}", conn["name"]


def _pipeline(client: TestClient, tenant: Tenant) -> tuple[str, str]:
    pipe = create_pipeline(client, tenant)
    return f"/pipelines/{pipe['id']}", pipe["name"]


KINDS = {"connection": _connection, "pipeline": _pipeline}


def _writes(client: TestClient, tenant: Tenant, kind: str, name: str) -> dict:
    if kind == "connection":
        return {"PUT": connection_body(name=name, options={"client.id": "put"}), "PATCH": {"options": {"client.id": "p"}}}
    conn = create_connection(client, tenant)
    return {"PUT": pipeline_body(conn["id"], name=name, state="paused"), "PATCH": {"schedule": None}}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_if_match(client: TestClient, tenant: Tenant, kind: str, method: str) -> None:
    path, name = KINDS[kind](client, tenant)
    json = _writes(client, tenant, kind, name).get(method)
    send = {"json": json} if json is not None else {}
    read = client.get(path, headers=tenant.viewer)
    etag = read.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"')
    for stale in ('"0000"', 'W/"0000"', '"a", "b"'):
        body = assert_problem(client.request(method, path, headers={**tenant.editor, "If-Match": stale}, **send), 412)
        assert body["current_etag"] == etag
    assert client.get(path, headers=tenant.viewer).json() == read.json()
    forms = ("*",) if method == "DELETE" else ("{}", '"other", {}', "W/{}", "*")
    for form in forms:
        current = client.get(path, headers=tenant.viewer).headers["etag"]
        ok = client.request(method, path, headers={**tenant.editor, "If-Match": form.format(current)}, **send)
        assert ok.status_code in (200, 204), ok.text
    if method == "DELETE":
        assert_problem(client.get(path, headers=tenant.viewer), 404)
    else:
        after = client.get(path, headers=tenant.viewer)
        assert after.headers["etag"] == ok.headers["etag"] != etag
        assert after.json() == ok.json()


def test_etag_on_every_single_object_read_and_write(client: TestClient, tenant: Tenant) -> None:
    conn = client.post("/connections", json=connection_body(), headers=tenant.editor)
    pipe = client.post("/pipelines", json=pipeline_body(conn.json()["id"]), headers=tenant.editor)
    key = client.post("/api-keys", json={"name": "k", "role": "viewer"}, headers=tenant.admin)
    responses = [
        conn, pipe, key,
        client.get(f"/connections/{conn.json()['id']}", headers=tenant.viewer),
        client.get(f"/pipelines/{pipe.json()['id']}", headers=tenant.viewer),
        client.get(f"/api-keys/{key.json()['id']}", headers=tenant.admin),
        client.get(f"/tenants/{tenant.id}", headers=operator()),
        client.post(f"/pipelines/{pipe.json()['id']}/pause", headers=tenant.editor),
        client.patch(f"/pipelines/{pipe.json()['id']}", json={"name": "renamed"}, headers=tenant.editor),
    ]
    for response in responses:
        assert response.status_code in (200, 201), response.text
        assert response.headers["etag"].startswith('"'), response.request.url


# --- Idempotency-Key -------------------------------------------------------------------------------

def test_idempotent_create_replays(client: TestClient, tenant: Tenant) -> None:
    body = connection_body()
    headers = {**tenant.editor, "Idempotency-Key": "create-conn-1"}
    first = client.post("/connections", json=body, headers=headers)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    # Same key, same body (keys in another order): the first response again, nothing new created.
    again = client.post("/connections", json=dict(reversed(list(body.items()))), headers=headers)
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert (again.headers["etag"], again.headers["location"]) == (first.headers["etag"], first.headers["location"])
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 1
    # Same key, another body: refused, still nothing created.
    other = assert_problem(client.post("/connections", json={**body, "name": "other"}, headers=headers), 422,
                           fields={"header.Idempotency-Key"})
    assert "other" not in other["detail"]
    conn_id = first.json()["id"]
    assert_problem(client.post("/pipelines", json=pipeline_body(conn_id), headers=headers), 422)
    assert client.get("/connections", headers=tenant.viewer).json()["total"] == 1
    assert client.get("/pipelines", headers=tenant.viewer).json()["total"] == 0


@pytest.mark.parametrize("route", ["tenant", "operator-key", "tenant-key", "pipeline"])
def test_every_create_honours_idempotency(client: TestClient, tenant: Tenant, route: str) -> None:
    conn_id = create_connection(client, tenant)["id"]
    path, json, headers, count = {
        "tenant": ("/tenants", {"name": "idem-tenant"}, operator(),
                   lambda: client.get("/tenants", headers=operator()).json()["total"]),
        "operator-key": (f"/tenants/{tenant.id}/api-keys", {"name": "k", "role": "viewer"}, operator(),
                         lambda: client.get("/api-keys", headers=tenant.admin).json()["total"]),
        "tenant-key": ("/api-keys", {"name": "k", "role": "viewer"}, tenant.admin,
                       lambda: client.get("/api-keys", headers=tenant.admin).json()["total"]),
        "pipeline": ("/pipelines", pipeline_body(conn_id), tenant.editor,
                     lambda: client.get("/pipelines", headers=tenant.viewer).json()["total"]),
    }[route]
    headers = {**headers, "Idempotency-Key": f"k-{route}"}
    before = count()
    first = client.post(path, json=json, headers=headers)
    assert first.status_code == 201, first.text
    replay = client.post(path, json=json, headers=headers)
    assert (replay.status_code, replay.headers["idempotent-replayed"]) == (201, "true")
    expected = first.json()
    if "key" in expected:  # a new API key is shown once: never stored, so a replay cannot show it
        expected["key"] = None
    assert replay.json() == expected
    assert count() == before + 1


def test_idempotency_keys_are_per_tenant(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    body = connection_body()
    mine = client.post("/connections", json=body, headers={**tenant.editor, "Idempotency-Key": "shared"})
    theirs = client.post("/connections", json=body, headers={**other_tenant.editor, "Idempotency-Key": "shared"})
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert "idempotent-replayed" not in theirs.headers and theirs.json()["id"] != mine.json()["id"]


def test_failed_request_is_not_remembered(client: TestClient, tenant: Tenant) -> None:
    headers = {**tenant.editor, "Idempotency-Key": "retry-me"}
    bad = connection_body(bootstrap_servers="nope")
    assert_problem(client.post("/connections", json=bad, headers=headers), 422)
    good = client.post("/connections", json=connection_body(), headers=headers)
    assert good.status_code == 201 and "idempotent-replayed" not in good.headers


@pytest.mark.parametrize("key", ["", "x" * 256])
def test_bad_idempotency_key_is_422(client: TestClient, tenant: Tenant, key: str) -> None:
    response = client.post("/connections", json=connection_body(), headers={**tenant.editor, "Idempotency-Key": key})
    assert_problem(response, 422, fields={"header.Idempotency-Key"})


# --- Lists ------------------------------------------------------------------------------------------

LISTS = {"/connections": "viewer", "/pipelines": "viewer", "/api-keys": "admin", "/audit-events": "viewer",
         "/tenants": "operator"}


@pytest.mark.parametrize("path", LISTS)
def test_list_shape_and_limits(client: TestClient, tenant: Tenant, settings: Settings, path: str) -> None:
    headers = operator() if LISTS[path] == "operator" else tenant.as_(LISTS[path])
    default = client.get(path, headers=headers)
    assert default.status_code == 200, default.text
    assert set(default.json()) == {"items", "total", "limit", "offset"}
    assert (default.json()["limit"], default.json()["offset"]) == (50, 0)
    cap = settings.page_limit_max
    assert client.get(path, params={"limit": cap}, headers=headers).json()["limit"] == cap
    for params, field in (({"limit": cap + 1}, "query.limit"), ({"limit": 0}, "query.limit"),
                          ({"offset": -1}, "query.offset"), ({"sort": "id; DROP TABLE x"}, "query.sort"),
                          ({"limit": "ten"}, "query.limit")):
        assert_problem(client.get(path, params=params, headers=headers), 422, fields={field})


def test_sort_ties_break_on_id_and_pages_cover_everything(client: TestClient, tenant: Tenant) -> None:
    conn = create_connection(client, tenant)
    made = {create_pipeline(client, tenant, conn["id"], state="paused")["id"] for _ in range(5)}
    for sort in ("state", "-state"):
        seen = []
        for offset in range(0, 6, 2):
            page = client.get("/pipelines", params={"sort": sort, "limit": 2, "offset": offset}, headers=tenant.viewer)
            assert page.json()["total"] == 5
            seen += [p["id"] for p in page.json()["items"]]
        assert len(seen) == 5 and set(seen) == made
        assert seen == (sorted(made) if sort == "state" else sorted(made, reverse=True))
