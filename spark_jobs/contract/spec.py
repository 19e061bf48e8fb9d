"""A pipeline's data contract as its runs apply it (``RunSpec.contract``): its expectations
(``contract.expectations``), sensitive fields (``contract.sensitive``), evolution policy
(``formats.evolution``) and the tenant's field key. The API builds it from the pipeline's
``contract`` (``api/runs/job_spec.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _ContractModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)  # as the rest of the spec's


ExpectationAction = Literal["warn", "quarantine", "fail"]
Evolution = Literal["add", "widen", "fail"]


class ExpectationSpec(_ContractModel):
    """A rule on each decoded row (``contract.expectations``; ``spark_jobs.contract.expectations``)."""

    name: str
    predicate: str  # parsed by the API when the pipeline was written, again by the driver
    action: ExpectationAction = "warn"


class SensitiveFieldSpec(_ContractModel):
    """A field protected before anything is written (``contract.sensitive``; ``spark_jobs.contract.sensitive``)."""

    field: str  # a top-level column, or dotted into structs
    action: Literal["hash", "redact", "drop"]


class ContractSpec(_ContractModel):
    """The pipeline's data contract, as its runs apply it."""

    expectations: tuple[ExpectationSpec, ...] = ()
    sensitive: tuple[SensitiveFieldSpec, ...] = ()
    evolution: Evolution = "add"  # how the table's columns follow the source's (``formats.evolution``)
    # The tenant's field key (a secret: base64 of 64 bytes), with sensitive fields; and for a reprocess
    # of the quarantine, whose records an earlier contract may have sealed with it.
    field_key: str | None = None
