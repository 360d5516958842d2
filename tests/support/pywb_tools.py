"""The reference tools' side of the interoperability tests: console scripts beside this interpreter
(pywb's ``wb-manager`` and ``wayback``, py-wacz, ``warcio``), free loopback ports, and raw fetches
that follow no redirect and claim every content coding (so pywb passes stored entities untouched)."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent

# Claim every content coding so pywb passes the stored entity through untouched: in id_ mode pywb
# decodes a Content-Encoding the client did not list in Accept-Encoding (urllib sends "identity").
ACCEPT_ALL_CODINGS = "gzip, deflate, br, zstd, compress, x-gzip"


def tool(name: str) -> Path:
    """A console script installed beside this interpreter; skip when the tool is genuinely absent."""
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in {BIN} (pip install -e '.[test]' installs pywb and wacz)")
    return path


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """Assert a finished process exited 0 (its output in the message otherwise); return it."""
    assert result.returncode == 0, f"{result.args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def fetch(url: str, data: bytes | None = None, content_type: str | None = None) -> tuple[int, dict, bytes]:
    """(status, lower-cased headers, body) of one request, redirects and error statuses returned as they are."""
    headers = {"Accept-Encoding": ACCEPT_ALL_CODINGS}
    if content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
    try:
        with _OPENER.open(req, timeout=30) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def ts14(captured_at: str) -> str:
    """A capture time (ISO 8601) as pywb's 14-digit timestamp."""
    return "".join(ch for ch in captured_at[:19] if ch.isdigit())
