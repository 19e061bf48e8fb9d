"""The sandbox Kafka: librdkafka's mock cluster, serving the real Kafka protocol on 127.0.0.1.

Used by the tests and the demo where no real broker can run. Inlet's own code never knows it is
talking to the sandbox: it only sees ``bootstrap_servers``.
"""

from sandbox.cluster import SandboxCluster, SandboxError

__all__ = ["SandboxCluster", "SandboxError"]
