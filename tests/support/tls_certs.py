"""Certificates for serving the simulated sites over TLS in tests: a test CA made on the spot
(with `cryptography`), a certificate it issues for a site's names, and a self-signed one."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
_END = dt.datetime(2036, 1, 1, tzinfo=dt.timezone.utc)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries = []
    for n in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            entries.append(x509.DNSName(n))
    return x509.SubjectAlternativeName(entries)


class LocalCA:
    """A certificate authority for one test run; ``cert_path`` is what a client would trust."""

    def __init__(self, folder: Path, name: str = "webfreeze test CA"):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(_START).not_valid_after(_END)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.cert_path = self.folder / "test-ca.pem"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, names: list[str]) -> tuple[Path, Path]:
        """A server certificate for ``names`` (the first is its common name): (cert chain, key) files."""
        key = _key()
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
                .issuer_name(self.cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(_START).not_valid_after(_END)
                .add_extension(_san(names), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .sign(self.key, hashes.SHA256()))
        return _write(self.folder, names[0], cert.public_bytes(serialization.Encoding.PEM)
                      + self.cert.public_bytes(serialization.Encoding.PEM), key)


def self_signed(folder: Path, names: list[str]) -> tuple[Path, Path]:
    """A self-signed server certificate for ``names`` (a staging site's): (cert, key) files."""
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(_START).not_valid_after(_END)
            .add_extension(_san(names), critical=False)
            .sign(key, hashes.SHA256()))
    return _write(Path(folder), f"self-signed-{names[0]}", cert.public_bytes(serialization.Encoding.PEM), key)


def _write(folder: Path, stem: str, chain: bytes, key) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / f"{stem}.pem", folder / f"{stem}.key"
    cert_path.write_bytes(chain)
    key_path.write_bytes(_pem_key(key))
    return cert_path, key_path
