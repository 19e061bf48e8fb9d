"""``inlet sandbox-kafka``: run the sandbox cluster, or act on a running one through its state file.

    inlet sandbox-kafka [serve] [--brokers N] [--topic NAME:PARTITIONS ...] [--state-file PATH]
    inlet sandbox-kafka create-topic NAME --partitions N [--state-file PATH]
    inlet sandbox-kafka broker-down ID | broker-up ID | set-rtt ID MS
    inlet sandbox-kafka request-errors API_KEY ERROR [ERROR ...]
    inlet sandbox-kafka delete-records TOPIC PARTITION OFFSET | delete-topic NAME | status
    inlet sandbox-kafka trickle --topic T --rate N [--count N] [--state-file PATH]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from sandbox.cluster import SandboxCluster, SandboxError
from sandbox.control import ControlServer, SandboxControlClient, read_state_file, write_state_file

DEFAULT_STATE_FILE = Path(".inlet/sandbox-kafka.state")


def _topic_spec(value: str) -> tuple[str, int]:
    name, sep, partitions = value.rpartition(":")
    if not sep or not name or not partitions.isdigit() or int(partitions) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS, got {value!r}")
    return name, int(partitions)


def _int_or_name(value: str) -> int | str:
    return int(value) if value.lstrip("-").isdigit() else value


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inlet sandbox-kafka", description="Run the sandbox Kafka cluster.")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topic", type=_topic_spec, action="append", default=[], metavar="NAME:PARTITIONS")
    parser.add_argument("--state-file", type=Path, default=DEFAULT_STATE_FILE)
    parser.add_argument("--control-port", type=int, default=0, help="port of the control interface (default: any free)")
    return parser


def _command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="inlet sandbox-kafka", description="Act on a running sandbox Kafka.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-file", type=Path, default=DEFAULT_STATE_FILE)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("create-topic", parents=[common])
    p.add_argument("name")
    p.add_argument("--partitions", type=int, required=True)
    p.add_argument("--replication", type=int, default=1)
    sub.add_parser("delete-topic", parents=[common]).add_argument("name")
    sub.add_parser("broker-down", parents=[common]).add_argument("broker_id", type=int)
    sub.add_parser("broker-up", parents=[common]).add_argument("broker_id", type=int)
    p = sub.add_parser("set-rtt", parents=[common])
    p.add_argument("broker_id", type=int)
    p.add_argument("ms", type=int)
    p = sub.add_parser("request-errors", parents=[common], help="fail the next requests of an API key")
    p.add_argument("api_key", type=_int_or_name, help="e.g. Fetch, ListOffsets, Metadata or a number")
    p.add_argument("errors", type=_int_or_name, nargs="+", help="Kafka error names or codes, e.g. NOT_LEADER_FOR_PARTITION")
    p = sub.add_parser("delete-records", parents=[common], help="advance a partition's earliest offset")
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p.add_argument("before_offset", type=int)
    sub.add_parser("status", parents=[common])
    p = sub.add_parser("trickle", parents=[common], help="produce sample order events until interrupted")
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=float, default=10.0, help="events per second")
    p.add_argument("--count", type=int, default=None, help="stop after this many events")
    return parser


COMMANDS = frozenset(
    {"create-topic", "delete-topic", "broker-down", "broker-up", "set-rtt", "request-errors", "delete-records", "status", "trickle"}
)


def main(argv: list[str]) -> int:
    try:
        if argv and argv[0] in COMMANDS:
            return _run_command(_command_parser().parse_args(argv))
        # "serve" is optional; spelling it out keeps the options away from any parser in front of this one.
        return _serve(_serve_parser().parse_args(argv[1:] if argv[:1] == ["serve"] else argv))
    except SandboxError as exc:
        print(f"sandbox-kafka: {exc}", file=sys.stderr)
        return 1


def _serve(args: argparse.Namespace) -> int:
    state_file: Path = args.state_file
    # A file left by a killed sandbox is taken over; a live sandbox's is not.
    if state_file.exists() and _is_live(state_file):
        raise SandboxError(f"a sandbox is already running with state file {state_file}")

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    with SandboxCluster(args.brokers) as cluster:
        for name, partitions in args.topic:
            cluster.create_topic(name, partitions)
        control = ControlServer(cluster, args.control_port).start()
        try:
            write_state_file(state_file, cluster.bootstrap_servers, control.address)
            print(cluster.bootstrap_servers, flush=True)
            print(f"sandbox-kafka: {args.brokers} broker(s), control at {control.address}, state in {state_file}", file=sys.stderr, flush=True)
            stop.wait()
        finally:
            control.close()
            _remove_own_state_file(state_file, control.address)
    return 0


def _is_live(state_file: Path) -> bool:
    try:
        SandboxControlClient.from_state_file(state_file).status()
        return True
    except SandboxError:
        return False


def _remove_own_state_file(path: Path, control_address: str) -> None:
    # Another sandbox may have taken the path over since; its file is not ours to delete.
    try:
        if read_state_file(path)[1] == control_address:
            path.unlink()
    except (SandboxError, FileNotFoundError):
        pass


def _run_command(args: argparse.Namespace) -> int:
    client = SandboxControlClient.from_state_file(args.state_file)
    match args.command:
        case "create-topic":
            client.create_topic(args.name, args.partitions, args.replication)
        case "delete-topic":
            client.delete_topic(args.name)
        case "broker-down":
            client.broker_down(args.broker_id)
        case "broker-up":
            client.broker_up(args.broker_id)
        case "set-rtt":
            client.set_rtt(args.broker_id, args.ms)
        case "request-errors":
            client.push_request_errors(args.api_key, args.errors)
        case "delete-records":
            client.delete_records(args.topic, args.partition, args.before_offset)
        case "status":
            print(json.dumps(client.status()))
        case "trickle":
            return _trickle(client.bootstrap_servers, args)
    return 0


def _trickle(bootstrap_servers: str, args: argparse.Namespace) -> int:
    from sandbox.sample_events import produce_sample_events

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    produced = produce_sample_events(
        bootstrap_servers, args.topic, rate_per_s=args.rate, stop_event=stop, max_events=args.count
    )
    print(f"sandbox-kafka: produced {produced} event(s) to {args.topic}", file=sys.stderr)
    return 0
