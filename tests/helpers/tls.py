"""Certificates for tests: a private CA that issues server and client certificates, and a
self-signed certificate for a service on 127.0.0.1.

A private CA, the way a hospital network or a federation's operator runs one::

    ca = make_ca(tmp_path)                                   # ca.pem (+ its key, in memory)
    server = ca.issue("hospital_a", hosts=["localhost", "127.0.0.1"])
    client = ca.issue("coordinator-client", client=True)     # for mutual TLS
    server.cert, server.key                                  # PEM files in tmp_path
    cert, key = server                                       # (a pair unpacks)
    context = ca.client_context(client)                      # trusts ca.pem, presents client

Everything is ECDSA P-256 and valid for a day (from five minutes ago: clocks drift).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK = ("localhost", "127.0.0.1")
VALID_FOR = dt.timedelta(days=1)
CLOCK_SKEW = dt.timedelta(minutes=5)


class CertPair(NamedTuple):
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    """DNS names and IP addresses (a literal address must be an IP SAN to be matched)."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _builder(subject: x509.Name, issuer: x509.Name,
             key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW)
            .not_valid_after(now + VALID_FOR))


@dataclass(frozen=True)
class CA:
    """A private certificate authority whose certificate is :attr:`cert` (``ca.pem``): what a
    service's ``tls_client_ca``, a center's ``ca_bundle`` or the CLI's ``--ca-bundle`` names."""

    directory: Path
    cert: Path
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey

    def issue(self, name: str, hosts: Sequence[str] = (), *, client: bool = False) -> CertPair:
        """A certificate for ``name`` signed by this CA, written as ``<name>.pem`` and
        ``<name>-key.pem`` in :attr:`directory`.

        ``hosts`` (DNS names or IP addresses) make it a server certificate for them;
        ``client=True`` makes it (also) a client certificate (mutual TLS). One of the two is
        needed.
        """
        if not hosts and not client:
            raise ValueError("give hosts (a server certificate) or client=True")
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)
        key = _key()
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if hosts else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = (_builder(_name(name), self.certificate.subject, key)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=True, content_commitment=False, key_encipherment=False,
                       data_encipherment=False, key_agreement=True, key_cert_sign=False,
                       crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       self.private_key.public_key()), critical=False))
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        cert = builder.sign(self.private_key, hashes.SHA256())
        return CertPair(_write_cert(cert, self.directory / f"{stem}.pem"),
                        _write_key(key, self.directory / f"{stem}-key.pem"))

    def client_context(self, client: CertPair | None = None) -> ssl.SSLContext:
        """A client's TLS context trusting only this CA (and presenting ``client``, if given)."""
        context = ssl.create_default_context(cafile=str(self.cert))
        if client is not None:
            context.load_cert_chain(str(client.cert), str(client.key))
        return context


def make_ca(directory: Path, name: str = "fedstats test CA") -> CA:
    """A new CA in ``directory`` (created if missing): its certificate ``ca.pem``; its key stays
    in memory (nothing but :meth:`CA.issue` signs with it)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = _key()
    subject = _name(name)
    cert = (_builder(subject, subject, key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return CA(directory, _write_cert(cert, directory / "ca.pem"), cert, key)


def self_signed(directory: Path) -> tuple[Path, Path]:
    """``cert.pem`` (for localhost and 127.0.0.1, valid for a day) and ``key.pem`` in
    ``directory``: a certificate that is its own CA (trust it by naming ``cert.pem``)."""
    key = _key()
    name = _name("fedstats test center")
    cert = (_builder(name, name, key)
            .add_extension(_san(LOOPBACK), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return (_write_cert(cert, directory / "cert.pem"),
            _write_key(key, directory / "key.pem"))
