"""``SandboxCluster``: librdkafka's mock Kafka cluster driven through ctypes.

The mock cluster lives inside the librdkafka shared library bundled with confluent-kafka. It needs
an ``rd_kafka_t`` handle to own its threads; its brokers listen on 127.0.0.1 TCP ports and speak
the Kafka protocol, so any client in any process can use them. The fault-injection calls here
(broker down/up, request errors, RTT, record deletion) are the reason the tests use it rather than
librdkafka's ``test.mock.num.brokers`` shortcut.

The mock API is marked experimental by librdkafka; the signatures bound below are those of the
librdkafka bundled with confluent-kafka 2.16.1.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Self

# Kafka protocol API keys used most with push_request_errors; any other key may be passed as an int.
API_KEYS: dict[str, int] = {
    "Produce": 0,
    "Fetch": 1,
    "ListOffsets": 2,
    "Metadata": 3,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "FindCoordinator": 10,
    "JoinGroup": 11,
    "Heartbeat": 12,
    "SyncGroup": 14,
    "ApiVersions": 18,
    "InitProducerId": 22,
}

_RD_KAFKA_PRODUCER = 0
_ALL_BROKERS = -1


class SandboxError(RuntimeError):
    """A mock-cluster call failed; the message names the call and librdkafka's reason."""


def _error_code(error: int | str) -> int:
    if isinstance(error, int):
        return error
    from confluent_kafka import KafkaError

    code = getattr(KafkaError, error, None)
    if not isinstance(code, int):
        raise ValueError(f"unknown Kafka error name {error!r} (see confluent_kafka.KafkaError)")  # noqa: TRY004 - a name
    return code


def _find_librdkafka() -> str:
    spec = importlib.util.find_spec("confluent_kafka")
    if spec and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))
        # Linux wheels vendor it in confluent_kafka.libs/, macOS wheels in confluent_kafka/.dylibs/.
        for pattern in ("confluent_kafka.libs/librdkafka*.so*", "confluent_kafka/.dylibs/librdkafka*.dylib"):
            found = sorted(glob.glob(os.path.join(site, pattern)))
            if found:
                return found[0]
    system = ctypes.util.find_library("rdkafka")
    if system:
        return system
    raise SandboxError("librdkafka not found: install confluent-kafka (its wheel bundles librdkafka)")


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    p, c_char_p, i32, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64
    signatures = {
        "rd_kafka_conf_new": (p, []),
        "rd_kafka_conf_set": (ctypes.c_int, [p, c_char_p, c_char_p, c_char_p, ctypes.c_size_t]),
        "rd_kafka_conf_destroy": (None, [p]),
        "rd_kafka_new": (p, [ctypes.c_int, p, c_char_p, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [p]),
        "rd_kafka_err2str": (c_char_p, [ctypes.c_int]),
        "rd_kafka_mock_cluster_new": (p, [p, ctypes.c_int]),
        "rd_kafka_mock_cluster_destroy": (None, [p]),
        "rd_kafka_mock_cluster_bootstraps": (c_char_p, [p]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [p, c_char_p, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_mock_topic_delete": (ctypes.c_int, [p, c_char_p]),
        "rd_kafka_mock_broker_set_down": (ctypes.c_int, [p, i32]),
        "rd_kafka_mock_broker_set_up": (ctypes.c_int, [p, i32]),
        "rd_kafka_mock_broker_set_rtt": (ctypes.c_int, [p, i32, ctypes.c_int]),
        "rd_kafka_mock_push_request_errors_array": (
            None,
            [p, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)],
        ),
        "rd_kafka_mock_clear_request_errors": (None, [p, ctypes.c_int16]),
        "rd_kafka_mock_partition_delete_records": (ctypes.c_int, [p, c_char_p, i32, i64]),
    }
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise SandboxError(f"this librdkafka lacks {name}; the sandbox needs the one bundled with confluent-kafka 2.16") from None
        fn.restype, fn.argtypes = restype, argtypes
    return lib


_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def _librdkafka() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _bind(ctypes.CDLL(_find_librdkafka()))
        return _lib


class SandboxCluster:
    """A mock Kafka cluster of ``brokers`` brokers (ids 1..brokers) on 127.0.0.1.

    Use as a context manager, or call ``start()`` and ``close()``. Every method is thread-safe.
    """

    def __init__(self, brokers: int = 3) -> None:
        if brokers < 1:
            raise ValueError("a sandbox cluster needs at least one broker")
        self.brokers = brokers
        self._rk: int | None = None
        self._mc: int | None = None
        self._bootstrap: str | None = None
        self._lock = threading.RLock()

    # Lifecycle.

    def start(self) -> Self:
        with self._lock:
            if self._mc is not None:
                return self
            lib = _librdkafka()
            errstr = ctypes.create_string_buffer(512)
            conf = lib.rd_kafka_conf_new()
            # Only the mock brokers' own errors matter here; the owning handle never connects anywhere.
            if lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                raise SandboxError(f"rd_kafka_conf_set failed: {errstr.value.decode()}")
            rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))  # takes ownership of conf
            if not rk:
                lib.rd_kafka_conf_destroy(conf)
                raise SandboxError(f"rd_kafka_new failed: {errstr.value.decode()}")
            mc = lib.rd_kafka_mock_cluster_new(rk, self.brokers)
            if not mc:
                lib.rd_kafka_destroy(rk)
                raise SandboxError("rd_kafka_mock_cluster_new failed (no free 127.0.0.1 ports?)")
            self._rk, self._mc = rk, mc
            self._bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
            return self

    def close(self) -> None:
        with self._lock:
            if self._mc is None:
                return
            lib = _librdkafka()
            lib.rd_kafka_mock_cluster_destroy(self._mc)
            lib.rd_kafka_destroy(self._rk)
            self._rk = self._mc = None
            self._bootstrap = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._mc is not None

    @property
    def bootstrap_servers(self) -> str:
        if self._bootstrap is None:
            raise SandboxError("the sandbox cluster is not running")
        return self._bootstrap

    # Topics.

    def create_topic(self, name: str, partitions: int, replication: int = 1) -> None:
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        if not 1 <= replication <= self.brokers:
            raise ValueError(f"replication must be between 1 and the broker count ({self.brokers})")
        self._call("create topic", "rd_kafka_mock_topic_create", name.encode(), partitions, replication)

    def delete_topic(self, name: str) -> None:
        self._call("delete topic", "rd_kafka_mock_topic_delete", name.encode())

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Drop the records of ``topic[partition]`` below ``before_offset``, as retention would."""
        self._call(
            f"delete records of {topic}[{partition}] before {before_offset}",
            "rd_kafka_mock_partition_delete_records",
            topic.encode(),
            partition,
            before_offset,
        )

    # Faults.

    def broker_down(self, broker_id: int) -> None:
        """Disconnect the broker's clients and refuse new connections; leadership does not move."""
        self._call(f"broker {broker_id} down", "rd_kafka_mock_broker_set_down", self._broker(broker_id))

    def broker_up(self, broker_id: int) -> None:
        self._call(f"broker {broker_id} up", "rd_kafka_mock_broker_set_up", self._broker(broker_id))

    def set_rtt(self, broker_id: int, ms: int) -> None:
        """Delay every response of the broker (``-1``: all brokers) by ``ms`` milliseconds."""
        if ms < 0:
            raise ValueError("rtt must be >= 0 ms")
        self._call(f"broker {broker_id} rtt", "rd_kafka_mock_broker_set_rtt", self._broker(broker_id), ms)

    def push_request_errors(self, api_key: int | str, errors: Sequence[int | str]) -> None:
        """Fail the next ``len(errors)`` requests of ``api_key`` cluster-wide, in order, with ``errors``.

        ``errors`` are Kafka error codes or their names (``confluent_kafka.KafkaError.*``, e.g.
        ``"NOT_LEADER_FOR_PARTITION"``); ``0`` lets one request through, and ``"_TRANSPORT"`` makes
        the broker drop the connection instead.
        """
        key = self._api_key(api_key)
        resolved = [_error_code(e) for e in errors]
        codes = (ctypes.c_int * len(resolved))(*resolved)
        with self._lock:
            _librdkafka().rd_kafka_mock_push_request_errors_array(self._handle(), key, len(resolved), codes)

    def clear_request_errors(self, api_key: int | str) -> None:
        with self._lock:
            _librdkafka().rd_kafka_mock_clear_request_errors(self._handle(), self._api_key(api_key))

    # Internals.

    def _handle(self) -> int:
        if self._mc is None:
            raise SandboxError("the sandbox cluster is not running")
        return self._mc

    def _broker(self, broker_id: int) -> int:
        if broker_id != _ALL_BROKERS and not 1 <= broker_id <= self.brokers:
            raise ValueError(f"broker id must be 1..{self.brokers} (or -1 for all), not {broker_id}")
        return broker_id

    @staticmethod
    def _api_key(api_key: int | str) -> int:
        if isinstance(api_key, str):
            if api_key not in API_KEYS:
                raise ValueError(f"unknown API key {api_key!r}; known: {', '.join(API_KEYS)} (or pass the number)")
            return API_KEYS[api_key]
        return api_key

    def _call(self, what: str, fn_name: str, *args: object) -> None:
        lib = _librdkafka()
        with self._lock:
            err = getattr(lib, fn_name)(self._handle(), *args)
        if err != 0:
            raise SandboxError(f"{what}: {lib.rd_kafka_err2str(err).decode()} (librdkafka error {err})")
