"""The transport over TLS: the certificate is verified for the name, at the checked address."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import httpx
import pytest

from adapters.http import OutboundGuard
from adapters.http.transport import GuardedTransport
from tests.adapters.http.builders import FakeResolver
from tests.adapters.http.scripted_server import ScriptedServer


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for target.test: (certificate file, key file)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    command = [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    command += ["-subj", "/CN=target.test", "-addext", "subjectAltName=DNS:target.test"]
    command += ["-keyout", key, "-out", cert]
    subprocess.run(
        command,
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_verifies_the_name_at_the_checked_address(
    server: ScriptedServer, certificate: tuple[str, str]
) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    tls = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=server_side)
    port = tls.sockets[0].getsockname()[1]
    resolver = FakeResolver({"target.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    transport = GuardedTransport(
        OutboundGuard(resolver=resolver),
        max_connections=4,
        ssl_context=ssl.create_default_context(cafile=cert),
    )
    try:
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(2):
                answer = await client.get(f"https://target.test:{port}/")
                assert (answer.status_code, answer.text) == (200, "ok")
            assert server.connections == 1  # kept alive over TLS

            with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
                await client.get(f"https://other.test:{port}/")
    finally:
        tls.close()
