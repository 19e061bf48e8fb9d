"""Which librdkafka errors mean the cluster refused Inlet's credentials or a permission: no retry can
cure them, and a user must act. One definition for the control plane's client (``api.kafka``) and
the job's readers and writers; it lives here because ``spark_jobs`` is the layer both may import.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

AUTH_ERROR_CODES = frozenset({
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
})


def is_auth_error(error: KafkaError) -> bool:
    return error.code() in AUTH_ERROR_CODES
