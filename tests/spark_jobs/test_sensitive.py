"""Sensitive fields on Arrow (``spark_jobs.contract.sensitive``): a hash is the HMAC-SHA-256 of the
value keyed with the tenant's key (checked against Python's ``hmac``), the same value hashing the same
under one key and differently under another; a redaction is the mask; nulls stay null, into structs
too; the quarantine's raw values are sealed and open again; a field that is not a STRING is refused."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import pyarrow as pa
import pytest

from spark_jobs.contract.sensitive import MASK, SEALED, FieldKey, Protection, new_field_key, open_sealed
from spark_jobs.errors import JobError


@dataclass(frozen=True)
class _Field:
    field: str
    action: str


ROWS = pa.table({
    "email": ["a@x.org", "b@y.org", None, "a@x.org"],
    "customer": pa.array([{"ssn": "123", "tier": "gold"}, None, {"ssn": None, "tier": "x"}, {"ssn": "456", "tier": "y"}]),
    "amount": [1, 2, 3, 4],
})


def _protection(key: str, *fields: tuple[str, str]) -> Protection:
    protection = Protection.of([_Field(f, a) for f, a in fields], key)  # type: ignore[arg-type]
    assert protection is not None
    return protection


def test_hash_is_the_tenants_hmac_and_redact_the_mask_nulls_kept() -> None:
    key = new_field_key()
    out = _protection(key, ("email", "hash"), ("customer.ssn", "redact")).protect(ROWS.slice(0))
    secret = FieldKey.of(key).hmac
    assert out["email"].to_pylist() == [hmac.new(secret, b"a@x.org", hashlib.sha256).hexdigest(),
                                        hmac.new(secret, b"b@y.org", hashlib.sha256).hexdigest(), None,
                                        hmac.new(secret, b"a@x.org", hashlib.sha256).hexdigest()]
    assert out["customer"].to_pylist() == [{"ssn": MASK, "tier": "gold"}, None, {"ssn": None, "tier": "x"},
                                           {"ssn": MASK, "tier": "y"}]
    assert out["amount"] == ROWS["amount"] and out.schema == ROWS.schema


def test_a_slice_of_a_batch_is_protected_at_its_own_rows() -> None:
    key = new_field_key()
    whole = _protection(key, ("customer.ssn", "hash")).protect(ROWS)
    sliced = _protection(key, ("customer.ssn", "hash")).protect(ROWS.slice(2))
    assert sliced.to_pylist() == whole.slice(2).to_pylist()


def test_one_key_hashes_alike_and_another_key_differently() -> None:
    mine, theirs = new_field_key(), new_field_key()
    first = _protection(mine, ("email", "hash")).protect(ROWS)["email"]
    again = _protection(mine, ("email", "hash")).protect(ROWS)["email"]
    other = _protection(theirs, ("email", "hash")).protect(ROWS)["email"]
    assert first == again
    assert all(a != b for a, b in zip(first.to_pylist(), other.to_pylist(), strict=True) if a is not None)


def test_the_quarantine_is_sealed_and_opens_with_the_key_only() -> None:
    key = new_field_key()
    quarantine = pa.table({"key": pa.array([b"k1", None], pa.binary()), "value": pa.array([b'{"email": "a@x.org"}', b"x"])})
    sealed = _protection(key, ("email", "hash")).seal(quarantine)
    values = sealed["value"].to_pylist()
    assert all(v.startswith(SEALED) and b"a@x.org" not in v for v in values)
    assert sealed["key"][1].as_py() is None
    assert [open_sealed(FieldKey.of(key), v) for v in values] == [b'{"email": "a@x.org"}', b"x"]
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag
        open_sealed(FieldKey.of(new_field_key()), values[0])


@pytest.mark.parametrize(("field", "says"), [("amount", "is int64: hash applies to STRING"),
                                             ("customer.nope", "not a column"), ("nope", "not a column")])
def test_a_field_that_is_no_string_of_the_rows_is_refused(field: str, says: str) -> None:
    with pytest.raises(JobError) as refused:
        _protection(new_field_key(), (field, "hash")).check(ROWS.schema)
    assert refused.value.kind == "invalid_spec" and says in refused.value.message


def test_drop_plans_the_table_without_the_column() -> None:
    protection = _protection(new_field_key(), ("amount", "drop"))
    assert protection.without_dropped(ROWS.schema).names == ["email", "customer"]
    protection.check(ROWS.schema)  # a dropped field needs no type


def test_the_field_key_is_one_of_the_specs_secrets() -> None:
    from spark_jobs.spec import RunSpec, redact
    from tests.spark_jobs.helpers import make_spec

    key = new_field_key()
    spec = make_spec("127.0.0.1:9092", {"t": {"0": (0, 1)}}, {"type": "delta", "uri": "/tmp/t", "quarantine_uri": "/tmp/q"},
                     value_format="json", schema="email STRING")
    spec = RunSpec.model_validate({**spec.model_dump(by_alias=True),
                                   "contract": {"sensitive": [{"field": "email", "action": "hash"}], "field_key": key}})
    assert key in spec.secret_values()
    assert key not in redact(f"spec: {spec.to_json()}", spec.secret_values())


def test_a_whole_value_kept_as_a_variant_is_refused_beside_sensitive_fields() -> None:
    from spark_jobs.formats.variant_type import ARROW

    with pytest.raises(JobError, match="value VARIANT") as refused:
        _protection(new_field_key(), ("email", "hash")).check(ROWS.schema.append(pa.field("value", ARROW)))

    assert refused.value.kind == "invalid_spec"
    _protection(new_field_key(), ("email", "hash")).check(ROWS.schema.append(pa.field("attrs", ARROW)))  # a field's is fine
