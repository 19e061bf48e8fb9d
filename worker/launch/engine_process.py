"""One warm engine as the worker holds it: its process, the Unix socket to it (JSON lines: the
worker's ops, the engine's events), its output, its memory and its end. What the engine is for and
when it is replaced is ``worker.launch.warm``; the engine's own side, ``spark_jobs/engine.py``."""

from __future__ import annotations

import json
import queue
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from worker.launch.processes import TERM_GRACE_S, Output, kill_group, tree_memory_bytes


class EngineGone(Exception):
    """The engine exited (or closed its socket) while a run needed it."""


class EngineProcess:
    """One engine: its process, the socket to it, and its output."""

    def __init__(self, process: subprocess.Popen[str], folder: Path, digest: str) -> None:
        self.process = process
        self.folder = folder
        self.digest = digest
        self.runs = 0
        self._conn: socket.socket | None = None
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.output = Output(process, name=f"engine-log-{process.pid}")

    # Start-up.

    def connect(self, listener: socket.socket, deadline: float) -> None:
        """Accept the engine's connection and wait for its ``ready``."""
        listener.settimeout(0.5)
        while self._conn is None:
            self._check_alive(deadline, "to connect")
            try:
                self._conn, _ = listener.accept()
            except TimeoutError:
                continue
        self._conn.settimeout(None)
        threading.Thread(target=self._read_messages, name=f"engine-read-{self.process.pid}", daemon=True).start()
        while (message := self.receive(0.5)) is None or message.get("event") != "ready":
            self._check_alive(deadline, "to start its Spark session")

    def _check_alive(self, deadline: float, what: str) -> None:
        if self.process.poll() is not None:
            raise EngineGone(f"the warm engine exited {self.process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the warm engine took too long {what}")

    # Talking to it.

    def send(self, message: dict[str, Any]) -> None:
        assert self._conn is not None  # connected in connect()
        try:
            self._conn.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise EngineGone(f"the warm engine's socket failed: {exc}") from exc

    def receive(self, timeout_s: float) -> dict[str, Any] | None:
        """The engine's next message, or None after ``timeout_s``; ``EngineGone`` once it has exited."""
        try:
            message = self._messages.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if message is None:
            self._messages.put(None)  # every later call sees it too
            raise EngineGone("the warm engine closed its socket")
        return message

    def _read_messages(self) -> None:
        assert self._conn is not None
        try:
            for line in self._conn.makefile("rb"):
                self._messages.put(json.loads(line))
        except (OSError, ValueError):
            pass
        self._messages.put(None)

    def last_lines(self) -> str:
        """The engine's last output lines, joined: why it died, when it did."""
        if not self.alive():
            self.output.join(2)  # the output of an exited engine is read to its end
        return self.output.last_lines()

    # Its size and end.

    def memory_bytes(self) -> int:
        """Memory of the engine's processes: the JVM, the driver and its Python daemon and workers."""
        return tree_memory_bytes(self.process.pid)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        """Ask the engine to stop its session and exit; kill its process group if it does not."""
        try:
            self.send({"op": "stop"})
            self.process.wait(TERM_GRACE_S)
        except (EngineGone, subprocess.TimeoutExpired):
            pass
        self.kill()  # whatever outlived the stop (its Python workers), or an engine that did not stop

    def responsive(self, within_s: float) -> bool:
        """Whether the engine (its driver and, through it, its JVM) answers a ping within ``within_s``."""
        try:
            self.send({"op": "ping"})
            deadline = time.monotonic() + within_s
            while time.monotonic() < deadline:
                message = self.receive(0.05)
                if message is not None and message.get("event") == "pong":
                    return not message.get("stopped", False)
        except EngineGone:
            return False
        return False

    def kill(self) -> None:
        """SIGKILL the engine's process group: nothing of a run it was given up on goes on."""
        kill_group(self.process)
        if self._conn is not None:
            self._conn.close()
        shutil.rmtree(self.folder, ignore_errors=True)
