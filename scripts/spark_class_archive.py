"""The training job of scripts/test.sh's class archive: a Spark session doing what the suite's jobs do
at their start (a shuffle, Python rows, a Parquet write), so that the classes they load are archived.
Run by spark-submit with ``-XX:ArchiveClassesAtExit``; it writes only under the folder it is given."""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

out = sys.argv[1]
spark = SparkSession.builder.getOrCreate()
counts = spark.range(1000).groupBy((F.col("id") % 3).alias("k")).count().collect()
assert sorted(row["count"] for row in counts) == [333, 333, 334], counts
spark.createDataFrame([(1, "a")], "a INT, b STRING").write.mode("overwrite").parquet(out)
spark.stop()
