"""docker-compose.yml stays consistent with the code: services, settings and commands exist.

No Docker engine runs here; these checks catch the drift that would only show at ``docker compose up``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from api.core.config import Settings
from cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def services() -> dict[str, dict]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose["services"]


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _depends_on(service: dict) -> list[str]:
    deps = service.get("depends_on") or []
    return list(deps) if isinstance(deps, (list, dict)) else []


def _subcommands() -> set[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name for action in actions for name in action.choices}


def test_every_service_has_an_image_or_build_and_valid_dependencies(services) -> None:
    assert {"kafka", "vault", "postgres", "redis", "spark-master", "spark-worker", "api", "worker", "scheduler"} <= set(services)
    for name, service in services.items():
        assert service.get("image") or service.get("build"), f"{name} has neither image nor build"
        for dependency in _depends_on(service):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
    for name in ("api", "worker", "scheduler"):
        assert services[name]["build"] == "."


def test_published_ports_are_well_formed_and_unique(services) -> None:
    published = []
    for name, service in services.items():
        for port in service.get("ports", []):
            host, _, container = str(port).rpartition(":")
            assert host.isdigit() and container.isdigit(), f"{name}: bad port mapping {port}"
            published.append(int(host))
    assert len(published) == len(set(published))
    assert "8000:8000" in services["api"]["ports"]


def test_every_inlet_env_name_is_a_setting(services) -> None:
    used = {key for service in services.values() for key in _env(service) if key.startswith("INLET_")}
    fields = {f"INLET_{name.upper()}" for name in Settings.model_fields}
    assert used, "no INLET_* settings in docker-compose.yml"
    assert sorted(used - fields) == [], "INLET_* names used in docker-compose.yml that Settings does not define"


def test_inlet_services_run_existing_subcommands(services) -> None:
    known = _subcommands()
    used = {
        service["command"][1]
        for service in services.values()
        if isinstance(service.get("command"), list) and service["command"][:1] == ["inlet"]
    }
    assert {"api", "worker", "scheduler"} <= used
    assert sorted(used - known) == [], "inlet subcommands used in docker-compose.yml that cli.main does not define"


def test_spark_connectors_match_the_spark_and_scala_versions(services) -> None:
    import pyspark

    packages = _env(services["worker"])["INLET_SPARK_PACKAGES"].split(",")
    assert any(p.startswith("io.delta:delta-spark_2.13:4.") for p in packages)
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}" in packages
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"].startswith(f"apache/spark:{pyspark.__version__}-scala2.13")
