"""The local stack on loopback, as child processes: sandbox Kafka, Redis, and Inlet's API, workers
(runs, webhooks) and scheduler, all on SQLite and the local secret store under one data dir. Used by ``inlet demo``
and the ``bench/`` scripts; every child runs in its own process group and is stopped on exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every_s)
    raise RuntimeError(f"timed out waiting for {what}")


class LocalStack:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("INLET_")}
        self.env["INLET_DATA_DIR"] = str(data_dir)
        # Everything of a local stack (the sandbox Kafka, a receiver) is on this machine: loopback is
        # opened in the egress policy, which denies it by default (docs/security.md).
        self.env["INLET_EGRESS_ALLOW"] = "127.0.0.0/8,::1/128"
        data_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        with open(self.data_dir / f"{name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
            process = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.children.append((name, process))
        return process

    def inlet(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        return self.start(name, [sys.executable, "-m", "cli.main", *args])

    def start_sandbox(self, *topics: str, brokers: int = 3) -> str:
        """Start the sandbox Kafka with ``name:partitions`` topics; returns its bootstrap servers."""
        state = self.data_dir / "sandbox-kafka.state"
        args = ["sandbox-kafka", "serve", "--brokers", str(brokers), "--state-file", str(state)]
        for topic in topics:
            args += ["--topic", topic]
        self.inlet("sandbox-kafka", *args)
        wait_until(state.exists, 30, "the sandbox Kafka")
        return state.read_text().splitlines()[0]

    @property
    def sandbox_state_file(self) -> Path:
        return self.data_dir / "sandbox-kafka.state"

    def start_redis(self) -> str:
        port = free_port()
        self.start("redis", ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", str(self.data_dir)])
        url = f"redis://127.0.0.1:{port}/0"
        self.env["INLET_REDIS_URL"] = url
        return url

    def start_inlet(self, *, api_port: int, worker: bool = True, scheduler: bool = True,
                    worker_concurrency: int = 1) -> httpx.Client:
        """Migrate, then start the API (and the workers, runs' and webhooks', and the scheduler); returns
        an API client."""
        subprocess.run([sys.executable, "-m", "cli.main", "migrate"], cwd=ROOT, env=self.env, check=True,
                       stdout=subprocess.DEVNULL)
        self.inlet("api", "api", "--port", str(api_port), "--no-migrate", "--log-level", "warning")
        if worker:
            self.inlet("worker", "worker", "--concurrency", str(worker_concurrency))
            self.inlet("webhook-worker", "webhook-worker")
        if scheduler:
            self.inlet("scheduler", "scheduler")
        api = httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30)

        def up() -> bool:
            try:
                return api.get("/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 60, "the API")
        return api

    def stop(self) -> None:
        for _, process in reversed(self.children):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _, process in reversed(self.children):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
        self.children.clear()
