"""The provider's own rules, without Terraform: what it sends for write-only values, how it compares
JSON documents, and what it refuses before asking Inlet."""

from __future__ import annotations

from typing import Any

import pytest
from tf.types import Unknown
from tf.utils import Diagnostics

from terraform_provider_inlet.provider import InletProvider
from terraform_provider_inlet.resources import connection, pipeline, pipeline_offsets
from terraform_provider_inlet.values import JsonDocument, option_texts

STATE = {"name": "c", "bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
         "sasl_username": "u", "sasl_password": "p", "ssl_ca_pem": "CA", "ssl_key_pem": "KEY"}


def test_unchanged_write_only_values_are_not_sent_so_nothing_rotates() -> None:
    body = connection.request_body(STATE | {"name": "renamed"}, STATE)
    assert "credentials" not in body
    assert body["ssl"] == {"ca_pem": "CA"}  # key omitted: Inlet keeps it


def test_changed_or_removed_write_only_values_are_sent() -> None:
    assert connection.request_body(STATE | {"sasl_password": "q"}, STATE)["credentials"] == {
        "username": "u", "password": "q"}
    removed = connection.request_body(STATE | {"sasl_username": None, "sasl_password": None, "ssl_key_pem": None},
                                      STATE)
    assert removed["credentials"] is None and removed["ssl"] == {"ca_pem": "CA", "key_pem": None,
                                                                  "key_password": None}


def test_a_rotation_outside_terraform_forgets_the_known_credentials() -> None:
    answer = {"id": "i", "name": "c", "bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL",
              "sasl_mechanism": "PLAIN", "ssl": None, "options": {}, "has_credentials": True,
              "credentials_version": 3, "credentials_status": "ok"}
    known = STATE | {"credentials_version": 3}
    assert connection.state_from(answer, '"e"', known)["sasl_password"] == "p"
    assert connection.state_from(answer | {"credentials_version": 4}, '"e"', known)["sasl_password"] is None
    assert connection.state_from(answer | {"has_credentials": False}, '"e"', known)["sasl_username"] is None


@pytest.mark.parametrize(("written", "read", "same"), [
    ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),
    ({"t": "2026-01-01T00:00:00+00:00"}, {"t": "2026-01-01T00:00:00Z"}, True),
    ({"t": "2026-01-01T01:00:00+01:00"}, {"t": "2026-01-01T00:00:00Z"}, True),
    ({"t": "2026-01-01T00:00:01Z"}, {"t": "2026-01-01T00:00:00Z"}, False),
    ({"a": 1}, {"a": 1, "max_offsets_per_run": 5}, False),
])
def test_json_documents_compare_by_meaning(written: dict[str, Any], read: dict[str, Any], same: bool) -> None:
    assert JsonDocument().semantically_equal(written, read) is same


def test_client_options_read_as_terraform_strings() -> None:
    assert option_texts({"linger.ms": 5, "enable.idempotence": True, "client.id": "x"}) == {
        "linger.ms": "5", "enable.idempotence": "true", "client.id": "x"}


def test_json_documents_are_written_like_jsonencode() -> None:
    assert JsonDocument().encode({"b": "<&>", "a": ["é"]}) == '{"a":["é"],"b":"\\u003c\\u0026\\u003e"}'


@pytest.mark.parametrize(("config", "error"), [
    ({"offsets": {"t:0": 1}, "reset": "earliest"}, "exactly one"),
    ({}, "exactly one"),
    ({"reset": "newest"}, "reset must be"),
    ({"offsets": {"t:0": 1}, "topics": ["t"]}, "topics limits"),
    ({"reset": "starting_offsets", "topics": ["t"]}, "every partition"),
    ({"to_timestamp": "2026-01-01T00:00:00Z", "replay_mode": "overwrite"}, "replay_mode"),
    ({"reset": "starting_offsets", "replay_mode": "replace"}, "append mode"),
])
def test_offsets_changes_are_checked_before_inlet_is_asked(config: dict[str, Any], error: str) -> None:
    diags = Diagnostics()
    full = dict.fromkeys(a.name for a in pipeline_offsets.ATTRIBUTES) | config
    pipeline_offsets.check_config(diags, full)
    assert diags.has_errors() and error in str(diags)


def test_offsets_keys_are_topic_colon_partition() -> None:
    diags = Diagnostics()
    assert pipeline_offsets.partition_entries(diags, {"orders.v2:3": 7}) == [{"topic": "orders.v2", "partition": 3, "offset": 7}]
    pipeline_offsets.partition_entries(diags, {"orders": 7, "orders:1": 1.5})
    assert 'is not "topic:partition"' in str(diags) and "whole number" in str(diags)


def test_oauth_credentials_go_out_in_inlets_shape() -> None:
    oauth = {"name": "c", "bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL",
             "sasl_mechanism": "OAUTHBEARER", "oauth_client_id": "id", "oauth_client_secret": "s",
             "oauth_token_endpoint_url": "https://idp.example.com/token", "oauth_scope": None}
    assert connection.request_body(oauth, None)["credentials"] == {
        "client_id": "id", "client_secret": "s", "token_endpoint_url": "https://idp.example.com/token"}
    assert connection.request_body(oauth | {"oauth_scope": "kafka"}, oauth)["credentials"]["scope"] == "kafka"


def test_the_provider_block_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INLET_ENDPOINT", "http://from-env:8000")
    monkeypatch.setenv("INLET_API_KEY", "env-key")
    provider, diags = InletProvider(), Diagnostics()
    provider.configure_provider(diags, {"endpoint": "https://inlet.example.com/", "api_key": "block-key",
                                        "timeout_seconds": 5})
    assert not diags.has_errors()
    assert str(provider.client._http.base_url) == "https://inlet.example.com"
    assert provider.client._http.headers["Authorization"] == "Bearer block-key"
    assert provider.client._http.timeout.read == 5


def test_a_provider_without_endpoint_or_key_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INLET_ENDPOINT", raising=False)
    monkeypatch.delenv("INLET_API_KEY", raising=False)
    diags = Diagnostics()
    InletProvider().configure_provider(diags, {"endpoint": None, "api_key": None, "timeout_seconds": None})
    assert "INLET_ENDPOINT" in str(diags) and "INLET_API_KEY" in str(diags)


@pytest.mark.parametrize(("planned", "expected"), [
    ({"offsets": {"t:1": 4}}, ("PATCH", {"replay_mode": "append", "clamp": False,
                                          "offsets": [{"topic": "t", "partition": 1, "offset": 4}]})),
    ({"reset": "latest", "topics": ["t"], "clamp": True}, ("PATCH", {"replay_mode": "append", "clamp": True,
                                                                     "reset": "latest", "topics": ["t"]})),
    ({"to_timestamp": "2026-01-01T00:00:00Z", "replay_mode": "replace"},
     ("PATCH", {"replay_mode": "replace", "clamp": False, "to_timestamp": "2026-01-01T00:00:00Z"})),
    ({"reset": "starting_offsets"}, ("DELETE", {})),
])
def test_each_offsets_change_becomes_one_request(planned: dict[str, Any], expected: tuple[str, dict[str, Any]]) -> None:
    full = dict.fromkeys(a.name for a in pipeline_offsets.ATTRIBUTES) | planned
    assert pipeline_offsets.change_request(Diagnostics(), full) == expected



REGISTRY = {"schema_registry_url": "https://sr.example.com", "schema_registry_ca_pem": None,
            "schema_registry_endpoint_identification": None, "schema_registry_username": "sr",
            "schema_registry_password": "sr-pass", "schema_registry_token": None}
WITH_REGISTRY = STATE | REGISTRY
NO_BASIC = {"schema_registry_username": None, "schema_registry_password": None}


def test_a_registry_goes_out_with_its_credentials_only_when_they_change() -> None:
    assert connection.request_body(WITH_REGISTRY, None)["schema_registry"] == {
        "url": "https://sr.example.com", "credentials": {"username": "sr", "password": "sr-pass"}}
    moved = WITH_REGISTRY | {"schema_registry_url": "https://sr2.example.com", "schema_registry_ca_pem": "CA",
                             "schema_registry_endpoint_identification": "none"}
    assert connection.request_body(moved, WITH_REGISTRY)["schema_registry"] == {
        "url": "https://sr2.example.com", "ca_pem": "CA", "endpoint_identification": "none"}  # Inlet keeps them
    token = WITH_REGISTRY | NO_BASIC | {"schema_registry_token": "t"}
    assert connection.request_body(token, WITH_REGISTRY)["schema_registry"]["credentials"] == {"token": "t"}
    bare = WITH_REGISTRY | NO_BASIC
    assert connection.request_body(bare, WITH_REGISTRY)["schema_registry"]["credentials"] is None
    assert "credentials" not in connection.request_body(bare, None)["schema_registry"]
    assert connection.request_body(STATE, WITH_REGISTRY)["schema_registry"] is None
    assert connection.request_body(STATE, None)["schema_registry"] is None


def test_a_registry_reads_back_as_configured_until_its_credentials_move_outside_terraform() -> None:
    answer = {"id": "i", "name": "c", "bootstrap_servers": "b:9093", "security_protocol": "SASL_SSL",
              "sasl_mechanism": "PLAIN", "ssl": None, "options": {}, "has_credentials": True,
              "credentials_version": 3, "credentials_status": "ok",
              "schema_registry": {"url": "https://sr.example.com", "ca_pem": None, "endpoint_identification": "https",
                                  "auth": "basic"}}
    known = WITH_REGISTRY | {"credentials_version": 3}

    def registry_of(state: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in state.items() if k.startswith("schema_registry_")}

    assert registry_of(connection.state_from(answer, '"e"', known)) == REGISTRY
    assert registry_of(connection.state_from(answer | {"credentials_version": 4}, '"e"', known)) == REGISTRY | NO_BASIC
    as_bearer = answer | {"schema_registry": answer["schema_registry"] | {"auth": "bearer"}}
    assert connection.state_from(as_bearer, '"e"', known)["schema_registry_password"] is None
    explicit = known | {"schema_registry_endpoint_identification": "https"}
    assert connection.state_from(answer, '"e"', explicit)["schema_registry_endpoint_identification"] == "https"
    unchecked = answer | {"schema_registry": answer["schema_registry"] | {"endpoint_identification": "none"}}
    assert connection.state_from(unchecked, '"e"', known)["schema_registry_endpoint_identification"] == "none"
    assert registry_of(connection.state_from(answer | {"schema_registry": None}, '"e"', known)) == dict.fromkeys(REGISTRY)


@pytest.mark.parametrize(("config", "error"), [
    ({"schema_registry_url": "u", "schema_registry_username": "a", "schema_registry_password": "b",
      "schema_registry_token": "t"}, "not both"),
    ({"schema_registry_url": "u", "schema_registry_username": "a"}, "needs both"),
    ({"schema_registry_url": "u", "schema_registry_endpoint_identification": "off"}, "https or none"),
    ({"schema_registry_token": "t"}, "need schema_registry_url"),
])
def test_registry_attributes_are_checked_before_inlet_is_asked(config: dict[str, Any], error: str) -> None:
    diags = Diagnostics()
    connection.check_registry(diags, config)
    assert diags.has_errors() and error in str(diags)
    fine = Diagnostics()
    connection.check_registry(fine, {"schema_registry_url": Unknown, "schema_registry_username": "a",
                                     "schema_registry_password": Unknown})
    assert not fine.has_errors()


def test_older_states_gain_the_registry_attributes_as_null() -> None:
    assert connection.ConnectionResource.get_schema().to_pb().version == 2
    upgraded = connection.ConnectionResource(InletProvider()).upgrade(None, 1, {"id": "i"})  # type: ignore[arg-type]
    assert upgraded == {"id": "i"} | dict.fromkeys(REGISTRY)


def test_a_registry_schema_version_written_as_a_string_is_refused_before_it_drifts() -> None:
    planned = {"name": "p", "target": {"type": "delta", "path": "t"}, "schedule": None, "state": "paused",
               "source": {"connection_id": "c", "topics": ["t"], "value_format": "avro",
                          "value_schema": {"subject": "t-value", "version": "3"}}}
    diags = Diagnostics()
    assert pipeline.request_body(diags, planned) is None
    assert 'source.value_schema.version must be a number or "latest"' in str(diags)
    for version in (3, "latest"):
        fine = Diagnostics()
        body = pipeline.request_body(fine, planned | {"source": planned["source"] | {
            "value_schema": {"version": version}, "key_format": "avro", "key_schema": {"version": version}}})
        assert not fine.has_errors() and body is not None and body["source"]["value_schema"] == {"version": version}
