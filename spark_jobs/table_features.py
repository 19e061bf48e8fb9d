"""What a Delta table asks of its writers, read before Inlet writes it: its protocol (reader and writer
versions, table features) and the properties and column metadata that switch a feature on, checked
against what each of Inlet's operations supports (``SUPPORT``). A table asking for more is refused
before anything is written (``table_unsupported``: the run fails for good, its offsets unmoved; a
maintenance step is reported failed), naming the feature and what to do.

Another engine (delta-spark, Databricks) may turn any feature on in a table Inlet writes. Inlet
writes with delta-rs 1.6, which cannot write some features at all, and with its own Parquet files,
which know nothing of column metadata: each answer below was measured with delta-spark as the other
writer (tests/spark_jobs/test_shared_tables.py; the table in docs/maintenance.md).

Where delta-rs cannot write a table and delta-spark can (``SPARK_WRITES``), a run's append or replay
is committed by delta-spark on the run's Spark instead (``writer_for``; ``delta_tables.spark_write``).

Deletion vectors are supported: appends and delta-rs's MERGE keep them as they are; a replay whose
files carry one is committed by delta-rs's predicate overwrite (``delta_tables.replace``), which
reads through the vectors and names them in its removes; compaction leaves such files alone; vacuum
keeps every deletion-vector file (``maintenance.upkeep``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from spark_jobs.errors import JobError

if TYPE_CHECKING:
    from deltalake import DeltaTable

Operation = Literal["append", "replace", "merge", "history_merge", "schema_change", "compact", "vacuum",
                    "checkpoint", "properties"]
OPERATIONS: tuple[Operation, ...] = ("append", "replace", "merge", "history_merge", "schema_change", "compact",
                                     "vacuum", "checkpoint", "properties")
OPERATION_NAMES: dict[Operation, str] = {
    "append": "a run's append", "replace": "a replace-mode replay", "merge": "a keyed table's MERGE",
    "history_merge": "an SCD type 2 table's MERGE", "schema_change": "adding the run's new columns",
    "compact": "compaction", "vacuum": "vacuum", "checkpoint": "a checkpoint", "properties": "setting the table's properties",
}

# Features a reader or writer version below 7 (3 for readers) implies (the Delta protocol's legacy versions).
_LEGACY_WRITER = {2: ("appendOnly", "invariants"), 3: ("checkConstraints",), 4: ("changeDataFeed", "generatedColumns"),
                  5: ("columnMapping",), 6: ("identityColumns",)}
_LEGACY_READER = {2: ("columnMapping",)}

_ALL: frozenset[Operation] = frozenset(OPERATIONS)
_NOTHING: frozenset[Operation] = frozenset()
_DELTA_SPARK = ("let delta-spark or Databricks write and maintain this table, or point the pipeline at a new path "
                "(or drop the feature: ALTER TABLE ... DROP FEATURE)")


@dataclass(frozen=True)
class Support:
    """Inlet's answer to one table feature: the operations that write such a table correctly, and for
    the others, why not and what to do."""

    allows: frozenset[Operation]
    why: str = ""


# Inlet's answer, feature by feature (docs/maintenance.md has the same table). A feature that is not
# here is unknown to Inlet and refused for every operation: a table Inlet does not understand is never written.
SUPPORT: dict[str, Support] = {
    # Enabled by a table property or column metadata: allowed here, refused by ``_in_use`` where switched on.
    "appendOnly": Support(_ALL),
    "invariants": Support(_ALL),
    "checkConstraints": Support(_ALL),
    "generatedColumns": Support(_ALL),
    "columnMapping": Support(_ALL),
    "identityColumns": Support(_ALL),
    "changeDataFeed": Support(_ALL),  # whole-file adds and removes are valid change data (the protocol infers it)
    "timestampNtz": Support(_ALL),
    "vacuumProtocolCheck": Support(_ALL),  # a vacuum checks the protocol first: this module
    # delta-rs 1.6 adds it itself (a property change on a writer version 7 table): harmless without a VARIANT column.
    "variantType": Support(_ALL),
    "variantType-preview": Support(_ALL),
    "deletionVectors": Support(_ALL - {"history_merge"},
                               "an SCD type 2 table's MERGE reads the table's versions with delta-rs's pyarrow scan, "
                               "which cannot apply deletion vectors; purge them (REORG TABLE ... APPLY (PURGE)) "
                               "and disable them (delta.enableDeletionVectors=false), or use an SCD type 1 table"),
    # What delta-rs 1.6 cannot write (it refuses the commit): refused before anything is written.
    **{feature: Support(_NOTHING, f"delta-rs, Inlet's writer, cannot write {what}; {_DELTA_SPARK}")
       for feature, what in {
           "domainMetadata": "domain metadata", "clustering": "liquid clustering", "rowTracking": "row tracking",
           "inCommitTimestamp": "in-commit timestamps", "typeWidening": "type widening",
           "typeWidening-preview": "type widening", "icebergCompatV1": "UniForm (icebergCompatV1)",
           "icebergCompatV2": "UniForm (icebergCompatV2)", "icebergWriterCompatV1": "UniForm (icebergWriterCompatV1)",
           "v2Checkpoint": "v2 checkpoints", "catalogManaged": "catalog-managed tables",
           "catalogOwned-preview": "catalog-owned tables", "allowColumnDefaults": "column defaults",
           "collations-preview": "collations", "variantShredding-preview": "shredded VARIANT columns",
       }.items()},
}


@dataclass(frozen=True)
class TableFeatures:
    """A table's protocol and what switches its features on, as one commit of it holds them."""

    reader_version: int
    writer_version: int
    reader_features: frozenset[str]
    writer_features: frozenset[str]  # explicit (writer version 7), or implied by the legacy versions
    properties: Mapping[str, str]
    column_metadata: Mapping[str, Mapping[str, object]]  # field path -> metadata

    @classmethod
    def of(cls, delta: DeltaTable) -> TableFeatures:
        protocol, metadata = delta.protocol(), delta.metadata()
        reader = set(protocol.reader_features or ())
        writer = set(protocol.writer_features or ())
        if protocol.min_writer_version < 7:
            writer |= {f for v, fs in _LEGACY_WRITER.items() if protocol.min_writer_version >= v for f in fs}
        if protocol.min_reader_version < 3:
            reader |= {f for v, fs in _LEGACY_READER.items() if protocol.min_reader_version >= v for f in fs}
        return cls(protocol.min_reader_version, protocol.min_writer_version, frozenset(reader), frozenset(writer),
                   dict(metadata.configuration), dict(_column_metadata(delta.schema().fields)))

    @property
    def features(self) -> frozenset[str]:
        return self.reader_features | self.writer_features

    def refusal(self, operation: Operation) -> str | None:
        """Why ``operation`` may not write this table, naming every feature in the way and what to do;
        None if it may."""
        reasons = []
        for feature in sorted(self.features):
            support = SUPPORT.get(feature)
            if support is None:
                reasons.append(f"the table uses the Delta feature `{feature}`, which Inlet does not know; "
                               f"{OPERATION_NAMES[operation]} could not write it correctly, so it is refused: {_DELTA_SPARK}")
            elif operation not in support.allows:
                reasons.append(f"the table uses the Delta feature `{feature}`: {support.why}")
        return "; and ".join(reasons) if reasons else _in_use(self, operation)

    def writer(self, operation: Operation, *, spark: bool) -> tuple[Writer | None, str | None]:
        """``writer_for``'s answer: who writes ``operation``, or None and why not."""
        why = self.refusal(operation)
        if why is None:
            return "delta-rs", None
        if spark and operation in SPARK_OPERATIONS and self.features <= SPARK_WRITES and not (
                operation == "replace" and props_true(self.properties, "delta.appendOnly")) and not _untried(self):
            return "delta-spark", None
        return None, why

    def allowed(self) -> dict[Operation, str | None]:
        """Each operation, with why it is refused (None: allowed)."""
        return {operation: self.refusal(operation) for operation in OPERATIONS}


_VARIANT = "inlet.variant"  # marks a VARIANT column among the columns' metadata (``_column_metadata``)
_WRITES_ROWS: frozenset[Operation] = frozenset({"append", "replace", "merge", "history_merge"})
# A column-mapped table's Parquet files name columns by their physical names; Inlet writes and reads its
# files by the logical ones, right only while the two are the same (a table that turned mapping on keeps
# its columns' names; a column added or renamed after that gets another).
_READS_FILES: frozenset[Operation] = frozenset({"append", "replace", "compact"})
# Inlet writes a VARIANT's two binaries as they came (``formats.variant``): appends and new columns only.
# Rewriting files (a replay's, compaction's) would read back files other engines wrote, whose VARIANT
# structs pyarrow reads in their own field order, and a MERGE of VARIANT values delta-rs does not do.
_VARIANT_REFUSED: frozenset[Operation] = frozenset({"replace", "compact", "merge", "history_merge"})


def _in_use(table: TableFeatures, operation: Operation) -> str | None:
    """A supported feature that is switched on in a way ``operation`` cannot honour."""
    props = table.properties
    if operation == "properties" and table.writer_version >= 7:
        return ("delta-rs 1.6 adds the `variantType` feature to a table with table features (writer version 7) "
                "whenever it sets a property, which readers without VARIANT support then refuse: Inlet leaves this "
                "table's properties alone; set the policy's with delta-spark (ALTER TABLE ... SET TBLPROPERTIES)")
    if props_true(props, "delta.appendOnly") and operation in {"replace", "merge", "history_merge"}:
        return ("the table is append-only (delta.appendOnly=true): "
                f"{OPERATION_NAMES[operation]} removes rows, which it forbids; use mode append without replays")
    constraints = sorted(k.removeprefix("delta.constraints.") for k in props if k.startswith("delta.constraints."))
    if constraints and operation in _WRITES_ROWS:
        return (f"the table has CHECK constraints ({', '.join(constraints)}), which Inlet's files are not checked "
                "against; drop them (ALTER TABLE ... DROP CONSTRAINT) or write to a new path")
    variant = sorted(path for path, meta in table.column_metadata.items() if meta.get(_VARIANT))
    if variant and operation in _VARIANT_REFUSED:
        return (f"the column {variant[0]} is a VARIANT, which Inlet appends (a json pipeline's VARIANT columns) but "
                f"does not rewrite or merge: {OPERATION_NAMES[operation]} is refused; {_DELTA_SPARK}")
    for what, key in (("an invariant", "delta.invariants"), ("a generation expression", "delta.generationExpression"),
                      ("an identity column's", "delta.identity.start"), ("a default value", "CURRENT_DEFAULT")):
        columns = sorted(path for path, meta in table.column_metadata.items() if key in meta)
        if columns and operation in _WRITES_ROWS:
            return (f"the column {columns[0]} has {what} ({key}) that Inlet does not compute or check; "
                    f"{OPERATION_NAMES[operation]} is refused: {_DELTA_SPARK}")
    mapping = props.get("delta.columnMapping.mode", "none").lower()
    if mapping != "none":
        if operation == "schema_change":
            return (f"the table maps its columns (delta.columnMapping.mode={mapping}); delta-rs cannot add columns to "
                    "such a table: add them with delta-spark (ALTER TABLE ... ADD COLUMNS), then the run goes on")
        renamed = sorted(path for path, meta in table.column_metadata.items()
                         if meta.get("delta.columnMapping.physicalName", path.rsplit(".", 1)[-1]) != path.rsplit(".", 1)[-1])
        if renamed and operation in _READS_FILES | _WRITES_ROWS:
            return (f"the table maps its columns (delta.columnMapping.mode={mapping}) and the column {renamed[0]} is "
                    "stored under another name, which Inlet's Parquet files do not follow: "
                    f"{OPERATION_NAMES[operation]} is refused; {_DELTA_SPARK}")
    return None


def _column_metadata(fields: Iterable[Any], prefix: str = "") -> Iterable[tuple[str, Mapping[str, object]]]:
    """Every field's metadata (delta-rs's ``Field``s) by its dotted path, nested struct fields too."""
    for field in fields:
        name = f"{prefix}{field.name}"
        yield name, {**(field.metadata or {}), **({_VARIANT: True} if _holds_variant(field.type) else {})}
        for inner in _structs_in(field.type):
            yield from _column_metadata(inner, f"{name}.")


def _holds_variant(kind: Any) -> bool:
    """Whether a column's type is a VARIANT, or an array or map of them."""
    if type(kind).__name__ == "VariantType":
        return True
    return any(_holds_variant(inner) for part in ("element_type", "key_type", "value_type")
               if (inner := getattr(kind, part, None)) is not None)


def _structs_in(kind: Any) -> Iterable[Iterable[Any]]:
    """The fields of every struct a column's type holds: itself, or inside its arrays and maps."""
    if getattr(kind, "fields", None):
        yield kind.fields
    for part in ("element_type", "key_type", "value_type"):
        if (inner := getattr(kind, part, None)) is not None:
            yield from _structs_in(inner)


# What delta-spark writes correctly where delta-rs cannot: a run's append or replay of such a table is
# committed by delta-spark on the run's Spark (``delta_tables.spark_write``), which assigns row ids, keeps
# domain metadata and in-commit timestamps, checks CHECK constraints and writes a column-mapped table's
# physical names (``_untried`` keeps out the column metadata no test writes through it). Not UniForm: its
# Iceberg metadata needs delta-iceberg, which the run's Spark does not load.
SPARK_WRITES: frozenset[str] = frozenset({
    "domainMetadata", "clustering", "rowTracking", "inCommitTimestamp", "typeWidening", "typeWidening-preview",
    "v2Checkpoint", "checkConstraints", "invariants", "generatedColumns", "identityColumns", "columnMapping",
    "deletionVectors", "appendOnly", "changeDataFeed", "timestampNtz", "vacuumProtocolCheck", "variantType",
    "variantType-preview",
})
# A run's commits (``delta_tables.spark_write``) and maintenance (``spark_maintenance``).
SPARK_OPERATIONS: frozenset[Operation] = frozenset({"append", "replace", "compact", "vacuum", "checkpoint", "properties"})

Writer = Literal["delta-rs", "delta-spark"]


def writer_for(delta: DeltaTable, operation: Operation, uri: str, *, spark: bool) -> Writer:
    """Who commits ``operation`` on ``delta``: delta-rs where it writes the table correctly, else
    delta-spark where ``spark`` (the run's Spark has delta-spark and reaches the table) and it writes
    every feature of the table; refused (``table_unsupported``, naming delta-rs's reason) otherwise."""
    writer, why = TableFeatures.of(delta).writer(operation, spark=spark)
    if writer is None:
        raise JobError("table_unsupported", f"{uri}: {why}")
    return writer


# Column metadata delta-spark would honour on a write (checks, computed values, VARIANT) that no test of
# Inlet's runs through it yet: such a table is refused rather than written on trust.
_UNTRIED = ("delta.invariants", "delta.generationExpression", "delta.identity.start", "CURRENT_DEFAULT")


def _untried(features: TableFeatures) -> bool:
    return any(meta.get(_VARIANT) or any(key in meta for key in _UNTRIED) for meta in features.column_metadata.values())


def props_true(properties: Mapping[str, str], key: str) -> bool:
    return properties.get(key, "false").lower() == "true"


def require(delta: DeltaTable, operation: Operation, uri: str) -> TableFeatures:
    """Refuse (``table_unsupported``) ``operation`` on ``delta`` if the table asks for what it cannot
    honour; the table's features otherwise."""
    features = TableFeatures.of(delta)
    why = features.refusal(operation)
    if why is not None:
        raise JobError("table_unsupported", f"{uri}: {why}")
    return features


def has_deletion_vectors(delta: DeltaTable) -> set[str]:
    """The paths (relative to the table root, as add actions name them) of the files that carry a
    deletion vector; empty when the table has none."""
    if "deletionVectors" not in TableFeatures.of(delta).features:
        return set()
    import pyarrow as pa

    root = delta.table_uri.rstrip("/") + "/"
    # A batch at a time: each row also holds its file's whole selection vector (a flag per row).
    batches = pa.RecordBatchReader.from_stream(delta.deletion_vectors())
    return {_relative(p, root) for batch in batches for p in batch.column("filepath").to_pylist()}


def _relative(path: str, root: str) -> str:
    from urllib.parse import unquote

    return unquote(path[len(root):]) if path.startswith(root) else unquote(path)
