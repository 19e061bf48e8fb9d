"""The portal's form models on their own: the API body each form becomes, the errors it raises named
as the API names fields (never after a member of a schema union), and where each error is shown."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

import pytest

from api.connections.schemas import ConnectionRead
from api.core.errors import Conflict, ValidationFailed
from api.pipelines.schemas import PipelineRead, PipelineSpec
from api.portal.forms import (
    ConnectionForm,
    DeleteForm,
    FormInvalid,
    PipelineFilters,
    PipelineForm,
    ReplayForm,
    RotationForm,
)
from api.portal.views import FormErrors

CONNECTION_ID = str(uuid.UUID(int=7))
E = TypeVar("E", bound=ValidationFailed)


def _refusal(build: Callable[[], object], kind: type[E]) -> E:
    with pytest.raises(kind) as caught:
        build()
    return caught.value


def test_a_pipeline_form_becomes_the_body_the_api_stores() -> None:
    form = PipelineForm.model_validate({
        "name": " orders ", "connection_id": CONNECTION_ID, "topics": "orders, refunds\nreturns",
        "value_format": "json", "schema": "id BIGINT", "starting_offsets": "latest", "max_offsets_per_run": "500",
        "target_path": "bronze/orders", "schedule_kind": "cron", "cron": "*/5 * * * *", "timezone": "",
        "interval_seconds": "60", "state": "paused",
    })
    assert form.spec().model_dump(mode="json", by_alias=True) == {
        "name": "orders",
        "source": {"connection_id": CONNECTION_ID, "topics": ["orders", "refunds", "returns"],
                   "value_format": "json", "schema": "id BIGINT", "starting_offsets": "latest",
                   "max_offsets_per_run": 500},
        "target": {"type": "delta", "path": "bronze/orders"},
        "schedule": {"cron": "*/5 * * * *", "timezone": "UTC"},
        "state": "paused",
        "contract": None,  # no expectation typed: none sent
    }


def test_a_continuous_schedule_from_the_form_writes_what_differs_from_the_defaults() -> None:
    def schedule(**inputs: str) -> object:
        form = PipelineForm.model_validate({"name": "s", "connection_id": CONNECTION_ID, "topics": "orders",
                                            "target_path": "bronze/s", "schedule_kind": "continuous", **inputs})
        return form.spec().model_dump(mode="json", by_alias=True)["schedule"]

    assert schedule() == {"continuous": True}
    assert schedule(idle_wait_ms="250", continuous_max_offsets="100000") == {"continuous": True, "idle_wait_ms": 250}
    refused = _refusal(PipelineForm.model_validate({
        "name": "s", "connection_id": CONNECTION_ID, "topics": "orders", "target_path": "bronze/s",
        "schedule_kind": "continuous", "idle_wait_ms": "5"}).spec, ValidationFailed)
    assert [e["field"] for e in refused.errors or []] == ["schedule.idle_wait_ms"]


def test_a_pipeline_forms_errors_name_api_fields_and_sit_beside_their_inputs() -> None:
    form = PipelineForm(name="bad name", connection_id=CONNECTION_ID, topics="orders", target_path="",
                        schedule_kind="cron", cron="every minute", timezone="Mars/Base", interval_seconds="5")
    refused = _refusal(form.spec, ValidationFailed)
    assert sorted(refused.errors or [], key=lambda e: e["field"]) == [
        {"field": "name", "message": "String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]*$'",
         "type": "string_pattern_mismatch"},
        {"field": "schedule.cron", "message": "Value error, not a 5-field cron expression (minute hour "
         "day-of-month month day-of-week)", "type": "value_error"},
        {"field": "schedule.timezone", "message": "Value error, not an IANA timezone name such as Europe/Paris or UTC",
         "type": "value_error"},
        {"field": "target.path", "message": "String should have at least 1 character", "type": "string_too_short"},
    ]
    # The interval's input is not the chosen schedule's: nothing is said about it.
    assert form.errors(refused) == FormErrors(fields={
        "target_path": ["String should have at least 1 character"],
        "cron": ["not a 5-field cron expression (minute hour day-of-month month day-of-week)"],
        "timezone": ["not an IANA timezone name such as Europe/Paris or UTC"],
        "name": ["String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]*$'"],
    })


def test_a_services_own_errors_on_a_form_are_shown_beside_the_input_or_above_the_form() -> None:
    form = PipelineForm()
    missing = ValidationFailed.field("source.connection_id", f"Connection {CONNECTION_ID} does not exist")
    assert form.errors(missing) == FormErrors(fields={"connection_id": [f"Connection {CONNECTION_ID} does not exist"]})
    taken = Conflict("A pipeline named 'orders' already exists")
    assert form.errors(taken) == FormErrors(fields={"name": ["A pipeline named 'orders' already exists"]})
    nowhere = ValidationFailed("The storage root is not configured")
    assert form.errors(nowhere) == FormErrors(general=["The storage root is not configured"])


def test_a_connection_forms_credentials_errors_name_the_credentials_fields() -> None:
    form = ConnectionForm(name="secure", bootstrap_servers="broker-1:9093", security_protocol="SASL_SSL",
                          sasl_mechanism="SCRAM-SHA-512", username="ingest", password="")
    refused = _refusal(form.spec, ValidationFailed)
    assert refused.errors == [{"field": "credentials.password",
                               "message": "Value should have at least 1 item after validation, not 0",
                               "type": "too_short"}]
    assert form.errors(refused) == FormErrors(fields={
        "password": ["Value should have at least 1 item after validation, not 0"]})
    assert "password" not in ConnectionForm(password="s3cret").values()


def test_a_connection_form_sends_only_the_parts_its_protocol_uses() -> None:
    # The page hides the SASL and TLS inputs of a PLAINTEXT connection; what they still hold is not sent.
    plain = ConnectionForm(name="plain", bootstrap_servers="broker-1:9092", security_protocol="PLAINTEXT",
                           sasl_mechanism="PLAIN", username="ingest", password="pw", ca_pem="CA")
    assert plain.spec().model_dump(mode="json", include={"sasl_mechanism", "credentials", "ssl"}) == {
        "sasl_mechanism": None, "credentials": None, "ssl": None}
    no_mechanism = ConnectionForm(name="sasl", bootstrap_servers="broker-1:9092", security_protocol="SASL_SSL",
                                  username="ingest", password="pw")
    assert no_mechanism.errors(_refusal(no_mechanism.spec, ValidationFailed)) == FormErrors(fields={
        "sasl_mechanism": ["security_protocol SASL_SSL needs a SASL mechanism"]})


def test_a_connection_forms_schema_registry_becomes_the_apis_and_its_secrets_are_not_shown_back() -> None:
    base = {"name": "sr", "bootstrap_servers": "broker-1:9092", "security_protocol": "PLAINTEXT",
            "registry_url": " https://sr.example.com ", "registry_username": "ignored", "registry_token": " t0ken "}
    bearer = ConnectionForm(**base, registry_auth="bearer", registry_ca_pem="CA")
    assert bearer.spec().model_dump(mode="json", include={"schema_registry"}) == {"schema_registry": {
        "url": "https://sr.example.com", "credentials": {"token": "**********"}, "ca_pem": "CA",
        "endpoint_identification": "https"}}
    assert bearer.spec().schema_registry.credentials.token.get_secret_value() == "t0ken"  # type: ignore[union-attr]
    basic = ConnectionForm(**base, registry_auth="basic", registry_password="pw")
    assert basic.spec().model_dump(mode="json", include={"schema_registry"})["schema_registry"]["credentials"] == {
        "username": "ignored", "password": "**********"}
    shown = basic.values()
    assert "registry_password" not in shown and "registry_token" not in shown and shown["registry_username"] == "ignored"
    assert ConnectionForm(name="n", bootstrap_servers="b:9092", registry_auth="none").spec().schema_registry is None


def test_a_connection_forms_registry_errors_sit_beside_the_registry_inputs() -> None:
    form = ConnectionForm(name="sr", bootstrap_servers="broker-1:9092", registry_url="ftp://sr.example.com",
                          registry_auth="basic", registry_username="inlet")
    refused = _refusal(form.spec, ValidationFailed)
    assert form.errors(refused) == FormErrors(fields={
        "registry_password": ["Value should have at least 1 item after validation, not 0"],
        "registry_url": ["the URL must start with http:// or https://"]})
    plain_ca = ConnectionForm(name="sr", bootstrap_servers="broker-1:9092", registry_url="http://sr.example.com",
                              registry_ca_pem="CA")
    assert plain_ca.errors(_refusal(plain_ca.spec, ValidationFailed)) == FormErrors(fields={
        "registry_ca_pem": ["ca_pem is only used with an https:// url"]})
    forged = ConnectionForm(name="sr", bootstrap_servers="broker-1:9092", registry_url="https://sr.example.com",
                            registry_auth="kerberos")
    assert forged.errors(_refusal(forged.spec, ValidationFailed)) == FormErrors(fields={
        "registry_auth": ["Choose none, basic (username and password) or bearer (a token)"]})
    no_url = ConnectionForm(name="sr", bootstrap_servers="broker-1:9092", registry_auth="bearer", registry_token="t")
    assert no_url.errors(_refusal(no_url.spec, ValidationFailed)) == FormErrors(fields={
        "registry_url": ["String should have at least 1 character"]})


def test_a_pipeline_form_reads_registry_formats_with_a_subject_and_a_version() -> None:
    base = {"name": "orders", "connection_id": CONNECTION_ID, "topics": "orders", "target_path": "bronze/orders",
            "schema": "ignored BIGINT"}
    pinned = PipelineForm.model_validate({**base, "value_format": "avro", "value_subject": " orders-v2 ",
                                          "value_version": "3"})
    assert pinned.spec().model_dump(mode="json", by_alias=True)["source"] == {
        "connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "avro", "starting_offsets": "earliest",
        "value_schema": {"subject": "orders-v2", "version": 3}}
    latest = PipelineForm.model_validate({**base, "value_format": "protobuf", "value_version": "Latest"})
    assert latest.spec().model_dump(mode="json", by_alias=True)["source"]["value_schema"] == {"version": "latest"}
    default = PipelineForm.model_validate({**base, "value_format": "json_schema"})
    assert "value_schema" not in default.spec().model_dump(mode="json", by_alias=True)["source"]
    # Not a registry format: the subject's inputs (hidden in the page) are not sent.
    string = PipelineForm.model_validate({**base, "value_format": "string", "value_subject": "s", "value_version": "x"})
    assert "value_schema" not in string.spec().model_dump(mode="json", by_alias=True)["source"]

    bad = PipelineForm.model_validate({**base, "topics": "a, b", "value_format": "avro", "value_version": "v3"})
    refused = _refusal(bad.spec, ValidationFailed)
    assert bad.errors(refused) == FormErrors(fields={
        "value_version": ["Enter a version number (1, 2, …) or latest"],
        "value_subject": [("value_schema.subject: name the subject of the values; the default (<topic>-value) needs "
                           "a pipeline of exactly one topic")]})


def test_the_replay_forms_own_rules_name_its_inputs() -> None:
    refused = _refusal(ReplayForm(tp=["orders|0", "orders|x", "|1"], mode="").to_patch, FormInvalid)
    assert refused.status == 422
    assert refused.fields == FormErrors(fields={"mode": ["Choose how to move the offsets"]})
    nothing = _refusal(ReplayForm(mode="shift", shift="1.5").to_patch, FormInvalid)
    assert nothing.fields == FormErrors(fields={
        "partitions": ["Choose at least one partition"],
        "shift": ["Enter a whole number of offsets, negative to go back"]})
    offsets = _refusal(ReplayForm.model_validate({"tp": ["orders|0", "orders|1"], "mode": "offset",
                                                  "offset:orders|0": "12", "offset:orders|1": " "}).to_patch,
                       FormInvalid)
    assert offsets.fields == FormErrors(fields={"offset:orders|1": ["Enter the offset to move to"]})


def test_the_replay_form_becomes_a_dry_run_and_its_confirmation_the_change_applied() -> None:
    form = ReplayForm(tp=["refunds|1", "orders|1", "orders|1"], mode="timestamp", timestamp="2024-01-02T03:04",
                      replay_mode="replace", clamp="on")
    patch = form.to_patch()
    assert patch.model_dump(mode="json", exclude_none=True) == {
        "to_timestamp": "2024-01-02T03:04:00Z", "topics": ["orders", "refunds"], "partitions": [1],
        "dry_run": True, "clamp": True, "replay_mode": "replace"}
    confirmed = ReplayForm(action="apply", patch=ReplayForm.confirmation(patch), etag="W/\"abc\"")
    assert confirmed.if_match == "W/\"abc\"" and form.if_match is None
    assert confirmed.to_patch().model_dump(mode="json", exclude_none=True) == {
        "to_timestamp": "2024-01-02T03:04:00Z", "topics": ["orders", "refunds"], "partitions": [1],
        "dry_run": False, "clamp": True, "replay_mode": "replace"}
    unreadable = _refusal(ReplayForm(action="apply", patch="[1, 2]").to_patch, FormInvalid)
    assert unreadable.fields == FormErrors(general=["The change to apply could not be read; preview it again"])


def test_the_pipeline_filters_ignore_what_they_do_not_know() -> None:
    odd = PipelineFilters(name="  p-1 ", state="deleted", page="0")
    assert (odd.number, odd.shown()) == (1, {"name": "p-1", "state": ""})
    assert PipelineFilters(state="paused", page="3").shown() == {"name": "", "state": "paused"}
    assert PipelineFilters(page="3").number == 3


def _read(spec: PipelineSpec) -> PipelineRead:
    stored = spec.model_dump(mode="json", by_alias=True)
    now = datetime(2024, 5, 14, tzinfo=UTC)
    return PipelineRead.model_validate({**stored, "id": str(uuid.UUID(int=9)), "created_at": now, "updated_at": now,
                                        "status": {"next_run_at": None, "target_uri": None}})


@pytest.mark.parametrize("body", [
    {"name": "kafka", "source": {"connection_id": CONNECTION_ID, "topic_pattern": r"orders\..*", "value_format": "avro",
                                 "value_schema": {"subject": "orders-value", "version": "latest"}, "key_format": "string",
                                 "starting_offsets": {"orders.eu": {"0": 5}}, "include_headers": False,
                                 "on_data_loss": "skip", "commit_to_group": "g"},
     "target": {"type": "kafka", "connection_id": CONNECTION_ID, "topic": "copy",
                "create_topic": {"partitions": 3, "replication_factor": -1, "config": {}}},
     "schedule": {"interval_seconds": 60}, "state": "paused"},
    {"name": "delta", "source": {"connection_id": CONNECTION_ID, "topics": ["a", "b"], "starting_timestamp":
                                 "2024-05-14T13:05:00Z", "starting_timestamp_strategy": "error", "max_offsets_per_run": 5},
     "target": {"type": "delta", "path": "bronze/x", "partition_by": []}, "schedule": {"cron": "0 6 * * *"},
     "state": "active"},
    # A contract: thresholds the form cannot show, an action written at its default, a predicate written
    # with a line break and spaces, all kept as they were.
    {"name": "checked", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                   "schema": "id BIGINT, amount DOUBLE"},
     "target": {"type": "delta", "path": "bronze/checked"}, "state": "active",
     "contract": {"expectations": [
         {"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine", "alert_over_rows": 100,
          "alert_over_ratio": 0.01},
         {"name": "has_id", "predicate": " id IS NOT NULL\n  AND id > 0 ", "action": "warn"},
         {"name": "small", "predicate": "amount < 1000000"}]}},
    {"name": "no-rules", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                    "schema": "id BIGINT"},
     "target": {"type": "delta", "path": "bronze/no-rules"}, "state": "active", "contract": {"expectations": []}},
    # Sensitive fields beside rules, and a contract that wrote an empty list of them.
    {"name": "protected", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                     "schema": "id BIGINT, email STRING, customer STRUCT<ssn: STRING>, notes STRING"},
     "target": {"type": "delta", "path": "bronze/protected"}, "state": "active",
     "contract": {"sensitive": [{"field": "email", "action": "hash"}, {"field": "customer.ssn", "action": "redact"},
                                {"field": "notes", "action": "drop"}],
                  "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}]}},
    {"name": "none-sensitive", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                          "schema": "id BIGINT"},
     "target": {"type": "delta", "path": "bronze/none-sensitive"}, "state": "active", "contract": {"sensitive": []}},
    # A schema evolution policy beside rules, and one written at its default (as Terraform writes it).
    {"name": "widening", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                    "schema": "id INT, amount FLOAT"},
     "target": {"type": "delta", "path": "bronze/widening"}, "state": "active",
     "contract": {"evolution": "widen", "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}]}},
    {"name": "add-written", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "avro"},
     "target": {"type": "delta", "path": "bronze/add-written"}, "state": "active", "contract": {"evolution": "add"}},
    # A keyed table: the form has no inputs for its settings, and keeps them.
    {"name": "keyed", "source": {"connection_id": CONNECTION_ID, "topics": ["shop.public.customers"],
                                 "value_format": "json", "schema": "id BIGINT, name STRING"},
     "target": {"type": "delta", "path": "silver/customers", "mode": "upsert", "key": ["id"],
                "sequence_by": "source.lsn", "changes": "debezium"}, "state": "paused"},
])
def test_a_pipeline_shown_in_its_form_and_saved_unchanged_is_the_same_pipeline(body: dict[str, object]) -> None:
    # The edit form of a saved pipeline becomes exactly what was stored, defaults written or not.
    spec = PipelineSpec.model_validate(body)
    stored = spec.model_dump(mode="json", by_alias=True)
    form = PipelineForm.of(_read(spec), etag='"e"')
    assert form.etag == '"e"'
    assert form.spec(stored=stored).model_dump(mode="json", by_alias=True) == stored


JSON_ORDERS = {"name": "orders", "connection_id": CONNECTION_ID, "topics": "orders", "value_format": "json",
               "schema": "id BIGINT, amount DOUBLE, label STRING", "target_path": "bronze/orders"}


def test_a_pipeline_forms_expectations_become_its_contract_one_rule_a_line() -> None:
    form = PipelineForm.model_validate({**JSON_ORDERS, "expectations": (
        "positive_amount quarantine: amount > 0\r\n\r\n# the ids\r\n  has_id:id IS NOT NULL  \r\n"
        "labelled fail: coalesce(label, '') LIKE 'a:%'")})
    assert form.spec().model_dump(mode="json", by_alias=True)["contract"] == {"expectations": [
        {"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine"},
        {"name": "has_id", "predicate": "id IS NOT NULL"},  # no action: warn, the API's default, not written
        {"name": "labelled", "predicate": "coalesce(label, '') LIKE 'a:%'", "action": "fail"}]}
    # An empty input on a new pipeline (or one that had no contract) sends no contract at all.
    assert PipelineForm.model_validate({**JSON_ORDERS, "expectations": " \n# none yet\n"}).spec().contract is None
    assert "contract" not in PipelineForm.model_validate(JSON_ORDERS).spec().model_fields_set
    # The input is hidden for a Kafka target, and its rules are not sent.
    kafka = PipelineForm.model_validate({**JSON_ORDERS, "target_type": "kafka", "target_connection_id": CONNECTION_ID,
                                         "target_topic": "copy", "expectations": "positive: amount > 0"})
    assert kafka.spec().contract is None


def test_a_malformed_expectation_line_and_the_apis_refusal_of_a_rule_name_its_line() -> None:
    form = PipelineForm.model_validate({**JSON_ORDERS, "expectations": (
        "amount > 0\n\npositive_amount: amount > 0\nthree words here: amount > 0\nlate explode: amount > 0\n"
        "empty:\n2nd: amount > 0\nunfinished: amount >")})
    refused = _refusal(form.spec, ValidationFailed)
    how = "write name action: predicate, such as positive_amount quarantine: amount > 0 (no action: warn)"
    assert refused.errors == [
        {"field": "contract.expectations", "message": f"Line 1: {how}", "type": "value_error"},
        {"field": "contract.expectations", "message": f"Line 4: {how}", "type": "value_error"},
        {"field": "contract.expectations", "message": f"Line 6: {how}", "type": "value_error"},
        {"field": "contract.expectations[1].action", "message": "Input should be 'warn', 'quarantine' or 'fail'",
         "type": "literal_error"},
        {"field": "contract.expectations[2].name",
         "message": "String should match pattern '^[A-Za-z_][A-Za-z0-9_]{0,63}$'", "type": "string_pattern_mismatch"},
        {"field": "contract.expectations[3].predicate", "message": "Value error, the predicate ends too soon",
         "type": "value_error"},
    ]
    # Every rule's error sits beside the one input, saying the line of the rule the API named by index.
    assert form.errors(refused) == FormErrors(fields={"expectations": [
        f"Line 1: {how}", f"Line 4: {how}", f"Line 6: {how}", "Line 5: Input should be 'warn', 'quarantine' or 'fail'",
        "Line 7: String should match pattern '^[A-Za-z_][A-Za-z0-9_]{0,63}$'", "Line 8: the predicate ends too soon"]})

    # The pipeline's own rules on its contract (checked by the API with the whole pipeline) sit there too.
    unknown = PipelineForm.model_validate({**JSON_ORDERS, "expectations": "# first\nok: amount > 0\nbad: total > 0"})
    assert unknown.errors(_refusal(unknown.spec, ValidationFailed)) == FormErrors(fields={"expectations": [
        "Line 3: not columns of the table (or dropped as sensitive): total"]})
    strings = PipelineForm.model_validate({**JSON_ORDERS, "value_format": "string", "expectations": "ok: amount > 0"})
    assert strings.errors(_refusal(strings.spec, ValidationFailed)) == FormErrors(fields={"expectations": [
        ("a contract applies to a decoded row's columns: value_format json or a registry format (avro, protobuf, "
         "json_schema)")]})
    twice = PipelineForm.model_validate({**JSON_ORDERS, "expectations": "ok: amount > 0\nOK: id > 0"})
    assert twice.errors(_refusal(twice.spec, ValidationFailed)) == FormErrors(fields={"expectations": [
        "expectation names must not repeat (in any case)"]})


def test_an_edit_of_the_expectations_keeps_what_the_input_cannot_show_for_the_rules_whose_name_stays() -> None:
    spec = PipelineSpec.model_validate({
        "name": "orders", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                     "schema": "id BIGINT, amount DOUBLE"},
        "target": {"type": "delta", "path": "bronze/orders"},
        "contract": {"expectations": [
            {"name": "positive_amount", "predicate": "amount > 0", "action": "quarantine", "alert_over_rows": 100,
             "alert_over_ratio": 0.01},
            {"name": "has_id", "predicate": "id IS NOT\nNULL", "action": "warn", "alert_over_rows": 5},
            {"name": "old", "predicate": "id < 100", "alert_over_ratio": 0.5}]}})
    stored = spec.model_dump(mode="json", by_alias=True)
    form = PipelineForm.of(_read(spec), etag='"e"')
    assert form.expectations == ("positive_amount quarantine: amount > 0\nhas_id warn: id IS NOT NULL\n"
                                 "old warn: id < 100")

    def contract(text: str) -> object:
        edited = form.model_copy(update={"expectations": text})
        return edited.spec(stored=stored).model_dump(mode="json", by_alias=True)["contract"]

    assert contract("positive_amount: amount >= 1\nhas_id warn: id IS NOT NULL\nrenamed: id < 100") == {"expectations": [
        # The action left out is warn, written as it was; the thresholds stay with the name.
        {"name": "positive_amount", "predicate": "amount >= 1", "action": "warn", "alert_over_rows": 100,
         "alert_over_ratio": 0.01},
        {"name": "has_id", "predicate": "id IS NOT\nNULL", "action": "warn", "alert_over_rows": 5},
        {"name": "renamed", "predicate": "id < 100"}]}  # a new name is a new rule: nothing to keep
    assert contract("has_id fail: id IS NOT NULL AND id > 0") == {"expectations": [
        {"name": "has_id", "predicate": "id IS NOT NULL AND id > 0", "action": "fail", "alert_over_rows": 5}]}
    # Emptied: the contract the pipeline had written stays written, with no rule.
    assert contract("") == {"expectations": []}


def test_a_pipeline_forms_sensitive_fields_become_its_contract_one_a_line() -> None:
    form = PipelineForm.model_validate({**JSON_ORDERS, "schema": "email STRING, customer STRUCT<ssn: STRING>, notes STRING",
                                        "sensitive": "  email   hash \r\n\r\n# the customer's\r\n"
                                                     "customer.ssn redact\r\nnotes drop\r\n"})
    assert form.spec().model_dump(mode="json", by_alias=True)["contract"] == {"sensitive": [
        {"field": "email", "action": "hash"}, {"field": "customer.ssn", "action": "redact"},
        {"field": "notes", "action": "drop"}]}  # no expectation typed: none written
    both = PipelineForm.model_validate({**JSON_ORDERS, "expectations": "has_id: id IS NOT NULL", "sensitive": "label hash"})
    assert both.spec().model_dump(mode="json", by_alias=True)["contract"] == {
        "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}],
        "sensitive": [{"field": "label", "action": "hash"}]}
    # Empty (or comments only) on a new pipeline: no contract at all; hidden for a Kafka target: not sent.
    assert PipelineForm.model_validate({**JSON_ORDERS, "sensitive": " \n# none yet\n"}).spec().contract is None
    kafka = PipelineForm.model_validate({**JSON_ORDERS, "target_type": "kafka", "target_connection_id": CONNECTION_ID,
                                         "target_topic": "copy", "sensitive": "label hash"})
    assert kafka.spec().contract is None


def test_a_malformed_sensitive_line_and_the_apis_refusal_of_a_field_name_its_line() -> None:
    form = PipelineForm.model_validate({**JSON_ORDERS, "expectations": "ok: amount > 0\nlate explode: amount > 0",
                                        "sensitive": ("email\n# mask it\nlabel mask\nthree words here\n"
                                                      "1st hash\ncustomer.ssn drop\nid hash")})
    refused = _refusal(form.spec, ValidationFailed)
    how = "write field action, such as customer.email hash (hash, redact or drop)"
    assert refused.errors == [
        {"field": "contract.sensitive", "message": f"Line 1: {how}", "type": "value_error"},
        {"field": "contract.sensitive", "message": f"Line 4: {how}", "type": "value_error"},
        {"field": "contract.expectations[1].action", "message": "Input should be 'warn', 'quarantine' or 'fail'",
         "type": "literal_error"},
        {"field": "contract.sensitive[0].action", "message": "Input should be 'hash', 'redact' or 'drop'",
         "type": "literal_error"},
        {"field": "contract.sensitive[1].field",
         "message": "String should match pattern '^[A-Za-z_][A-Za-z0-9_]{0,127}(\\.[A-Za-z_][A-Za-z0-9_]{0,127}){0,15}$'",
         "type": "string_pattern_mismatch"},
        {"field": "contract.sensitive[2].field",
         "message": "Value error, drop takes a top-level column; hash or redact a field of a struct",
         "type": "value_error"},
    ]
    # Each input's entries are numbered by their own lines: the same index is another line in each.
    assert form.errors(refused) == FormErrors(fields={
        "sensitive": [f"Line 1: {how}", f"Line 4: {how}", "Line 3: Input should be 'hash', 'redact' or 'drop'",
                      "Line 5: String should match pattern '^[A-Za-z_][A-Za-z0-9_]{0,127}(\\.[A-Za-z_][A-Za-z0-9_]{0,127}){0,15}$'",
                      "Line 6: drop takes a top-level column; hash or redact a field of a struct"],
        "expectations": ["Line 2: Input should be 'warn', 'quarantine' or 'fail'"]})

    # The API's rules with the whole pipeline: a field by its line, the list as a whole without one.
    unknown = PipelineForm.model_validate({**JSON_ORDERS, "sensitive": "label hash\n\nmail hash"})
    assert unknown.errors(_refusal(unknown.spec, ValidationFailed)) == FormErrors(fields={"sensitive": [
        "Line 3: not a column of the table (a field of the value, or key)"]})
    twice = PipelineForm.model_validate({**JSON_ORDERS, "sensitive": "label hash\nLABEL drop"})
    assert twice.errors(_refusal(twice.spec, ValidationFailed)) == FormErrors(fields={"sensitive": [
        "a field is named once (in any case)"]})
    strings = PipelineForm.model_validate({**JSON_ORDERS, "value_format": "string", "sensitive": "label hash"})
    assert strings.errors(_refusal(strings.spec, ValidationFailed)) == FormErrors(fields={"sensitive": [
        ("a contract applies to a decoded row's columns: value_format json or a registry format (avro, protobuf, "
         "json_schema)")]})


def test_an_edit_of_the_sensitive_fields_keeps_the_rest_of_the_contract_as_written() -> None:
    spec = PipelineSpec.model_validate({
        "name": "orders", "source": {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
                                     "schema": "id BIGINT, amount DOUBLE, email STRING, notes STRING"},
        "target": {"type": "delta", "path": "bronze/orders"},
        "contract": {"expectations": [{"name": "positive_amount", "predicate": "amount > 0", "alert_over_rows": 100}],
                     "sensitive": [{"field": "email", "action": "hash"}, {"field": "notes", "action": "drop"}]}})
    stored = spec.model_dump(mode="json", by_alias=True)
    form = PipelineForm.of(_read(spec), etag='"e"')
    assert (form.expectations, form.sensitive) == ("positive_amount warn: amount > 0", "email hash\nnotes drop")

    def contract(text: str) -> object:
        edited = form.model_copy(update={"sensitive": text})
        return edited.spec(stored=stored).model_dump(mode="json", by_alias=True)["contract"]

    rules = [{"name": "positive_amount", "predicate": "amount > 0", "alert_over_rows": 100}]
    assert contract("EMAIL redact\namount hash") == {"expectations": rules, "sensitive": [
        {"field": "EMAIL", "action": "redact"}, {"field": "amount", "action": "hash"}]}
    # Emptied: the list the pipeline had written stays written, empty; the rules are untouched.
    assert contract("") == {"expectations": rules, "sensitive": []}


def test_a_pipeline_forms_schema_evolution_policy_becomes_its_contracts_evolution() -> None:
    def contract(**inputs: str) -> object:
        return PipelineForm.model_validate({**JSON_ORDERS, **inputs}).spec().model_dump(
            mode="json", by_alias=True)["contract"]

    assert PipelineForm.initial().evolution == "add"
    # add, the API's default (or no choice sent), on a new pipeline: no contract at all.
    assert contract(evolution="add") is None and contract(evolution="") is None and contract() is None
    assert contract(evolution="fail") == {"evolution": "fail"}
    assert contract(evolution=" widen ", expectations="has_id: id IS NOT NULL", sensitive="label hash") == {
        "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}],
        "sensitive": [{"field": "label", "action": "hash"}], "evolution": "widen"}
    assert contract(evolution="add", expectations="has_id: id IS NOT NULL") == {
        "expectations": [{"name": "has_id", "predicate": "id IS NOT NULL"}]}
    # Hidden for a Kafka target: not sent.
    kafka = PipelineForm.model_validate({**JSON_ORDERS, "target_type": "kafka", "target_connection_id": CONNECTION_ID,
                                         "target_topic": "copy", "evolution": "fail"})
    assert kafka.spec().contract is None

    # Refused beside the select: what is not a policy, widen on a keyed table, a policy on undecoded values.
    def refused(**inputs: str) -> FormErrors:
        form = PipelineForm.model_validate({**JSON_ORDERS, **inputs})
        return form.errors(_refusal(form.spec, ValidationFailed))

    assert refused(evolution="merge") == FormErrors(fields={"evolution": ["Input should be 'add', 'widen' or 'fail'"]})
    assert refused(evolution="widen", delta_mode="upsert", key_fields="id") == FormErrors(fields={"evolution": [
        ("widen applies to append tables: a keyed table's MERGE matches on columns whose type a widening would "
         "change (use add or fail)")]})
    assert refused(evolution="fail", value_format="string") == FormErrors(fields={"evolution": [
        ("a contract applies to a decoded row's columns: value_format json or a registry format (avro, protobuf, "
         "json_schema)")]})
    # A keyed table takes fail (and add).
    assert contract(evolution="fail", delta_mode="upsert", key_fields="id") == {"evolution": "fail"}


def test_an_edit_of_the_evolution_policy_keeps_the_rest_of_the_contract_as_written() -> None:
    rules = [{"name": "positive_amount", "predicate": "amount > 0", "alert_over_rows": 100}]
    fields = [{"field": "email", "action": "hash"}]
    source = {"connection_id": CONNECTION_ID, "topics": ["orders"], "value_format": "json",
              "schema": "id BIGINT, amount DOUBLE, email STRING"}

    def edit(contract: dict[str, object] | None, evolution: str) -> tuple[str, object]:
        spec = PipelineSpec.model_validate({"name": "orders", "source": source,
                                            "target": {"type": "delta", "path": "bronze/orders"}, "contract": contract})
        form = PipelineForm.of(_read(spec), etag='"e"')
        edited = form.model_copy(update={"evolution": evolution})
        stored = spec.model_dump(mode="json", by_alias=True)
        return form.evolution, edited.spec(stored=stored).model_dump(mode="json", by_alias=True)["contract"]

    written = {"expectations": rules, "sensitive": fields, "evolution": "fail"}
    assert edit(written, "fail") == ("fail", written)
    assert edit(written, "widen") == ("fail", {**written, "evolution": "widen"})
    # Back to add: the policy the pipeline had written stays written, at add.
    assert edit(written, "add") == ("fail", {**written, "evolution": "add"})
    # A contract written without a policy shows add, and keeps none while add stays chosen.
    assert edit({"expectations": rules, "sensitive": fields}, "add") == ("add", {"expectations": rules, "sensitive": fields})
    assert edit({"expectations": rules}, "widen") == ("add", {"expectations": rules, "evolution": "widen"})
    # No contract: add shown, none sent while it stays add.
    assert edit(None, "add") == ("add", None)
    assert edit(None, "fail") == ("add", {"evolution": "fail"})


def test_the_replay_form_goes_back_a_time_or_to_the_starting_offsets() -> None:
    ago = ReplayForm(tp=["orders|0"], mode="duration", duration=" p1d ").to_patch()
    assert ago is not None and ago.model_dump(mode="json", exclude_none=True) == {
        "by_duration": "P1D", "topics": ["orders"], "partitions": [0], "dry_run": True, "clamp": False,
        "replay_mode": "append"}
    starting = ReplayForm(mode="starting")  # every partition: the choice of partitions does not matter
    assert starting.to_patch() is None and starting.dry_run
    assert ReplayForm.confirmation(None) == "null"
    applied = ReplayForm(action="apply", patch="null", etag='"o"')
    assert applied.to_patch() is None and not applied.dry_run and applied.if_match == '"o"'
    replace = _refusal(ReplayForm(mode="starting", replay_mode="replace").to_patch, FormInvalid)
    assert replace.fields == FormErrors(fields={
        "replay_mode": ["Back to the starting offsets, records read again are appended: choose append"]})


def test_a_rotation_is_a_merge_patch_of_the_new_credentials_alone() -> None:
    now = datetime(2024, 5, 14, tzinfo=UTC)
    conn = ConnectionRead(id=uuid.UUID(int=1), name="c", bootstrap_servers="b:9092", security_protocol="SASL_SSL",
                          sasl_mechanism="OAUTHBEARER", ssl=None, options={}, has_credentials=True,
                          credentials_version=1, schema_registry={"url": "https://sr", "ca_pem": None,
                                                                  "endpoint_identification": "https", "auth": "bearer"},
                          created_at=now, updated_at=now)
    oauth = RotationForm(oauth_client_id="inlet", oauth_client_secret="s", oauth_token_endpoint_url="https://idp/t")
    assert oauth.to_patch(conn) == {"credentials": {"client_id": "inlet", "client_secret": "s",
                                                    "token_endpoint_url": "https://idp/t", "scope": None}}
    token = RotationForm(registry_token="t2", username="ignored: not this connection's kind")
    assert token.to_patch(conn) == {"schema_registry": {"credentials": {"token": "t2"}}}
    refused = RotationForm(oauth_client_id="inlet")
    assert refused.errors(_refusal(lambda: refused.to_patch(conn), ValidationFailed)) == FormErrors(fields={
        "oauth_client_secret": ["Value should have at least 1 item after validation, not 0"],
        "oauth_token_endpoint_url": ["String should have at least 1 character"]})
    assert "oauth_client_secret" not in refused.values() and "registry_token" not in token.values()
    assert DeleteForm(confirm_name=" c ").check("c") is None
