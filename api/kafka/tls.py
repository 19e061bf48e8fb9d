"""Why a TLS handshake with a broker failed, in words a user can act on.

librdkafka reports every verification failure as "certificate verify failed … broker certificate
could not be verified", whether the certificate comes from an unknown CA, has expired, or names
another host, and a broker refusing the client's certificate after a TLS 1.3 handshake only as a
lost connection. After such a failure the connection test repeats the handshake once with Python's
``ssl`` and the same trust settings, step by step, to say which it was.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass

from api.kafka.config import KafkaClientConfig
from spark_jobs.public import EgressPolicy, EgressRefused, open_tcp

_REASONS = {
    "untrusted_certificate": "the broker's certificate is not signed by a trusted CA{why} (set ssl.ca_pem to the CA that signed it)",
    "expired_certificate": "the broker's certificate has expired or is not yet valid",
    "hostname_mismatch": "the broker's certificate is not valid for the host name {host} (connect by a name it lists, "
                         "or set ssl.endpoint_identification to none)",
    "client_certificate_required": "the broker requires a client certificate (set ssl.certificate_pem and ssl.key_pem)",
    "client_certificate_refused": "the broker refused the client certificate",
    "handshake": "the TLS handshake failed",
}


@dataclass(frozen=True)
class TlsDiagnosis:
    reason: str
    message: str


def diagnose(config: KafkaClientConfig, *, timeout_s: float, egress: EgressPolicy) -> TlsDiagnosis | None:
    """Handshake with the first bootstrap server as the client would (connecting through ``egress``);
    None when it succeeds."""
    host, _, port = config.bootstrap_servers.split(",")[0].strip().rpartition(":")
    host = host.strip("[]")
    tls = config.ssl or {}
    verify_host = tls.get("endpoint_identification", "https") != "none"

    def handshake(*, check_hostname: bool, client_cert: bool) -> None:
        context = ssl.create_default_context(cadata=tls["ca_pem"]) if tls.get("ca_pem") else ssl.create_default_context()
        context.check_hostname = check_hostname
        if client_cert and tls.get("certificate_pem") and tls.get("key_pem"):
            with tempfile.NamedTemporaryFile("w", suffix=".pem") as pem:  # 0600, removed on close
                pem.write(tls["key_pem"] + "\n" + tls["certificate_pem"])
                pem.flush()
                context.load_cert_chain(pem.name, password=tls.get("key_password"))
        with (
            open_tcp(egress, host, int(port), timeout_s=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host) as conn,
        ):
            conn.settimeout(min(timeout_s, 1.0))
            try:
                conn.recv(1)  # TLS 1.3 refuses a client certificate only after the handshake
            except TimeoutError:
                pass  # nothing to read: the broker took the connection

    try:
        handshake(check_hostname=False, client_cert=True)
    except ssl.SSLCertVerificationError as exc:
        expired = exc.verify_code == 10 or "expired" in (exc.verify_message or "")
        if expired:
            return _diagnosis("expired_certificate")
        return _diagnosis("untrusted_certificate", why=f": {exc.verify_message}" if exc.verify_message else "")
    except ssl.SSLError as exc:
        text = str(exc).lower()
        if any(alert in text for alert in ("certificate required", "bad certificate", "handshake failure",
                                           "unknown ca", "certificate unknown")):
            # The broker's alert after our certificate (or the lack of one).
            return _diagnosis("client_certificate_refused" if tls.get("certificate_pem") else "client_certificate_required")
        return _diagnosis("handshake")
    except (OSError, ValueError, EgressRefused):
        return None  # not a TLS answer: the client's own error says more
    if verify_host:
        try:
            handshake(check_hostname=True, client_cert=True)
        except ssl.SSLCertVerificationError:
            return _diagnosis("hostname_mismatch", host=host)
        except (OSError, ValueError, EgressRefused):
            return None
    return None


def _diagnosis(reason: str, **values: str) -> TlsDiagnosis:
    return TlsDiagnosis(reason, _REASONS[reason].format(**values))
