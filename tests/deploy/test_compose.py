"""docker-compose.yml and the Dockerfile stay consistent with the code and with each other.

No Docker engine runs here; these checks catch the drift that would only show at ``docker compose up``:
settings that do not exist, a Spark cluster that lacks Inlet's Python, executors that cannot reach
the driver or the storage it commits, paths the test suite does not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import ValidationError
from pydantic_settings import SettingsError

from api.core.config import Settings
from cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
INLET_SERVICES = ("api", "worker", "webhook-worker", "maintenance-worker", "scheduler")
SPARK_SERVICES = ("spark-master", "spark-worker")
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The JVM connectors' settings: gone with the one Python data path (no jars, no --packages).
JVM_PATH_SETTINGS = ("INLET_SPARK_READER", "INLET_DELTA_WRITER", "INLET_SPARK_PACKAGES", "INLET_SPARK_JARS")


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose["services"]


@pytest.fixture(scope="module")
def dockerfile() -> tuple[str, dict[str, str]]:
    """The Dockerfile's ``FROM python:X.Y…`` version and its ENV variables."""
    text = (ROOT / "Dockerfile").read_text()
    instructions = re.sub(r"\\\n\s*", " ", text).splitlines()
    base = next((line.split()[1] for line in instructions if line.startswith("FROM ")), "")
    match = re.fullmatch(r"python:(\d+\.\d+)(?:[.\-].*)?", base)
    assert match, f"the Dockerfile builds FROM {base!r}, not an official python:X.Y image"
    env: dict[str, str] = {}
    for line in instructions:
        if line.startswith("ENV "):
            env.update(item.partition("=")[::2] for item in shlex.split(line[4:]) if "=" in item)
    return match.group(1), env


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _depends_on(service: dict) -> list[str]:
    deps = service.get("depends_on") or []
    return list(deps) if isinstance(deps, (list, dict)) else []


def _command(service: dict) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def _flag(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command[:-1] else None


def _subcommands() -> set[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name for action in actions for name in action.choices}


def _settings_of(name: str, service: dict, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings a container of ``service`` starts with: its INLET_* variables and nothing else."""
    for key in [k for k in os.environ if k.startswith("INLET_")]:
        monkeypatch.delenv(key)
    for key, value in _env(service).items():
        if key.startswith("INLET_"):
            monkeypatch.setenv(key, value)
    try:
        return Settings()
    except (ValidationError, SettingsError) as exc:
        pytest.fail(f"{name} would not start, its INLET_* environment is not valid Settings: {exc}")


def _storage_options(env: dict[str, str]) -> dict[str, str]:
    """What the worker hands the job: INLET_STORAGE_OPTIONS over the standard AWS_* variables."""
    given = json.loads(env.get("INLET_STORAGE_OPTIONS", "{}"))
    assert isinstance(given, dict), f"INLET_STORAGE_OPTIONS is {given!r}, not a JSON object"
    return {k: v for k, v in env.items() if k.startswith("AWS_")} | given


def test_every_service_has_an_image_or_build_and_valid_dependencies(services) -> None:
    expected = {"kafka", "vault", "postgres", "redis", "minio", *SPARK_SERVICES, *INLET_SERVICES}
    assert sorted(expected - set(services)) == [], "services missing from docker-compose.yml"
    for name, service in services.items():
        assert service.get("image") or service.get("build"), f"{name} has neither image nor build"
        for dependency in _depends_on(service):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
    for name in INLET_SERVICES:
        assert services[name].get("build") == ".", f"{name} does not build Inlet's image from this repository"


def test_published_ports_are_well_formed_and_unique(services) -> None:
    published = []
    for name, service in services.items():
        for port in service.get("ports", []):
            host, _, container = str(port).rpartition(":")
            assert host.isdigit() and container.isdigit(), f"{name}: bad port mapping {port}"
            published.append(int(host))
    assert sorted({p for p in published if published.count(p) > 1}) == [], "host ports published twice"
    assert "8000:8000" in services["api"]["ports"], "the API is not published on port 8000"


def test_every_inlet_env_name_is_a_setting(services) -> None:
    used = {key for service in services.values() for key in _env(service) if key.startswith("INLET_")}
    fields = {f"INLET_{name.upper()}" for name in Settings.model_fields}
    assert used, "no INLET_* settings in docker-compose.yml"
    assert sorted(used - fields) == [], "INLET_* names used in docker-compose.yml that Settings does not define"


@pytest.mark.parametrize("name", INLET_SERVICES)
def test_each_inlet_service_starts_with_valid_settings(services, name, monkeypatch) -> None:
    settings = _settings_of(name, services[name], monkeypatch)
    env = _env(services[name])
    # JSON settings parse into objects, not strings the code would trip on later.
    if "INLET_STORAGE_OPTIONS" in env:
        assert settings.storage_options == json.loads(env["INLET_STORAGE_OPTIONS"]), (
            f"{name}: INLET_STORAGE_OPTIONS does not parse as a JSON object of strings"
        )
    if "INLET_SPARK_CONF" in env:
        assert settings.spark_conf == json.loads(env["INLET_SPARK_CONF"]), (
            f"{name}: INLET_SPARK_CONF does not parse as a JSON object of strings"
        )
    # A container's working directory (/app) belongs to root: its data must go to the volume.
    mounts = [str(volume).split(":")[1] for volume in services[name].get("volumes", [])]
    assert any(settings.data_dir == Path(mount) or Path(mount) in settings.data_dir.parents for mount in mounts), (
        f"{name}: INLET_DATA_DIR {settings.data_dir} is on no mounted volume ({mounts})"
    )


def test_no_jvm_connector_settings(services) -> None:
    found = sorted(f"{name}: {key}" for name, service in services.items() for key in _env(service)
                   if key in JVM_PATH_SETTINGS)
    assert found == [], "docker-compose.yml still configures Spark's JVM Kafka/Delta connectors"


def test_inlet_services_run_existing_subcommands(services) -> None:
    known = _subcommands()
    used = {
        service["command"][1]
        for service in services.values()
        if isinstance(service.get("command"), list) and service["command"][:1] == ["inlet"]
    }
    assert {"api", "worker", "webhook-worker", "maintenance-worker", "scheduler"} <= used, (
        "api, worker, webhook-worker, maintenance-worker or scheduler is not started by docker-compose.yml")
    assert sorted(used - known) == [], "inlet subcommands used in docker-compose.yml that cli.main does not define"


@pytest.mark.parametrize("name", SPARK_SERVICES)
def test_spark_cluster_runs_inlets_own_image(services, name) -> None:
    service, worker = services[name], services["worker"]
    assert service.get("build") == worker["build"] and service.get("image") == worker["image"], (
        f"{name} runs {service.get('image') or service.get('build')!r}, not Inlet's image "
        f"({worker['image']!r}): its executors would lack pyarrow, confluent-kafka and deltalake"
    )
    command = _command(service)
    assert command and Path(command[0]).name == "spark-class", (
        f"{name} is not started with pyspark's spark-class: {command}"
    )


def test_spark_worker_joins_the_master_that_inlet_submits_to(services) -> None:
    master_url = _env(services["worker"]).get("INLET_SPARK_MASTER", "")
    url = urlsplit(master_url)
    assert url.scheme == "spark" and url.hostname, f"INLET_SPARK_MASTER is {master_url!r}, not a spark:// URL"
    assert url.hostname in services, f"INLET_SPARK_MASTER names {url.hostname!r}, not a service of docker-compose.yml"

    master = _command(services[url.hostname])
    assert MASTER_CLASS in master, f"{url.hostname} does not run {MASTER_CLASS}: {master}"
    assert _flag(master, "--host") in (None, url.hostname), f"the master binds {_flag(master, '--host')}, not {url.hostname}"
    assert int(_flag(master, "--port") or 7077) == (url.port or 7077), "the master listens on another port than INLET_SPARK_MASTER's"

    worker = _command(services["spark-worker"])
    assert WORKER_CLASS in worker, f"spark-worker does not run {WORKER_CLASS}: {worker}"
    assert worker[-1] == master_url, f"spark-worker joins {worker[-1]!r}, the worker submits to {master_url!r}"
    assert url.hostname in _depends_on(services["spark-worker"]), "spark-worker does not wait for the master"


def test_spark_python_is_the_images_interpreter(services, dockerfile) -> None:
    version, env = dockerfile
    interpreter = "/usr/local/bin/python"  # where the official python images install it
    assert _env(services["worker"]).get("INLET_SPARK_PYTHON") == interpreter, (
        f"INLET_SPARK_PYTHON is not {interpreter}, the interpreter of Inlet's image (python:{version})"
    )
    assert env.get("PYSPARK_PYTHON") == interpreter, (
        f"the Dockerfile's PYSPARK_PYTHON is {env.get('PYSPARK_PYTHON')!r}, INLET_SPARK_PYTHON is {interpreter}"
    )
    spark_home = f"/usr/local/lib/python{version}/site-packages/pyspark"
    assert env.get("SPARK_HOME") == spark_home, (
        f"the Dockerfile's SPARK_HOME is {env.get('SPARK_HOME')!r}; pip installs pyspark at {spark_home}"
    )


def test_executors_can_reach_the_driver(services) -> None:
    conf = json.loads(_env(services["worker"]).get("INLET_SPARK_CONF", "{}"))
    host = conf.get("spark.driver.host")
    assert host == "worker", (
        f"spark.driver.host is {host!r}: executors in spark-worker connect back to the driver in `worker`"
    )
    assert conf.get("spark.driver.bindAddress") == "0.0.0.0", (
        "spark.driver.bindAddress is not 0.0.0.0: the driver would bind only the address its name resolves to"
    )


def test_the_paths_selected_are_the_ones_the_suite_runs(services) -> None:
    env = _env(services["worker"])
    assert env.get("INLET_SPARK_MASTER", "").startswith("spark://"), "docker-compose.yml does not use a spark:// master"
    root = env.get("INLET_STORAGE_ROOT", "")
    assert urlsplit(root).scheme == "s3", f"INLET_STORAGE_ROOT is {root!r}: the suite's cluster tests run on s3://"


def test_driver_and_executors_reach_the_same_storage(services) -> None:
    env = _env(services["worker"])
    root = env.get("INLET_STORAGE_ROOT", "")
    if urlsplit(root).scheme == "s3":
        endpoint = _storage_options(env).get("AWS_ENDPOINT_URL", "")
        host = urlsplit(endpoint).hostname
        assert host in services, f"AWS_ENDPOINT_URL {endpoint!r} names no service of docker-compose.yml"
    else:
        def volume_of(name: str) -> set[str]:
            mounts = (str(v).split(":") for v in services[name].get("volumes", []))
            return {source for source, target, *_ in mounts if root == target or root.startswith(target.rstrip("/") + "/")}

        shared = volume_of("worker") & volume_of("spark-worker")
        assert shared, f"INLET_STORAGE_ROOT {root!r} is on no volume mounted in both worker and spark-worker"


def test_the_bucket_exists_before_inlet_starts_and_the_credentials_open_it(services) -> None:
    env = _env(services["worker"])
    root = urlsplit(env.get("INLET_STORAGE_ROOT", ""))
    assert root.scheme == "s3" and root.hostname, f"INLET_STORAGE_ROOT {root.geturl()!r} names no S3 bucket"
    bucket = root.hostname
    options = _storage_options(env)
    store = urlsplit(options.get("AWS_ENDPOINT_URL", "")).hostname
    assert store in services, f"AWS_ENDPOINT_URL names {store!r}, no service of docker-compose.yml"
    assert options.get("AWS_ALLOW_HTTP") == "true" or options["AWS_ENDPOINT_URL"].startswith("https://"), (
        "delta-rs refuses an http:// endpoint without AWS_ALLOW_HTTP=true"
    )
    server = _env(services[store])
    assert (server.get("MINIO_ROOT_USER"), server.get("MINIO_ROOT_PASSWORD")) == (
        options.get("AWS_ACCESS_KEY_ID"), options.get("AWS_SECRET_ACCESS_KEY")
    ), f"Inlet's AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not the credentials {store} starts with"

    creators = [name for name, service in services.items()
                if "mb" in _command(service) and any(arg.endswith(f"/{bucket}") for arg in _command(service))]
    assert creators, f"no service creates the bucket {bucket!r} that INLET_STORAGE_ROOT names"
    for name in INLET_SERVICES:
        condition = (services[name].get("depends_on") or {}).get(creators[0], {}).get("condition")
        assert condition == "service_completed_successfully", f"{name} does not wait for {creators[0]} to create the bucket"
