"""TLS for proxy mode: per-host certificates signed by the webfreeze CA (the recorder's CA).

Certificates come from mitmproxy's certificate store (the same CA file the recorder uses, so a
client trusts one CA for both). Contexts are made once per host and cached.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import tempfile
import threading
from pathlib import Path

from webfreeze.common.ca import CA_BASENAME, default_confdir, load_ca


class TlsContexts:
    def __init__(self, confdir: str | os.PathLike | None = None):
        self.confdir = Path(confdir or default_confdir())
        self.store = load_ca(self.confdir)
        self.ca_file = self.confdir / f"{CA_BASENAME}-ca-cert.pem"
        self._tmp = tempfile.TemporaryDirectory(prefix="webfreeze-tls-")
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def context_for(self, host: str) -> ssl.SSLContext:
        host = host.lower()
        with self._lock:
            ctx = self._contexts.get(host)
            if ctx is None:
                ctx = self._make(host)
                self._contexts[host] = ctx
            return ctx

    def _make(self, host: str) -> ssl.SSLContext:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        try:
            san = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            san = x509.DNSName(host)
        entry = self.store.get_cert(host, [san])
        n = len(self._contexts)
        cert_path = Path(self._tmp.name) / f"{n}.crt"
        key_path = Path(self._tmp.name) / f"{n}.key"
        cert_path.write_bytes(entry.cert.to_pem())
        key_path.write_bytes(entry.privatekey.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
        os.chmod(key_path, 0o600)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert_path, key_path)
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def close(self) -> None:
        self._tmp.cleanup()
