"""The spark-submit entry point: one run of one pipeline, from a ``RunSpec`` file to a ``RunResult`` file.

    spark-submit spark_jobs/ingest.py --spec /path/spec.json --result /path/result.json

Exit status 0 when the run succeeded (including "already committed"), 1 when it failed; the result
file is written in both cases whenever the spec could be read. The run itself is ``job.execute``,
which the warm engine (``engine.py``) calls too.
"""

from __future__ import annotations

import argparse
import sys

from spark_jobs.job import OneShot, configure_logging, execute, parse_spec, write_result_file
from spark_jobs.spec import RunResult


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    configure_logging()
    with open(args.spec, "rb") as f:
        spec = parse_spec(f.read())
    result = spec if isinstance(spec, RunResult) else execute(spec, OneShot())
    write_result_file(args.result, result.to_json())
    return 0 if result.status == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
