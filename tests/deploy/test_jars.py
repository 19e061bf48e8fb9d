"""The JVM jars ``make setup`` fetches (deploy/jars/pom.xml, spark_jobs/jars.py) match the Python packages,
add no class that pyspark already holds, and reach every Spark that Inlet starts."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from spark_jobs import jars
from worker.launch.submit import SparkSubmitSettings, spark_command

M = "{http://maven.apache.org/POM/4.0.0}"
# Every Spark module jar carries this stub; Java 9+ jars their own module descriptor.
SHARED_BY_DESIGN = {"org/apache/spark/unused/UnusedStubClass.class", "META-INF/versions/9/module-info.class",
                    "module-info.class"}


def _coordinates() -> dict[str, str]:
    """``groupId:artifactId`` -> version of the POM's dependencies, properties resolved."""
    pom = ET.parse(jars.POM).getroot()
    properties = {p.tag.removeprefix(M): p.text or "" for p in pom.find(f"{M}properties") or []}
    found = {}
    for dep in pom.findall(f"{M}dependencies/{M}dependency"):
        version = dep.findtext(f"{M}version") or ""
        for name, value in properties.items():
            version = version.replace(f"${{{name}}}", value)
        found[f"{dep.findtext(f'{M}groupId')}:{dep.findtext(f'{M}artifactId')}"] = version
    return found


def test_the_pom_names_the_versions_of_the_python_packages() -> None:
    from delta.pip_utils import configure_spark_with_delta_pip

    # A builder of its own: ``SparkSession.builder`` is one shared object, which a later session would start from.
    delta = configure_spark_with_delta_pip(SparkSession.Builder())._options["spark.jars.packages"]
    group_artifact, version = delta.rsplit(":", 1)
    assert _coordinates() == {
        "org.apache.spark:spark-sql-kafka-0-10_2.13": pyspark.__version__,
        "org.apache.spark:spark-avro_2.13": pyspark.__version__,
        group_artifact: version,
    }


def test_the_cache_is_the_poms_and_adds_no_class_pyspark_holds() -> None:
    cached = jars.cached_jars()
    names = {jar.name for jar in cached}
    assert {"spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-avro_2.13-4.2.0.jar", "kafka-clients-3.9.2.jar",
            "commons-pool2-2.13.1.jar", "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
            "delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar"} <= names
    spark_classes: dict[str, str] = {}
    for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar"):
        spark_classes.update(dict.fromkeys(_classes(jar), jar.name))
    twice = sorted(f"{jar.name}: {name} (also in {spark_classes[name]})" for jar in cached for name in _classes(jar)
                   if name in spark_classes and name not in SHARED_BY_DESIGN)
    assert twice == []


def _classes(jar: Path) -> list[str]:
    with zipfile.ZipFile(jar) as archive:
        return [name for name in archive.namelist() if name.endswith(".class")]


def test_every_spark_inlet_starts_gets_the_jars(tmp_path: Path) -> None:
    command = spark_command(SparkSubmitSettings(master="local[2]"), "inlet-test", tmp_path / "code.zip", "engine.py")
    given = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf" and command[i + 1].startswith("spark.jars=")]
    assert given == [f"spark.jars={','.join(str(jar) for jar in jars.cached_jars())}"]
    assert len(jars.cached_jars()) >= 7 and all(jar.is_file() for jar in jars.cached_jars())


def test_a_stale_or_absent_cache_counts_as_none(tmp_path: Path) -> None:
    pom, cache = tmp_path / "pom.xml", tmp_path / "jars"
    pom.write_text("<project/>")
    with pytest.raises(jars.JarsMissing, match="run `make setup`"):
        jars.cached_jars(cache, pom)
    cache.mkdir()
    (cache / "a.jar").write_bytes(b"")
    (cache / jars.STAMP).write_text(hashlib.sha256(b"<project/>").hexdigest() + "\n")
    assert jars.cached_jars(cache, pom) == [cache / "a.jar"]
    pom.write_text("<project><!-- changed --></project>")
    with pytest.raises(jars.JarsMissing, match="not pom.xml's any more"):
        jars.cached_jars(cache, pom)
