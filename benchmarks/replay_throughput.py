"""Replay throughput: our replay server vs pywb, nginx and mitmdump on the same WARC, same run.

pywb's ``iana.warc.gz`` (from its PyPI sdist) is imported into an archive. Then, each measured
with ``wrk`` (Debian's; 1 thread, 32 keep-alive connections, 8 s) on loopback:

- a rotating mix of every URL of the crawl (pages, CSS, JS, images, fonts: each GET capture that
  pywb answers with 200, at its own timestamp), a wrk Lua script handing out the paths in turn, from
  our direct mode (``/<ts>id_/<url>``, the archived bytes) vs pywb's (``wayback``,
  ``/<coll>/<ts>id_/<url>``): the realistic figure, since neither server sees one URL over and over;
- the ``http://www.iana.org/`` page and the largest font file of the capture, one URL at a time
  (our response cache answers a repeated URL, pywb does not). Goal: >= 20x pywb's requests/s.
  p99 latency is reported.
- rewriting on: the same mix replayed *rewritten* (``/<ts>mp_/<url>``: HTML and CSS with their URLs
  rewritten into the archive, our shim and seal headers; pywb's ``mp_`` is its rewritten content
  without the frame), and the page alone so, ours vs pywb's. Goal: >= 20x pywb's requests/s;
- the same payload bytes as static files from nginx (1 worker process, access log off) as the
  physical reference. Goal: >= 10% of nginx's requests/s.

And over HTTPS through a proxy (CONNECT, TLS with the proxy's CA, keep-alive inside the tunnel):
our proxy mode vs ``mitmdump --server-replay`` holding the same exchanges, driven by a small
asyncio client (16 connections, 8 s, in its own process; wrk cannot use a proxy). Goal: >= 5x.
The same proxy load against proxy mode as it was before direct mode's rewriting and the server's
limits (``BASELINE_COMMIT``, from this repository's history, in its own process too), rounds of
ours and of it alternating, best of each: goal >= 0.95x (within 5%). The baseline carries today's
determinism runtime (``replayer/determinism.py`` of this tree in place of its own), so that both
answer the page with the same bytes (checked): the runtime each HTML answer carries grew from 1.7 kB
to 15 kB after that commit (workers, ordered completions), which costs proxy mode's answers alike
whatever server sends them; the row measures the server.
Our server runs as ``webfreeze replay serve`` in its own process, like every anchor.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

from webfreeze.recorder.proxy import free_port

from . import Context, Row, console

NAME = "replay_throughput"
TITLE = "Replay throughput vs pywb, nginx and mitmdump"
WRK_ARGS = ["-t1", "-c32", "-d8s", "--latency"]
PROXY_CONNS = 16
PROXY_SECONDS = 8.0
# Rounds of ours and of the baseline, in pairs whose order turns each time (ours first, then the
# baseline first: ABBA), so that a machine growing quieter or busier through the rows favours
# neither; an even number balances it exactly.
PROXY_ROUNDS = 4
PAGE = "http://www.iana.org/"


def _wait_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wrk(url: str, script: Path | None = None) -> dict:
    extra = ["-s", str(script)] if script else []
    out = subprocess.run(["wrk", *WRK_ARGS, *extra, url], capture_output=True, text=True, timeout=120).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    p99_ms = float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    errors = re.search(r"Socket errors:.*|Non-2xx or 3xx responses: \d+", out)
    return {"rps": rps, "p99_ms": p99_ms, "errors": errors.group(0) if errors else None}


def rotation_script(path: Path, targets: list[str]) -> Path:
    """A wrk Lua script that requests ``targets`` (paths) in turn, round and round."""
    def lua(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    path.write_text("local paths = {" + ",\n".join(lua(t) for t in targets) + "}\n"
                    "local i = 0\n"
                    "request = function()\n  i = i % #paths + 1\n  return wrk.format(\"GET\", paths[i])\nend\n")
    return path


def mix_urls(archive: Path) -> list[tuple[str, str]]:
    """(14-digit timestamp, url) of every GET 200 capture, one per (url, second), in capture order."""
    from webfreeze.archives import Archive
    from webfreeze.archives.timeutil import to_timestamp14

    with Archive.open(archive) as arc:
        rows = [(r.captured_at, r.url) for r in arc.exchanges(method="GET", status=200, kind="response")]
    out, seen = [], set()
    for captured_at, url in rows:
        key = (to_timestamp14(captured_at), url)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def _status(url: str) -> int:
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=30) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


# ------------------------------------------------------------------------------ HTTPS proxy client
async def _proxy_worker(port: int, host: str, path: str, until: float, counts: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    await writer.drain()
    status = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in status.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"CONNECT refused: {status[:60]!r}")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    await writer.start_tls(ctx, server_hostname=host)
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: identity\r\n\r\n".encode()
    while time.monotonic() < until:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        if not head.startswith(b"HTTP/1.1 200") or not m:
            counts[1] += 1
            raise RuntimeError(f"bad answer {head[:80]!r}")
        await reader.readexactly(int(m.group(1)))
        counts[0] += 1
    writer.close()


def _proxy_load(port: int, url: str, queue) -> None:
    host, path = re.match(r"https://([^/]+)(/.*)", url).groups()

    async def main():
        counts = [0, 0]
        start = time.monotonic()
        until = start + PROXY_SECONDS
        results = await asyncio.gather(*(_proxy_worker(port, host, path, until, counts) for _ in range(PROXY_CONNS)),
                                       return_exceptions=True)
        elapsed = time.monotonic() - start
        errors = [repr(r) for r in results if isinstance(r, BaseException)]
        return {"rps": counts[0] / elapsed, "requests": counts[0], "errors": errors[:3]}

    queue.put(asyncio.run(main()))


def _cpu_seconds(pid: int) -> float | None:
    """A process's CPU time so far, user and system (Linux's /proc); None where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proxy_load(port: int, url: str, pid: int | None = None) -> dict:
    """The proxy load on the server at ``port``; with its ``pid``, also the server's CPU time per
    answer (``server_cpu_us``), which the load on a shared machine moves far less than requests/s."""
    before = _cpu_seconds(pid) if pid else None
    q = multiprocessing.get_context("spawn").Queue()
    p = multiprocessing.get_context("spawn").Process(target=_proxy_load, args=(port, url, q))
    p.start()
    result = q.get(timeout=120)
    p.join(30)
    after = _cpu_seconds(pid) if pid else None
    if before is not None and after is not None and result["requests"]:
        result["server_cpu_us"] = round((after - before) / result["requests"] * 1e6, 1)
    return result


# ------------------------------------------------------------------------------ set-up of each server
def _import(ctx: Context, warc: Path) -> Path:
    from webfreeze.archives.importer import import_files

    dest = ctx.fresh_path("replay-iana.wfz")
    import_files(dest, [warc])
    return dest


def _largest_font(archive: Path) -> tuple[str, bytes, bytes]:
    from webfreeze.archives import Archive

    with Archive.open(archive) as arc:
        fonts = [r for r in arc.exchanges(status=200)
                 if r.url.lower().endswith((".otf", ".ttf")) or ".woff" in r.url.lower() or "font" in r.mime]
        row = max(fonts, key=lambda r: r.response.payload_size)
        page = next(arc.exchanges(url=PAGE, status=200))
        return row.url, row.payload(), page.payload()


def _https_copy(src: Path, dest: Path) -> None:
    """The same exchanges under https URLs (both proxy anchors then match exactly)."""
    from webfreeze.archives import Archive, Exchange, new_archive_atomically

    with Archive.open(src) as a, new_archive_atomically(dest) as b:
        sid = b.new_session("bench", source=str(src))
        for r in a.exchanges(kind="response"):
            b.add_exchange(Exchange(url=r.url.replace("http://", "https://", 1), captured_at=r.captured_at,
                                    status=r.status, reason=r.response.reason,
                                    resp_headers=r.headers, payload=r.payload(),
                                    method=r.method, req_headers=r.request.headers or None,
                                    session_id=sid))


def _flows(archive: Path, dest: Path) -> None:
    """mitmproxy's flow file of the same exchanges, for ``mitmdump --server-replay``."""
    from mitmproxy import connection, http, io

    from webfreeze.archives import Archive

    with Archive.open(archive) as arc, open(dest, "wb") as fh:
        writer = io.FlowWriter(fh)
        for r in arc.exchanges(kind="response", method="GET"):
            req = http.Request.make("GET", r.url, b"", [(k.encode(), v.encode()) for k, v in r.request.headers])
            headers = [(k.encode(), v.encode("latin-1", "replace")) for k, v in r.headers
                       if k.lower() not in ("transfer-encoding", "content-length", "connection", "keep-alive")]
            resp = http.Response.make(r.status, r.payload(), headers)
            host = req.host
            flow = http.HTTPFlow(connection.Client(peername=("127.0.0.1", 1), sockname=("127.0.0.1", 2)),
                                 connection.Server(address=(host, 443)))
            flow.request, flow.response = req, resp
            writer.add(flow)


def _pywb(ctx: Context, warc: Path) -> tuple[subprocess.Popen, int]:
    root = ctx.scratch / "pywb"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    bindir = Path(sys.executable).parent
    subprocess.run([str(bindir / "wb-manager"), "init", "bench"], cwd=root, check=True, capture_output=True)
    subprocess.run([str(bindir / "wb-manager"), "add", "bench", str(warc)], cwd=root, check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen([str(bindir / "wayback"), "-p", str(port), "-b", "127.0.0.1"], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port, proc)
    return proc, port


def _nginx(ctx: Context, files: dict[str, bytes]) -> tuple[subprocess.Popen, int]:
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    prefix = (ctx.scratch / "nginx").resolve()  # nginx wants absolute paths
    shutil.rmtree(prefix, ignore_errors=True)
    (prefix / "root").mkdir(parents=True)
    (prefix / "logs").mkdir()
    for name, data in files.items():
        (prefix / "root" / name).write_bytes(data)
    port = free_port()
    temp = f"client_body_temp_path {prefix}/client_body_temp;\n"  # nginx-light has no other temp paths
    (prefix / "nginx.conf").write_text(
        f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/logs/error.log;\n"
        f"events {{ worker_connections 1024; }}\nhttp {{\naccess_log off;\n{temp}"
        f"server {{ listen 127.0.0.1:{port}; root {prefix}/root; location / {{ }} }}\n}}\n")
    proc = subprocess.Popen([exe, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port, proc)
    return proc, port


# The last commit before direct mode's rewriting and the server's limits (abea5b0): its proxy mode
# is the anchor of "proxy mode as fast as before", measured in the same run (docs/benchmarks.md).
BASELINE_COMMIT = "42f6342147bd0ad0c77c2de12a87f39752dc715d"
# Files of this tree put in the baseline's place: what its answers carry, not how it serves them
# (the determinism runtime injected into every HTML answer; its API is the baseline's).
BASELINE_OVERLAY = ("replayer/determinism.py",)


def baseline_tree(ctx: Context) -> Path | None:
    """``BASELINE_COMMIT``'s webfreeze, laid out as its package (each stage folder a subpackage, as
    its pyproject.toml maps them), for ``PYTHONPATH``, with this tree's :data:`BASELINE_OVERLAY`;
    None without git or this repository's history."""
    import tarfile
    import tomllib

    repo = Path(__file__).resolve().parents[1]
    if not shutil.which("git") or not (repo / ".git").exists():
        return None
    src = ctx.scratch / "baseline-src"
    site = ctx.scratch / "baseline"
    for p in (src, site):
        shutil.rmtree(p, ignore_errors=True)
    src.mkdir()
    got = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", BASELINE_COMMIT],
                         capture_output=True, timeout=120)
    if got.returncode != 0:
        return None
    tar = ctx.scratch / "baseline.tar"
    tar.write_bytes(got.stdout)
    with tarfile.open(tar) as tf:
        tf.extractall(src, filter="data")
    tar.unlink()
    mapping = tomllib.loads((src / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.copytree(src / mapping.pop("webfreeze"), site / "webfreeze")
    for package, folder in mapping.items():
        shutil.copytree(src / folder, site / Path(*package.split(".")))
    shutil.rmtree(src)
    for rel in BASELINE_OVERLAY:  # (stage folder -> its subpackage, as above)
        folder, rest = rel.split("/", 1)
        package = next(p for p, f in mapping.items() if f == folder)
        shutil.copyfile(repo / rel, site / Path(*package.split(".")) / rest)
    return site


def proxy_answer(port: int, url: str) -> bytes:
    """The body of one answer to ``url`` (https) through the proxy at ``port``."""
    host, path = re.match(r"https://([^/]+)(/.*)", url).groups()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = raw.recv(4096)
            if not chunk:
                raise RuntimeError("proxy closed the CONNECT")
            got += chunk
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: identity\r\n"
                        "Connection: close\r\n\r\n".encode())
            data = b""
            while True:
                try:
                    chunk = tls.recv(65536)
                except (ssl.SSLError, OSError):
                    break
                if not chunk:
                    break
                data += chunk
    return data.split(b"\r\n\r\n", 1)[1]


def _ours(archive: Path, mode: str, home: Path, pythonpath: Path | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    if pythonpath is not None:  # (it runs elsewhere, below: no relative paths)
        pythonpath, archive, home = pythonpath.resolve(), archive.resolve(), home.resolve()
    env = dict(os.environ, WEBFREEZE_HOME=str(home))
    if pythonpath is not None:  # another version of webfreeze (the baseline), found before the installed one
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "replay", "serve", str(archive), "--mode", mode,
                             "--port", str(port), "--miss-report", str(home / "misses.jsonl")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=pythonpath)  # (not the repository: its webfreeze/ would come first)
    _wait_port(port, proc)
    return proc, port


def _mitmdump(flows: Path, home: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    exe = Path(sys.executable).parent / "mitmdump"
    proc = subprocess.Popen([str(exe), "-q", "--listen-host", "127.0.0.1", "-p", str(port), "--server-replay",
                             str(flows), "--set", "server_replay_reuse=true", "--set", "server_replay_extra=404",
                             "--set", "connection_strategy=lazy", "--set", f"confdir={home / 'mitmproxy'}",
                             "--set", "ssl_insecure=true", "--set", "upstream_cert=false"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port, proc)
    return proc, port


def run(ctx: Context) -> list[Row]:
    from webfreeze.samples import pywb_sample_archive

    if not shutil.which("wrk"):
        raise RuntimeError("wrk is not installed (make bench installs it with apt-get)")
    warc = pywb_sample_archive() / "warcs" / "iana.warc.gz"
    archive = _import(ctx, warc)
    font_url, font, page = _largest_font(archive)
    home = ctx.scratch / "replay-home"
    home.mkdir(exist_ok=True)
    details = ctx.details.setdefault(NAME, {"font": font_url, "font_bytes": len(font), "page_bytes": len(page)})
    rows: list[Row] = []
    targets = {"page": PAGE, "font": font_url}

    # The URL mix: every capture both servers can answer with its archived 200 (pywb answers a few
    # URLs with its own redirect to a canonical form; those are left out of both sides).
    mix = mix_urls(archive)
    proc, port = _pywb(ctx, warc)
    try:
        mix = [(ts, u) for ts, u in mix if _status(f"http://127.0.0.1:{port}/bench/{ts}id_/{u}") == 200]
        mix_mp = [(ts, u) for ts, u in mix if _status(f"http://127.0.0.1:{port}/bench/{ts}mp_/{u}") == 200]
    finally:
        _stop(proc)
    details["mix_urls"] = len(mix)
    details["rewritten_mix_urls"] = len(mix_mp)
    scripts = {"webfreeze": rotation_script(ctx.scratch / "mix-ours.lua", [f"/{ts}id_/{u}" for ts, u in mix]),
               "pywb": rotation_script(ctx.scratch / "mix-pywb.lua", [f"/bench/{ts}id_/{u}" for ts, u in mix])}
    rewritten = {"webfreeze": rotation_script(ctx.scratch / "mix-ours-mp.lua", [f"/{ts}mp_/{u}" for ts, u in mix_mp]),
                 "pywb": rotation_script(ctx.scratch / "mix-pywb-mp.lua", [f"/bench/{ts}mp_/{u}" for ts, u in mix_mp])}

    measured: dict = {}
    servers = [
        ("webfreeze", lambda: _ours(archive, "direct", home), lambda port, url: f"http://127.0.0.1:{port}/2014id_/{url}"),
        ("pywb", lambda: _pywb(ctx, warc), lambda port, url: f"http://127.0.0.1:{port}/bench/2014id_/{url}"),
        ("nginx", lambda: _nginx(ctx, {"page.html": page, "font.bin": font}),
         lambda port, url: f"http://127.0.0.1:{port}/" + ("page.html" if url == PAGE else "font.bin")),
    ]
    for name, start, url_of in servers:
        proc, port = start()
        try:
            if name in scripts:
                console.print(f"  wrk {name} mix of {len(mix)} URLs")
                measured[(name, "mix")] = wrk(f"http://127.0.0.1:{port}/", scripts[name])
                # steady state, as for the other rows: each URL of the mix asked once before (a first
                # rewrite fills the server's cache; 32 connections on a cold cache time out on a loaded machine)
                prefix = "/bench" if name == "pywb" else ""
                for ts, u in mix_mp:
                    _status(f"http://127.0.0.1:{port}{prefix}/{ts}mp_/{u}")
                console.print(f"  wrk {name} rewritten mix of {len(mix_mp)} URLs")
                measured[(name, "rewritten")] = wrk(f"http://127.0.0.1:{port}/", rewritten[name])
            for what, url in targets.items():
                console.print(f"  wrk {name} {what}")
                measured[(name, what)] = wrk(url_of(port, url))
            if name in scripts:  # the page as people open it: rewritten, with the shim and the seal
                console.print(f"  wrk {name} page rewritten")
                measured[(name, "page rewritten")] = wrk(url_of(port, PAGE).replace("/2014id_/", "/2014mp_/"))
        finally:
            _stop(proc)
    details["direct"] = {f"{n} {w}": v for (n, w), v in measured.items()}
    for name in scripts:
        # (pywb's rewriting, the slower side, may time a request out under wrk's 32 connections: kept in details)
        for which in ("mix", "rewritten", "page rewritten") if name == "webfreeze" else ("mix",):
            if measured[(name, which)]["errors"]:
                raise RuntimeError(f"{name} answered the {which} URL mix with errors: {measured[(name, which)]['errors']}")
    ours, pywb = measured[("webfreeze", "mix")], measured[("pywb", "mix")]
    rows.append(Row(f"{NAME} direct", f"mix of {len(mix)} URLs: requests/s", ours["rps"], pywb["rps"], "pywb id_",
                    "req/s", "higher", 20, note="every URL of the crawl in turn"))
    rows.append(Row(f"{NAME} direct", f"mix of {len(mix)} URLs: p99 latency", ours["p99_ms"], pywb["p99_ms"],
                    "pywb id_", "ms", "lower"))
    ours, pywb = measured[("webfreeze", "rewritten")], measured[("pywb", "rewritten")]
    rows.append(Row(f"{NAME} direct", f"rewriting on: mix of {len(mix_mp)} URLs: requests/s", ours["rps"], pywb["rps"],
                    "pywb mp_", "req/s", "higher", 20, note="HTML and CSS rewritten, sealed"))
    ours, pywb = measured[("webfreeze", "page rewritten")], measured[("pywb", "page rewritten")]
    rows.append(Row(f"{NAME} direct", "rewriting on: page: requests/s", ours["rps"], pywb["rps"], "pywb mp_", "req/s",
                    "higher", 20, note="/<ts>/<url> as a browser opens it"))
    rows.append(Row(f"{NAME} direct", "rewriting on: page: p99 latency", ours["p99_ms"], pywb["p99_ms"], "pywb mp_",
                    "ms", "lower"))
    for what in targets:
        ours, pywb, nginx = (measured[(n, what)] for n in ("webfreeze", "pywb", "nginx"))
        rows.append(Row(f"{NAME} direct", f"{what}: requests/s", ours["rps"], pywb["rps"], "pywb id_", "req/s",
                        "higher", 20))
        rows.append(Row(f"{NAME} direct", f"{what}: p99 latency", ours["p99_ms"], pywb["p99_ms"], "pywb id_", "ms",
                        "lower"))
        rows.append(Row(f"{NAME} direct", f"{what}: requests/s vs static files", ours["rps"], nginx["rps"],
                        "nginx static", "req/s", "higher", 0.1))
    return rows + proxy_rows(ctx, archive, home, details)


def proxy_rows(ctx: Context, archive: Path, home: Path, details: dict) -> list[Row]:
    """The HTTPS proxy rows: ours vs mitmdump, and vs proxy mode at ``BASELINE_COMMIT``."""
    rows: list[Row] = []
    https_archive = ctx.fresh_path("replay-iana-https.wfz")
    _https_copy(archive, https_archive)
    flows = ctx.scratch / "iana.flows"
    _flows(https_archive, flows)
    baseline = baseline_tree(ctx)
    starts = {"webfreeze": lambda: _ours(https_archive, "proxy", home),
              "mitmdump": lambda: _mitmdump(flows, home)}
    if baseline is not None:
        starts["baseline"] = lambda: _ours(https_archive, "proxy", home, pythonpath=baseline)
    # ours and the baseline, PROXY_ROUNDS each in pairs of turning order (ABBA), the best round of
    # each kept: the two differ by a few per cent at most, less than the machine's drift between
    # two runs in a row (in the order ours-then-baseline every time, a machine quietening through
    # the rows gave the baseline the last, quietest round: 2026-12-02, rounds 15.2k/15.2k/17.1k req/s
    # against 13.4k/16.9k/20.3k)
    rounds = {name: [] for name in starts}
    order = [name for i in range(PROXY_ROUNDS)
             for name in (("webfreeze", "baseline") if i % 2 == 0 else ("baseline", "webfreeze"))] + ["mitmdump"]
    answers: dict[str, bytes] = {}
    for name in order:
        if name not in starts:
            continue
        proc, port = starts[name]()
        try:
            if name != "mitmdump" and name not in answers:
                answers[name] = proxy_answer(port, PAGE.replace("http://", "https://"))
            console.print(f"  https proxy load: {name}")
            rounds[name].append(proxy_load(port, PAGE.replace("http://", "https://"), proc.pid))
        finally:
            _stop(proc)
    details["proxy_page_bytes"] = {name: len(body) for name, body in answers.items()}
    if "baseline" in answers and answers["baseline"] != answers["webfreeze"]:
        raise RuntimeError(f"the proxy-mode baseline answers the page with other bytes than ours "
                           f"({len(answers['baseline'])} vs {len(answers['webfreeze'])}): the comparison would not hold")
    for name, got in rounds.items():
        for r in got:
            if r["errors"]:
                raise RuntimeError(f"{name} proxy load had errors: {r['errors']}")
    proxy_results = {name: max(got, key=lambda r: r["rps"]) for name, got in rounds.items()}
    details["proxy_https"] = proxy_results
    details["proxy_https_rounds"] = {name: [round(r["rps"]) for r in got] for name, got in rounds.items()}
    details["proxy_https_server_cpu_us"] = {name: [r.get("server_cpu_us") for r in got] for name, got in rounds.items()}
    rows.append(Row(f"{NAME} proxy", "HTTPS page through proxy: requests/s", proxy_results["webfreeze"]["rps"],
                    proxy_results["mitmdump"]["rps"], "mitmdump --server-replay", "req/s", "higher", 5))
    if baseline is not None:
        rows.append(Row(f"{NAME} proxy", "HTTPS page through proxy: requests/s vs before direct-mode rewriting",
                        proxy_results["webfreeze"]["rps"], proxy_results["baseline"]["rps"],
                        f"proxy mode at {BASELINE_COMMIT[:7]}", "req/s", "higher", 0.95,
                        note="same load and answer bytes, best of rounds in ABBA order"))
        cpu = {name: [r["server_cpu_us"] for r in rounds[name] if r.get("server_cpu_us")]
               for name in ("webfreeze", "baseline")}
        if all(cpu.values()):  # (Linux): the same comparison by the server's CPU, the least of each's rounds
            rows.append(Row(f"{NAME} proxy", "HTTPS page through proxy: server CPU per answer vs before direct-mode "
                            "rewriting", min(cpu["webfreeze"]), min(cpu["baseline"]),
                            f"proxy mode at {BASELINE_COMMIT[:7]}", "us", "lower", 1.05,
                            note="the same rounds; least of each"))
    else:
        console.print("  (no git history here: the proxy-mode baseline row is left out)")
    return rows
