"""A steady trickle of realistic e-commerce order events, for the demo and for manual testing.

Each order goes through its life (created → paid → shipped → delivered, sometimes cancelled) as
separate JSON events keyed by ``order_id``, so one order's events land in one partition, in order,
as a real producer keyed by entity would send them.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from confluent_kafka import KafkaException, Producer

_PRODUCTS = [
    ("sku-1001", "Espresso beans 1kg", Decimal("18.90")),
    ("sku-1002", "Oat milk 6-pack", Decimal("11.94")),
    ("sku-2001", "Ceramic pour-over", Decimal("29.00")),
    ("sku-2002", "Paper filters x100", Decimal("4.50")),
    ("sku-3001", "Burr grinder", Decimal("149.00")),
    ("sku-3002", "Gooseneck kettle", Decimal("64.99")),
    ("sku-4001", "Travel mug", Decimal("22.00")),
]
_COUNTRIES = [("DE", "EUR"), ("FR", "EUR"), ("NL", "EUR"), ("GB", "GBP"), ("US", "USD"), ("SE", "SEK")]
_NEXT_STATUS = {"created": "paid", "paid": "shipped", "shipped": "delivered"}
_OPEN_ORDERS_MAX = 200


class OrderEventGenerator:
    """Yields ``(key, event)`` pairs; deterministic for a given ``seed``."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._open: dict[str, dict[str, Any]] = {}
        self._order_seq = 0

    def next_event(self, now: datetime | None = None) -> tuple[str, dict[str, Any]]:
        now = now or datetime.now(UTC)
        if self._open and (len(self._open) >= _OPEN_ORDERS_MAX or self._rng.random() < 0.6):
            order = self._open[self._rng.choice(list(self._open))]
            status = "cancelled" if order["status"] == "created" and self._rng.random() < 0.1 else _NEXT_STATUS[order["status"]]
            order["status"] = status
            if status in ("delivered", "cancelled"):
                del self._open[order["order_id"]]
        else:
            order = self._new_order()
            self._open[order["order_id"]] = order
        event = {
            "event_id": str(uuid.UUID(int=self._rng.getrandbits(128), version=4)),
            "event_type": f"order_{order['status']}",
            "occurred_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "order_id": order["order_id"],
            "customer_id": order["customer_id"],
            "country": order["country"],
            "currency": order["currency"],
            "total": str(order["total"]),
            "items": order["items"],
            "status": order["status"],
        }
        return order["order_id"], event

    def _new_order(self) -> dict[str, Any]:
        self._order_seq += 1
        country, currency = self._rng.choice(_COUNTRIES)
        items = []
        for sku, name, price in self._rng.sample(_PRODUCTS, self._rng.randint(1, 3)):
            quantity = self._rng.randint(1, 4)
            items.append({"sku": sku, "name": name, "quantity": quantity, "unit_price": str(price)})
        total = sum(Decimal(i["unit_price"]) * i["quantity"] for i in items)
        return {
            "order_id": f"ord-{self._rng.getrandbits(32):08x}-{self._order_seq:06d}",
            "customer_id": f"cus-{self._rng.randint(1, 5000):05d}",
            "country": country,
            "currency": currency,
            "items": items,
            "total": total,
            "status": "created",
        }


def produce_sample_events(
    bootstrap_servers: str,
    topic: str,
    *,
    rate_per_s: float,
    stop_event: threading.Event,
    max_events: int | None = None,
    seed: int | None = None,
    producer_config: Mapping[str, Any] | None = None,
) -> int:
    """Produce order events at about ``rate_per_s`` until ``stop_event`` is set (or ``max_events``).

    Returns how many events the brokers acknowledged.
    """
    if rate_per_s <= 0:
        raise ValueError("rate_per_s must be positive")
    acked = 0
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            failures.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 20, **(producer_config or {})})
    generator = OrderEventGenerator(seed)
    started = time.monotonic()
    sent = 0
    try:
        while not stop_event.is_set() and (max_events is None or sent < max_events):
            # Send what is due by now, so the rate holds however long each produce takes.
            due = int((time.monotonic() - started) * rate_per_s) + 1 - sent
            if max_events is not None:
                due = min(due, max_events - sent)
            for _ in range(max(due, 0)):
                key, event = generator.next_event()
                producer.produce(
                    topic,
                    key=key.encode(),
                    value=json.dumps(event, separators=(",", ":")).encode(),
                    headers={"event_type": event["event_type"].encode(), "content-type": b"application/json"},
                    on_delivery=on_delivery,
                )
                sent += 1
            producer.poll(0)
            stop_event.wait(min(0.05, 1 / rate_per_s))
    finally:
        remaining = producer.flush(10)
    if failures:
        raise KafkaException(f"{len(failures)} event(s) not delivered, first: {failures[0]}")
    if remaining:
        raise KafkaException(f"{remaining} event(s) still undelivered after 10s")
    return acked
