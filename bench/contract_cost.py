"""Benchmark: what a data contract costs a run, as a ratio to the same run without it, in the same run.

Produces ~1M JSON orders (``bench/json_decode.py``'s, ~140 B) into a sandbox topic of 64 partitions,
then, on one warm engine, writes all of them into Delta as json values once to warm it up and six times
more, alternating without a contract and with one (so that drift in the machine's load falls on both
alike), and compares the medians. The
contract: 3 expectations (warn: every order passes, so all rows are written and the three predicates
are evaluated on every row) and 2 hashed fields, ``customer`` (5,000 distinct values) and ``status``
(3). Issue 55's target: the contract costs at most 15 % of the records per second (ratio >= 0.85).

    .venv/bin/python bench/contract_cost.py [--messages 1000000] [--partitions 64] [--master local[2]]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from json_decode import orders

from sandbox.cluster import SandboxCluster
from spark_jobs.contract.sensitive import new_field_key
from spark_jobs.spec import RunSpec
from worker.launch import SparkSubmitSettings, WarmLauncher

from kafka_bench import ORDER_DDL, produce, spec_for, timed

CONTRACT = {
    "expectations": [
        {"name": "amount_not_negative", "predicate": "amount >= 0"},
        {"name": "qty_in_range", "predicate": "qty BETWEEN 0 AND 100"},
        {"name": "known_status", "predicate": "status IN ('NEW', 'PAID', 'SHIPPED')"},
    ],
    "sensitive": [{"field": "customer", "action": "hash"}, {"field": "status", "action": "hash"}],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    with SandboxCluster(brokers=1) as cluster, tempfile.TemporaryDirectory() as tmp:
        bootstrap, topic = cluster.bootstrap_servers, "bench"
        cluster.create_topic(topic, args.partitions)
        ranges = produce(bootstrap, topic, orders(args.messages, 0), args.partitions)
        total = sum(end - start for start, end in ranges.values())
        print(f"produced {total:,} JSON orders over {args.partitions} partitions")
        launcher = WarmLauncher(SparkSubmitSettings(master=args.master))
        key = new_field_key()
        try:
            def run(contract: bool) -> tuple[float, float]:
                spec = spec_for(bootstrap, topic, ranges, f"{tmp}/{uuid.uuid4().hex[:6]}", quarantine=True,
                                value_format="json", schema=ORDER_DDL)
                if contract:
                    spec = RunSpec.model_validate({**spec.model_dump(by_alias=True),
                                                   "contract": {**CONTRACT, "field_key": key}})
                result, wall_s = timed(launcher, spec, Path(tmp, "w"))
                assert result.rows_written == total and result.rows_violating == 0, result
                return total / wall_s, total / result.timings.process_s

            run(False)  # warms the engine's Python workers up: not counted
            rates: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for contract in (False, True, True, False, False, True):
                began = time.monotonic()
                rates[contract].append(run(contract))
                end_to_end, in_job = rates[contract][-1]
                print(f"{'with' if contract else 'without'} the contract: {end_to_end:,.0f} records/s end to end, "
                      f"{in_job:,.0f} in the job ({time.monotonic() - began:.1f}s)")
        finally:
            launcher.close()
    plain = [statistics.median(r[i] for r in rates[False]) for i in (0, 1)]
    contracted = [statistics.median(r[i] for r in rates[True]) for i in (0, 1)]
    print(f"contract / none (3 expectations, 2 hashed fields): end to end {contracted[0] / plain[0]:.2f}, "
          f"in the job {contracted[1] / plain[1]:.2f} (target >= 0.85)")


if __name__ == "__main__":
    main()
