"""What the maintenance worker and a compaction job on the Spark cluster say to each other, without
Spark (tests/spark_jobs/test_compaction_on_spark.py runs the jobs): which compactions go to the
cluster, the job's file, and how a job that ended without its result is settled from the table."""

from __future__ import annotations

from pathlib import Path

from spark_jobs.maintenance import CompactionResult, MaintenanceSteps, Offload, TablePolicy, compact_table, maintain
from spark_jobs.maintenance.health import live_files
from spark_jobs.maintenance.offload import CompactionJob, result_from_json, result_to_json
from spark_jobs.storage import Store
from tests.spark_jobs.test_compaction_on_spark import COMPACT_ONLY, POLICY, fill, held_rows


def test_the_route_is_taken_by_the_bytes_to_compact(tmp_path: Path) -> None:
    store = Store({})
    fill(store, str(tmp_path / "t"))
    asked: list[str] = []

    def on_spark(store: Store, uri: str, policy: TablePolicy, notes: dict[str, str]) -> CompactionResult:
        asked.append(uri)
        return CompactionResult("nothing")

    report = maintain(store, str(tmp_path / "t"), POLICY, COMPACT_ONLY, offload=Offload(1 << 30, on_spark))

    assert report.compaction is not None and report.compaction.outcome == "done" and asked == []  # in the worker
    bytes_to_compact = sum(f.size for f in live_files(store.delta_table(str(tmp_path / "t"))))
    fill(store, str(tmp_path / "t"))  # as many small files again
    again = maintain(store, str(tmp_path / "t"), POLICY, COMPACT_ONLY, offload=Offload(bytes_to_compact, on_spark))
    assert again.compaction == CompactionResult("nothing") and asked == [str(tmp_path / "t")]


def test_the_job_file_carries_the_table_its_store_and_policy_and_the_result_comes_back_whole() -> None:
    job = CompactionJob("s3://b/t", Store({"AWS_SECRET_ACCESS_KEY": "s3cr3t-4f1e", "AWS_REGION": "eu-west-1"}),
                        TablePolicy(target_file_bytes=1 << 27, small_file_bytes=1 << 25, z_order_by=("customer", "day")),
                        {"inlet.pipeline": "p1"}, since=41)

    assert CompactionJob.from_json(job.to_json()) == job
    assert job.secret_values() == ["s3cr3t-4f1e"]  # the credential, as a run's are found: not the region
    result = CompactionResult("done", files_removed=12, files_added=2, bytes_removed=9000, bytes_added=3000, version=7,
                              seconds=1.5)
    assert result_from_json(result_to_json(result)) == result


def _job(store: Store, uri: str) -> CompactionJob:
    """A job as the worker sends it: the table's version then."""
    return CompactionJob(uri, store, POLICY, since=store.delta_table(uri).version())


def _stray(job: CompactionJob, writer_of: Path) -> Path:
    """A file named for ``job`` that no commit added: a retried task's first attempt, say."""
    stray = writer_of / f"compacted-{job.token}-first-attempt.parquet"
    stray.write_bytes(b"PAR1")
    return stray


def test_a_lost_job_whose_commit_landed_is_done_with_its_commits_counts_and_only_its_strays_go(tmp_path: Path) -> None:
    store, uri = Store({}), str(tmp_path / "t")
    held = fill(store, uri)
    job = _job(store, uri)
    committed = compact_table(store, uri, POLICY, {}, token=job.token)  # the job's commit; then the job died
    stray = _stray(job, tmp_path / "t" / "day=2026-11-29")

    settled = job.settle(None, "the compaction job exited -9 without a result")

    assert settled == CompactionResult("done", files_removed=committed.files_removed, files_added=2,
                                       bytes_removed=committed.bytes_removed, bytes_added=committed.bytes_added,
                                       version=committed.version)
    assert not stray.exists() and len(list(tmp_path.rglob(f"compacted-{job.token}-*"))) == 2
    assert held_rows(store, uri) == held


def test_a_job_that_committed_keeps_its_files_and_its_own_result(tmp_path: Path) -> None:
    store, uri = Store({}), str(tmp_path / "t")
    fill(store, uri)
    job = _job(store, uri)
    result = compact_table(store, uri, POLICY, {}, token=job.token)
    stray = _stray(job, tmp_path / "t" / "day=2026-11-28")

    assert job.settle(result, "unused") == result
    assert not stray.exists() and {f.path.rsplit("/", 1)[-1] for f in live_files(store.delta_table(uri))} == {
        p.name for p in tmp_path.rglob(f"compacted-{job.token}-*")}
    # A job that says it committed, whose commit is not where it is looked for: nothing is deleted.
    lost = CompactionJob(uri, store, POLICY, token=job.token, since=store.delta_table(uri).version())
    stray = _stray(job, tmp_path / "t" / "day=2026-11-28")
    assert lost.settle(result, "unused") == result and stray.exists()


def test_a_lost_job_that_did_not_commit_fails_and_its_files_are_deleted(tmp_path: Path) -> None:
    store, uri = Store({}), str(tmp_path / "t")
    held = fill(store, uri)
    job = _job(store, uri)

    def dies_before_committing(writer, plan):  # its tasks wrote their files, then the driver died
        writer(plan.bins[0])
        raise SystemExit(137)

    try:
        compact_table(store, uri, POLICY, {}, rewrite=dies_before_committing, token=job.token)
    except SystemExit:
        pass
    assert len(list(tmp_path.rglob(f"compacted-{job.token}-*"))) == 1

    settled = job.settle(None, "the compaction job exited 137 without a result")

    assert settled == CompactionResult("failed", error="the compaction job exited 137 without a result")
    assert not list(tmp_path.rglob("compacted-*")) and held_rows(store, uri) == held


def test_a_job_that_could_not_start_is_a_failed_compaction_and_the_other_steps_still_run(tmp_path: Path) -> None:
    store, uri = Store({}), str(tmp_path / "t")
    fill(store, uri)

    def no_jvm(store: Store, uri: str, policy: TablePolicy, notes: dict[str, str]) -> CompactionResult:
        raise FileNotFoundError(2, "No such file or directory", "/opt/spark/bin/spark-submit")

    report = maintain(store, uri, POLICY, MaintenanceSteps(vacuum=False), offload=Offload(0, no_jvm))

    assert report.compaction is not None and report.compaction.outcome == "failed"
    assert "spark-submit" in (report.compaction.error or "")
    assert report.checkpoint is not None and report.checkpoint.outcome == "done"
