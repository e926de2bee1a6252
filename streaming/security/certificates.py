"""Certificates: those of a broker the project starts (a CA made at start, a server certificate for
127.0.0.1 and localhost signed by it, a client certificate for mTLS), and the name a client certificate
gives its holder. Made and read with ``cryptography``, so no keytool, openssl or hand-made ASN.1 is needed.

The server's key and chain go in a PKCS#12 keystore, which every JDK reads; the CA goes in a PEM file, which
both the broker (a PEM truststore needs no password) and librdkafka (``ssl.ca.location``) read. The files
are made private (0600): they are keys.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.pem"
KEYSTORE_FILE = "server.p12"
CLIENT_CERT_FILE = "client.pem"
CLIENT_KEY_FILE = "client.key"
KEYSTORE_PASSWORD_FILE = "keystore.password"
CLIENT_NAME = "kcompact-client"
VALID_DAYS = 30


@dataclass(frozen=True)
class Certificates:
    """Where one broker's (or one cluster's) TLS material lies."""

    dir: Path
    keystore_password: str
    client_name: str = CLIENT_NAME  # the client certificate's CN: the principal an mTLS client has

    @property
    def ca(self) -> Path:
        return self.dir / CA_FILE

    @property
    def keystore(self) -> Path:
        return self.dir / KEYSTORE_FILE

    @property
    def client_cert(self) -> Path:
        return self.dir / CLIENT_CERT_FILE

    @property
    def client_key(self) -> Path:
        return self.dir / CLIENT_KEY_FILE

    def broker_settings(self) -> dict[str, str]:
        """What a broker needs to offer TLS with these files."""
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore),
                "ssl.keystore.password": self.keystore_password, "ssl.key.password": self.keystore_password,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}

    def client_settings(self, mutual: bool = False) -> dict[str, str]:
        """What a librdkafka client needs to trust the broker, and with ``mutual`` to show its certificate."""
        settings = {"ssl.ca.location": str(self.ca)}
        if mutual:
            settings |= {"ssl.certificate.location": str(self.client_cert), "ssl.key.location": str(self.client_key)}
        return settings


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey,
                 *, ca: bool = False, server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                                      key_encipherment=False, data_encipherment=False,
                                                      key_agreement=False, key_cert_sign=True, crl_sign=True,
                                                      encipher_only=False, decipher_only=False), critical=True)
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def write_private(path: Path, data: bytes) -> None:
    """A file only its owner may read, from its first byte on (no window between writing and chmod)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def make_certificates(directory: str | Path) -> Certificates:
    """A new CA and the certificates it signs, in ``directory``; the ones already there when it holds them
    (a restarted broker keeps what its clients trust)."""
    directory = Path(directory)
    password_file = directory / KEYSTORE_PASSWORD_FILE
    if password_file.exists():
        return Certificates(directory, password_file.read_text())
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _certificate("kcompact test CA", ca_key, _name("kcompact test CA"), ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _certificate("localhost", server_key, ca_cert.subject, ca_key, server=True)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _certificate(CLIENT_NAME, client_key, ca_cert.subject, ca_key)
    password = secrets.token_urlsafe(18)
    pem = serialization.Encoding.PEM
    write_private(directory / CA_FILE, ca_cert.public_bytes(pem))
    write_private(directory / KEYSTORE_FILE, pkcs12.serialize_key_and_certificates(
        b"broker", server_key, server_cert, [ca_cert], serialization.BestAvailableEncryption(password.encode())))
    write_private(directory / CLIENT_CERT_FILE, client_cert.public_bytes(pem))
    write_private(directory / CLIENT_KEY_FILE, client_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    write_private(password_file, password.encode())
    return Certificates(directory, password)


def common_name(certificate: str | Path) -> str | None:
    """The CN of a PEM certificate's subject (the principal a broker mapping CNs gives its holder), or None
    when the file cannot be read as one."""
    try:
        cert = x509.load_pem_x509_certificate(Path(certificate).read_bytes())
    except (OSError, ValueError):
        return None
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else cert.subject.rfc4514_string()
