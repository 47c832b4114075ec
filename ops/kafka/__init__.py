"""Local single-node Apache Kafka (KRaft) broker management for development and tests.

The broker's jars are resolved from Maven Central through ``ops/kafka/pom.xml`` and
run straight from a cached lib directory; see :class:`ops.kafka.broker.KafkaBroker`.
"""

from ops.kafka.broker import (
    BrokerStatus,
    JarResolutionError,
    KafkaBroker,
    KafkaBrokerError,
    default_lib_dir,
)

__all__ = [
    "BrokerStatus",
    "JarResolutionError",
    "KafkaBroker",
    "KafkaBrokerError",
    "default_lib_dir",
]
