"""An IPv6 literal URL (``http://[::1]:8080/x``) exported to WARC and WACZ gets the CDXJ key pywb's
own indexer writes for it (``::1:8080)/x``: the surt package drops the brackets), so pywb and
ReplayWeb.page find it; our archive's own key keeps them (``[::1]:8080)/x``, archives/urlkey.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.archives.urlkey import surt_key
from webfreeze.archives.warc_export import export

URLS = ["http://[::1]:8080/x", "http://[::1]/y?b=2&a=1", "https://[2001:db8::1]:8443/z"]


def _index(lines: str) -> dict[str, str]:
    out = {}
    for line in lines.splitlines():
        key, _, rest = line.partition(" ")
        out[rest.split('"url": "', 1)[1].split('"', 1)[0]] = key
    return out


def test_ipv6_literal_keys_in_the_wacz_index_equal_pywbs(tmp_path):
    indexer = Path(sys.executable).parent / "cdx-indexer"
    if not indexer.exists():
        pytest.skip("pywb's cdx-indexer is not installed")
    path = tmp_path / "a.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("t", source="test_ipv6_cdxj")
        for url in URLS:
            arc.add_exchange(Exchange(url=url, captured_at="2024-03-01T12:00:00Z", status=200, payload=b"hi",
                                      resp_headers=[("Content-Type", "text/plain")], session_id=sid))
    export(path, tmp_path / "a.wacz", "wacz")
    export(path, tmp_path / "a.warc.gz", "warc")
    ours = _index(zipfile.ZipFile(tmp_path / "a.wacz").read("indexes/index.cdxj").decode())
    r = subprocess.run([str(indexer), "-j", str(tmp_path / "a.warc.gz")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    pywb = _index(r.stdout)
    assert set(ours) == set(pywb) == set(URLS)  # the URLs themselves keep their brackets
    assert ours == pywb
    assert pywb["http://[::1]:8080/x"] == "::1:8080)/x"
    assert surt_key("http://[::1]:8080/x") == "[::1]:8080)/x"  # (ours, inside the archive only)
