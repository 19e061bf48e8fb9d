"""The Arrow form of a VARIANT: a struct of its ``metadata`` and ``value`` binaries, the metadata field
tagged as pyspark tags a VARIANT's (``pyspark.sql.pandas.types.is_variant``), in delta-rs's field order.
No Spark here: the job's public face (``contract.sensitive``) and ``delta_tables`` ask it too."""

from __future__ import annotations

import pyarrow as pa

ARROW = pa.struct([pa.field("metadata", pa.binary(), nullable=False, metadata={b"variant": b"true"}),
                   pa.field("value", pa.binary(), nullable=False)])


def is_variant(arrow_type: pa.DataType) -> bool:
    """Whether ``arrow_type`` is a VARIANT's struct, by pyspark's mark."""
    if not pa.types.is_struct(arrow_type):
        return False
    names = {f.name: f for f in arrow_type}
    marked = names.get("metadata")
    return marked is not None and "value" in names and (marked.metadata or {}).get(b"variant") == b"true"
