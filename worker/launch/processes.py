"""The process plumbing of a Spark launch, shared by a spark-submit per run (``submit``) and the warm
engine (``warm``): a child in its own process group that dies with this worker, its private folder
and files, its output read line by line and redacted, its memory, and its end.

A child runs in a process group of its own so that a timeout, cancel or hang stops the JVM and all
its Python workers at once (with the group Spark's Python daemon moves itself and them to); on Linux
it also gets SIGKILL from the kernel (PR_SET_PDEATHSIG) when the thread that started it ends: a job
nobody watches any more (no cancel, no timeout, no lease) must not go on to write a run that another
worker retries.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from spark_jobs.public import END_OF_OUTPUT, redact

TERM_GRACE_S = 10.0
# Runs in the child and execs spark-submit in place (so the JVM keeps it): SIGKILL when the worker's
# launching thread ends. A preexec_fn would do the same but is unsafe beside the heartbeat thread.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(70)  # the worker died before prctl\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def start_process(cmd: list[str], *, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """``cmd`` in a process group of its own (killed as one), dying with this worker on Linux; its
    stdout and stderr as one text stream."""
    if sys.platform.startswith("linux"):
        cmd = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *cmd]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True, text=True, errors="replace")


class Output:
    """A child's output, read on a thread of its own: each line redacted with the secrets given last,
    the last lines kept (why a child died) and handed to the current listener, if any."""

    def __init__(self, process: subprocess.Popen[str], *, name: str, secrets: Iterable[str] = (),
                 listener: Callable[[str], None] | None = None) -> None:
        self._tail: deque[str] = deque(maxlen=20)
        self._lock = threading.Condition()
        self._secrets = list(secrets)
        self._listener = listener
        self._until: str | None = None
        # Listeners whose end line had not come when they stopped, and their secrets: their late lines
        # are redacted with them too.
        self._unended: set[str] = set()
        self._late_secrets: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(process,), name=name, daemon=True)
        self._reader.start()

    def listen(self, listener: Callable[[str], None] | None, secrets: Iterable[str], *, until: str | None = None) -> None:
        """Hand the lines to ``listener`` from now on; up to the line ``until`` (an ``END_OF_OUTPUT``
        line, never handed on), if given: the child's word that all the listener's lines are written."""
        with self._lock:
            self._listener, self._until = listener, until
            self._secrets = [*secrets, *self._late_secrets]

    def stop_listening(self, wait_s: float = 0.0) -> None:
        """Stop handing lines on, once the line ``until`` has been read or ``wait_s`` has passed."""
        with self._lock:
            if self._until is not None and not self._lock.wait_for(lambda: self._until is None, timeout=wait_s):
                self._unended.add(self._until)
                self._late_secrets = [*self._secrets]
            self._listener, self._until = None, None  # the secrets stay: a late line of the run is still redacted

    def join(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) for the output of an exited child to be read to its end."""
        self._reader.join(timeout=timeout_s)

    def last_lines(self) -> str:
        """The last non-blank lines, joined and cut to 1500 characters."""
        with self._lock:
            return " | ".join(line for line in self._tail if line.strip())[-1500:]

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None  # started with stdout=PIPE
        for raw in process.stdout:
            with self._lock:
                line = raw.rstrip("\n")
                if line.startswith(END_OF_OUTPUT):
                    self._ended(line)
                    continue
                line = redact(line, self._secrets)
                self._tail.append(line)
                if self._listener is not None:
                    self._listener(line)

    def _ended(self, line: str) -> None:
        if line == self._until:
            self._listener, self._until = None, None
            self._lock.notify_all()
        elif line in self._unended:  # a listener's end, after it stopped waiting: its secrets may go
            self._unended.discard(line)
            if not self._unended:
                self._late_secrets = []


def write_private(path: Path, text: str) -> None:
    """A file only this user can read: a spec holds the Kafka clients' secrets."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def private_folder(prefix: str) -> Path:
    """A new 0700 folder named by ``prefix`` and this process, whose death leaves it to ``sweep_folders``."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def sweep_folders(prefix: str) -> None:
    """Remove the ``private_folder``s of ``prefix`` whose process is gone: one killed had no chance to."""
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        owner = folder.name.removeprefix(prefix).split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, theirs, ...), whatever group they put themselves in."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parent = int(_stat(proc)[1])  # field 4, the parent
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(proc.name))
    found: list[int] = []
    todo, seen = list(children.get(root, ())), {root}
    while todo:
        pid = todo.pop()
        if pid not in seen:  # a pid reused while /proc was listed could close a loop
            seen.add(pid)
            found.append(pid)
            todo.extend(children.get(pid, ()))
    return found


def tree_memory_bytes(root: int) -> int:
    """Memory of a process and all its descendants: a JVM, its driver, and the Python daemon and
    workers Spark starts (which put themselves in a process group of their own, so a group's sum
    misses them). Each process's proportional share (PSS): pages the workers share with the daemon
    they were forked from count once, not once a process."""
    total = 0
    for pid in [root, *descendants(root)]:
        try:
            total += _proportional_bytes(Path(f"/proc/{pid}"))
        except (OSError, ValueError):  # gone since the listing
            continue
    return total


class MemoryWatch:
    """A run's bound on what its processes hold (``tree_memory_bytes`` of the JVM's tree), sampled while
    the run runs, at most every ``every_s``: a run past it is ended by its launcher, as
    ``resource_exhausted``. ``bound_bytes`` None: no bound."""

    def __init__(self, root: int, bound_bytes: int | None, every_s: float = 0.5) -> None:
        self.root, self.bound_bytes, self.every_s = root, bound_bytes, every_s
        self.peak_bytes = 0
        self._next = 0.0

    def exceeded(self, now: float) -> int | None:
        """What the tree holds, once past the bound; None while under it (or between samples)."""
        if self.bound_bytes is None or now < self._next:
            return None
        self._next = now + self.every_s
        held = tree_memory_bytes(self.root)
        self.peak_bytes = max(self.peak_bytes, held)
        return held if held > self.bound_bytes else None

    def message(self, held: int) -> str:
        assert self.bound_bytes is not None
        return (f"the run's Spark processes held {held / 2**20:,.0f} MiB, past the bound of "
                f"{self.bound_bytes / 2**20:,.0f} MiB (INLET_RUN_MEMORY_MB): the run was stopped and its processes killed")


def _proportional_bytes(proc: Path) -> int:
    try:
        rollup = (proc / "smaps_rollup").read_text()
    except FileNotFoundError:  # a kernel before 4.14: the resident set
        return int((proc / "statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    # No Pss line: a process exiting (older kernels read it as an empty file), which holds nothing more.
    return next((int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")), 0)


def _stat(proc: Path) -> list[str]:
    """A process's ``stat`` fields from the third on (its state): the name before them may hold spaces."""
    return (proc / "stat").read_text().rsplit(")", 1)[1].split()


def _started(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot): with the pid, one process's identity."""
    try:
        return _stat(Path(f"/proc/{pid}"))[19]  # field 22
    except (OSError, IndexError):
        return None


def _strays(process: subprocess.Popen[str]) -> list[tuple[int, str | None]]:
    """The child's descendants, each with its start time, listed while the child lives: once the JVM
    is dead they are nobody's children, and their pids may be given to others."""
    return [(pid, _started(pid)) for pid in descendants(process.pid)]


def _kill_strays(process: subprocess.Popen[str], strays: list[tuple[int, str | None]]) -> None:
    """SIGKILL those of ``strays`` that left the child's process group (Spark's Python daemon calls
    setpgid, and its workers are in the daemon's group) and are still the processes listed."""
    for pid, started in strays:
        with contextlib.suppress(ProcessLookupError):
            if started is not None and _started(pid) == started and os.getpgid(pid) != process.pid:
                os.kill(pid, signal.SIGKILL)


def kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL the child's process group, and its descendants outside it, now: nothing of what it
    was given up on goes on."""
    strays = _strays(process)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _kill_strays(process, strays)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)


def terminate_group(process: subprocess.Popen[str]) -> None:
    """SIGTERM the child's process group, then SIGKILL whatever outlives the grace period (its
    descendants outside the group included)."""
    strays = _strays(process)
    for sig, wait_s in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(wait_s)
            # The JVM's children (Python workers) may still be in the group.
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
        break
    _kill_strays(process, strays)
