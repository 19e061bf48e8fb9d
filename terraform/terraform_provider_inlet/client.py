"""Inlet's REST API as the provider uses it: bearer auth, ETags, Idempotency-Key, problem details.

Every failure becomes an ``ApiError`` whose message is the API's problem ``detail`` (with the
fields it names), so Terraform shows the user what Inlet said, not a status code."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

# Statuses that mean "the request may not have been applied; the same request may be sent again".
_RETRYABLE = {502, 503, 504}


class ApiError(Exception):
    def __init__(self, status: int | None, title: str, detail: str) -> None:
        super().__init__(f"{title}: {detail}" if detail else title)
        self.status = status
        self.title = title
        self.detail = detail


class NotFound(ApiError):
    """The object is gone (or belongs to another tenant): Terraform removes it from state."""


@dataclass(frozen=True)
class Answer:
    body: Any
    etag: str | None


def _problem(response: httpx.Response) -> ApiError:
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    if not isinstance(problem, dict):
        problem = {}
    title = str(problem.get("title") or response.reason_phrase or "Request failed")
    detail = str(problem.get("detail") or "")
    errors = problem.get("errors")
    if isinstance(errors, list) and errors:
        named = "; ".join(f"{e.get('field', '?')}: {e.get('message', '')}" for e in errors if isinstance(e, dict))
        detail = f"{detail} ({named})" if detail else named
    if response.status_code == 412:
        detail = (f"{detail} The object changed since Terraform last read it: run `terraform plan` again to see "
                  "the change, then apply.").strip()
    kind = NotFound if response.status_code == 404 else ApiError
    return kind(response.status_code, f"Inlet answered {response.status_code} {title}", detail)


class InletClient:
    def __init__(self, endpoint: str, api_key: str, *, timeout_s: float = 30.0, retries: int = 3,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(
            base_url=endpoint.rstrip("/"), timeout=timeout_s, transport=transport,
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "terraform-provider-inlet/0.1.0"},
        )
        self._retries = retries

    def _send(self, method: str, path: str, *, json: Any = None, headers: dict[str, str] | None = None,
              params: dict[str, Any] | None = None, retry: bool) -> httpx.Response:
        """One request; ``retry`` only where sending it twice is harmless (reads, keyed creates,
        If-Match writes, deletes)."""
        attempts = self._retries + 1 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.request(method, path, json=json, headers=headers, params=params)
            except httpx.TransportError as exc:
                if attempt == attempts:
                    raise ApiError(None, f"Inlet could not be reached at {self._http.base_url}", str(exc)) from None
            else:
                if response.status_code not in _RETRYABLE or attempt == attempts:
                    return response
            time.sleep(min(0.5 * 2 ** (attempt - 1), 4.0))
        raise AssertionError("unreachable")

    def _answer(self, response: httpx.Response) -> Answer:
        if response.status_code >= 400:
            raise _problem(response)
        body = response.json() if response.content else None
        return Answer(body=body, etag=response.headers.get("ETag"))

    def get(self, path: str, params: dict[str, Any] | None = None) -> Answer:
        return self._answer(self._send("GET", path, params=params, retry=True))

    def find(self, path: str) -> Answer | None:
        """GET, with None for an object that is gone (or another tenant's)."""
        try:
            return self.get(path)
        except NotFound:
            return None

    def create(self, path: str, body: dict[str, Any]) -> Answer:
        """POST with a fresh Idempotency-Key, reused by every retry of this one create: a response
        lost on the way back is replayed by Inlet, never turned into a second object."""
        headers = {"Idempotency-Key": f"terraform-{uuid.uuid4()}"}
        return self._answer(self._send("POST", path, json=body, headers=headers, retry=True))

    def put(self, path: str, body: dict[str, Any], *, etag: str | None) -> Answer:
        return self._answer(self._send("PUT", path, json=body, headers=_if_match(etag), retry=True))

    def patch(self, path: str, body: dict[str, Any], *, etag: str | None) -> Answer:
        # Not retried: a lost response would be retried against a moved ETag and refused.
        return self._answer(self._send("PATCH", path, json=body, headers=_if_match(etag), retry=False))

    def post(self, path: str, *, etag: str | None = None) -> Answer:
        return self._answer(self._send("POST", path, headers=_if_match(etag), retry=True))

    def delete(self, path: str, *, etag: str | None = None, params: dict[str, Any] | None = None,
               missing_ok: bool = True) -> Answer | None:
        response = self._send("DELETE", path, headers=_if_match(etag), params=params, retry=etag is not None)
        if response.status_code == 404 and missing_ok:
            return None
        return self._answer(response)


def _if_match(etag: str | None) -> dict[str, str]:
    return {"If-Match": etag} if etag else {}
