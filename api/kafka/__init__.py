"""Inlet's Kafka client: connection settings → librdkafka config, bounded lookups, typed errors."""

from api.kafka.client import BrokerInfo, ClusterMetadata, KafkaClient, Partition
from api.kafka.config import ALLOWED_CLIENT_OPTIONS, KafkaClientConfig, validate_client_options
from api.kafka.errors import (
    KafkaAuthError,
    KafkaClientError,
    KafkaConfigError,
    KafkaLookupError,
    KafkaTimeout,
    KafkaUnavailable,
    TimestampNotResolvable,
    TopicNotFound,
)

__all__ = [
    "ALLOWED_CLIENT_OPTIONS",
    "BrokerInfo",
    "ClusterMetadata",
    "KafkaAuthError",
    "KafkaClient",
    "KafkaClientConfig",
    "KafkaClientError",
    "KafkaConfigError",
    "KafkaLookupError",
    "KafkaTimeout",
    "KafkaUnavailable",
    "Partition",
    "TimestampNotResolvable",
    "TopicNotFound",
    "validate_client_options",
]
