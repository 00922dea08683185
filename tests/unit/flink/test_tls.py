"""TLS to the JobManager over real sockets, through both wires: a private CA, no verification, and
mutual TLS. The certificates are made by the openssl command for this test run."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Literal

import pytest
from socket_servers import raw_server, read_request

from autoscaler.flink import FlinkClient, FlinkUnreachable
from autoscaler.settings import ClusterSettings

OVERVIEW = b'{"taskmanagers": 1, "slots-total": 3, "slots-available": 0, "jobs-running": 0}'
WIRES = ["aiohttp", "httpx"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by the CA."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    d = tmp_path_factory.mktemp("tls")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=flink-autoscaler test CA")  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}")  # fmt: skip
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")  # fmt: skip
    return d


@contextmanager
def tls_server(certs: Path, *, client_certs: bool = False) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 answering every request with a Flink overview."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    if client_certs:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certs / "ca.pem")

    def answer(raw: socket.socket) -> None:
        try:
            with context.wrap_socket(raw, server_side=True) as conn:
                conn.settimeout(5)
                if b"\r\n\r\n" not in read_request(conn):
                    return
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                conn.sendall(head + b"Content-Length: %d\r\n\r\n%s" % (len(OVERVIEW), OVERVIEW))
        except OSError:  # the client refused the certificate, or sent none (ssl.SSLError is an OSError)
            pass

    with raw_server(answer, scheme="https") as url:
        yield url


async def overview_slots(settings: ClusterSettings) -> int:
    async with FlinkClient.from_settings(settings, timedelta(seconds=5)) as client:
        return (await client.overview()).slots_total


Wire = Literal["aiohttp", "httpx"]


def cluster(url: str, wire: Wire, **tls: object) -> ClusterSettings:
    return ClusterSettings.model_validate({"name": "tls", "rest_url": url, "http_transport": wire, **tls})


@pytest.mark.parametrize("wire", WIRES)
async def test_a_private_ca_is_trusted_when_configured_and_only_then(certs: Path, wire: Wire) -> None:
    with tls_server(certs) as url:
        assert await overview_slots(cluster(url, wire, ca_file=certs / "ca.pem")) == 3
        with pytest.raises(FlinkUnreachable, match=r"(?i)certificate"):
            await overview_slots(cluster(url, wire))  # the system's CAs do not know it


@pytest.mark.parametrize("wire", WIRES)
async def test_verify_tls_false_accepts_any_certificate(certs: Path, wire: Wire) -> None:
    with tls_server(certs) as url:
        assert await overview_slots(cluster(url, wire, verify_tls=False)) == 3


@pytest.mark.parametrize("wire", WIRES)
async def test_mutual_tls_sends_the_client_certificate(certs: Path, wire: Wire) -> None:
    with tls_server(certs, client_certs=True) as url:
        mutual = cluster(
            url,
            wire,
            ca_file=certs / "ca.pem",
            client_cert=certs / "client.pem",
            client_key=certs / "client.key",
        )
        assert await overview_slots(mutual) == 3
        with pytest.raises(FlinkUnreachable):
            await overview_slots(cluster(url, wire, ca_file=certs / "ca.pem"))  # no client certificate
