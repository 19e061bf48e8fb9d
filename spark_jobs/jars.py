"""The JVM jars Spark gets beside pyspark's own: Spark's Kafka source, spark-avro and delta-spark.

``make setup`` copies them with Maven from ``deploy/jars/pom.xml`` into ``.inlet/jars/`` of the
checkout and writes the POM's SHA-256 beside them; a cache whose stamp is not the POM's is stale
(the POM changed since) and counts as absent. Every Spark that Inlet starts (the warm engine, a
spark-submit per run, and through their driver a cluster's executors) gets the cached jars as
``spark.jars``, and Delta's SQL extension with them (a large keyed table's MERGE by delta-spark,
``delta_tables.spark_merge``). Without a cache (an installed package, an image built without Maven)
Spark starts without them: Inlet's own reader and writer need none, and the driver merges.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POM = ROOT / "deploy" / "jars" / "pom.xml"
CACHE = ROOT / ".inlet" / "jars"
STAMP = ".pom-sha256"

# What a session reading or writing Delta with delta-spark sets besides the jars.
DELTA_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


class JarsMissing(RuntimeError):
    """The jar cache is absent or stale: ``make setup`` fetches it."""


def cached_jars(cache: Path = CACHE, pom: Path = POM) -> list[Path]:
    """The cached jars, sorted; ``JarsMissing`` when the cache is absent or not the POM's."""
    stamp = cache / STAMP
    if not pom.exists() or not stamp.exists():
        raise JarsMissing(f"no Spark jars in {cache}: run `make setup` (it fetches them with Maven)")
    if stamp.read_text().strip() != hashlib.sha256(pom.read_bytes()).hexdigest():
        raise JarsMissing(f"the Spark jars in {cache} are not {pom.name}'s any more: run `make setup`")
    return sorted(cache.glob("*.jar"))


def spark_conf() -> dict[str, str]:
    """``spark.jars`` with the cached jars and Delta's SQL extension (a large keyed table's MERGE,
    ``delta_tables.spark_merge``), or nothing when there is no (current) cache."""
    try:
        jars = cached_jars()
    except JarsMissing:
        return {}
    return {"spark.jars": ",".join(str(jar) for jar in jars), **DELTA_SQL_CONF} if jars else {}
