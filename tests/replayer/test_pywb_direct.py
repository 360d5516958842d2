"""Direct mode keeps pywb's URL conventions: ``/<ts>id_/<url>`` is identity (pywb's bytes, for
every URL of pywb's sample ``iana.warc.gz``, against the real pywb on the same WARC) and
``/<ts>/<url>`` is the replayed form (HTML with the determinism runtime)."""

from __future__ import annotations

import subprocess
import time
import urllib.request

import pytest
from cli_runner import run_cli
from pywb_tools import fetch, free_port, ok, tool, ts14

from webfreeze.archives import Archive
from webfreeze.replayer.server import ReplayServer


@pytest.fixture(scope="module")
def iana(samples, tmp_path_factory):
    """(our archive of iana.warc.gz, the base URL of a pywb ``wayback`` serving it as ``iana``)."""
    root = tmp_path_factory.mktemp("pywb-direct")
    archive = root / "iana.wfz"
    ok(run_cli("archive", "import", samples / "iana.warc.gz", "--to", archive, timeout=120))
    wb_manager, wayback = tool("wb-manager"), tool("wayback")
    ok(subprocess.run([str(wb_manager), "init", "iana"], cwd=root, capture_output=True, text=True, timeout=60))
    ok(subprocess.run([str(wb_manager), "add", "iana", str(samples / "iana.warc.gz")], cwd=root,
                      capture_output=True, text=True, timeout=60))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(root / "wayback.log", "wb")
    proc = subprocess.Popen([str(wayback), "-p", str(port), "-b", "127.0.0.1"], cwd=root, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"wayback exited with {proc.returncode}:\n{(root / 'wayback.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("wayback did not answer within 30 s")
                time.sleep(0.2)
        yield archive, base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def captures(archive) -> list[tuple[str, str, str]]:
    """(url, 14-digit timestamp, mime, status) of every GET capture, one per (url, second)."""
    with Archive.open(archive) as arc:
        rows = arc.conn.execute("SELECT url, captured_at, mime, status FROM exchanges WHERE method='GET' ORDER BY id")
        seen, out = set(), []
        for r in rows:
            key = (r["url"], ts14(r["captured_at"]))
            if key not in seen:
                seen.add(key)
                out.append((*key, r["mime"] or "", r["status"]))
    return out


def test_id_is_byte_identical_to_pywb_for_every_url_of_iana(iana, home_dir):
    archive, pywb = iana
    caps = captures(archive)
    assert len(caps) > 20
    problems = []
    with ReplayServer(archive, mode="direct", confdir=home_dir) as srv:  # injection on, as by default
        for url, ts, _mime, _status in caps:
            # as captured: an archived redirect is compared as the redirect, not followed
            p_status, _, p_body = fetch(f"{pywb}/iana/{ts}id_/{url}")
            o_status, _, o_body = fetch(f"{srv.url}/{ts}id_/{url}")
            if (p_status, p_body) != (o_status, o_body):
                problems.append(f"{url} @{ts}: pywb {p_status}/{len(p_body)} bytes, ours {o_status}/{len(o_body)} bytes")
    assert not problems, f"{len(problems)} of {len(caps)} differ:\n" + "\n".join(problems[:20])


def _spellings(url: str) -> list[str]:
    """The same URL as clients write it in a direct path: pip quotes the colon of the links it
    follows, some clients encode the URL whole, a path normalizer folds the double slash."""
    from urllib.parse import quote

    scheme, rest = url.split("://", 1)
    return [f"{scheme}%3A//{rest}", quote(url, safe=""), f"{scheme}:/{rest}"]


@pytest.mark.parametrize("spelled", ["http%3A//host?q=a%26b", "http%3A//host?x=%20", "https:/host?q=%2F",
                                     "https%3A//host?next=%2Fhome%3Fa%3D1", "http%3A%2F%2Fpypi.test%2Fsimple%2Fsix%2F",
                                     "//host/path", "localhost:8000/x", "http%3A//pypi.test/p/six-1.0.whl",
                                     "pypi.test/simple/", "HTTPS%3A%2F%2Fa.test/p%2Fq", "http://a.test/x%20y?b=%2F"])
def test_a_direct_path_names_the_url_pywb_reads_there(spelled):
    """The URL after ``/<ts>id_/`` as pywb's own reader gives it (its scheme in lower case)."""
    from pywb.rewrite.wburl import WbUrl

    from webfreeze.replayer.replay import direct_original

    theirs = WbUrl(f"20300101000000id_/{spelled}").url
    scheme, sep, rest = theirs.partition("://")
    assert direct_original(spelled) == scheme.lower() + sep + rest


def test_an_encoded_scheme_is_read_as_pywb_reads_it(iana, home_dir):
    archive, pywb = iana
    caps = [(url, ts) for url, ts, _mime, status in captures(archive) if status == 200][:6]
    assert caps
    problems = []
    with ReplayServer(archive, mode="direct", confdir=home_dir) as srv:
        for url, ts in caps:
            plain = fetch(f"{srv.url}/{ts}id_/{url}")
            assert plain[0] == 200, url
            for spelled in _spellings(url):
                p_status, _, p_body = fetch(f"{pywb}/iana/{ts}id_/{spelled}")
                o_status, _, o_body = fetch(f"{srv.url}/{ts}id_/{spelled}")
                if (o_status, o_body) != (p_status, p_body) or o_body != plain[2]:
                    problems.append(f"{spelled} @{ts}: pywb {p_status}/{len(p_body)} bytes, ours {o_status}/"
                                    f"{len(o_body)} bytes, plain {len(plain[2])} bytes")
    assert not problems, "\n".join(problems)


def test_the_timestamp_form_serves_pages_injected(iana, home_dir):
    archive, _ = iana
    pages = [(url, ts) for url, ts, mime, status in captures(archive) if mime.startswith("text/html") and status == 200]
    assert pages
    with ReplayServer(archive, mode="direct", confdir=home_dir) as srv:
        for url, ts in pages:
            status, headers, injected = fetch(f"{srv.url}/{ts}/{url}")
            _, _, raw = fetch(f"{srv.url}/{ts}id_/{url}")
            assert status == 200 and "content-encoding" not in headers
            assert b"<script>(function(){" in injected[:4096] and injected != raw, url


@pytest.fixture
def home_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"
