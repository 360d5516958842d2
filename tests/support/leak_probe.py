"""Watching a replayed page that tries to reach the network: a loopback canary that counts every
connection (on 127.0.0.1 and [::1], one port), a stub DNS server that logs every name asked of it,
the way to run a process whose name lookups go to that stub (a mount namespace whose
/etc/resolv.conf names it: `unshare -m`, as root), and the page itself, which reaches out the 17
ways of issue 45. Run as a script, it opens the page in a client under watch:

    python leak_probe.py plain URL CONTROL_NAME   # a plain headless Chromium (Playwright's defaults)
    python leak_probe.py env ARCHIVE BACKEND URL  # the agent environment on that backend
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

LEAK_HOST = "cdn.webfreeze-canary.net"  # the page's public host name: its lookups are watched
PAGE_HOST = "www.webfreeze-canary.net"
CONTROL_HOST = "control.webfreeze-canary.net"  # looked up on purpose: shows the watch sees lookups


def leak_page(port: int) -> str:
    """The page: 17 ways out to the canary at ``port`` (127.0.0.1, localhost, [::1]) and to
    :data:`LEAK_HOST`. Its title becomes ``settled`` once the delayed fetch has been answered."""
    c4, cl, c6, pub = f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", LEAK_HOST
    return f"""<!doctype html><html><head><title>leak</title>
<meta http-equiv="refresh" content="2; url=http://{c4}/refresh">
<link rel="prefetch" href="http://{pub}/prefetch">
<link rel="prefetch" href="http://{c4}/prefetch">
<link rel="preconnect" href="http://{c6}">
<link rel="dns-prefetch" href="//{pub}">
<style>@import url("http://{cl}/import.css");
@font-face {{ font-family: leak; src: url(http://{c6}/font.woff) }}
body {{ font-family: leak, sans-serif }}</style>
</head><body>
<p>Seventeen ways out, none taken.</p>
<img src="http://{c4}/img.png"> <img src="http://{pub}/logo.png">
<script src="http://{cl}/script.js"></script>
<iframe src="http://{cl}/frame"></iframe>
<a href="http://{pub}/page">a link</a>
<script>
function quiet(p) {{ return Promise.resolve(p).catch(function () {{}}); }}
quiet(fetch("http://{c4}/fetch1"));
quiet(fetch("http://{cl}/fetch2", {{mode: "no-cors"}}));
quiet(fetch("http://{c6}/fetch3"));
quiet(fetch("http://{pub}/fetch4"));
try {{ var x = new XMLHttpRequest(); x.open("GET", "http://{c6}/xhr"); x.send(); }} catch (e) {{}}
try {{ new WebSocket("ws://{c4}/ws"); }} catch (e) {{}}
try {{ new EventSource("http://{cl}/events"); }} catch (e) {{}}
try {{ navigator.sendBeacon("http://{c4}/beacon", "x"); }} catch (e) {{}}
try {{ navigator.serviceWorker.register("sw.js").catch(function () {{}}); }} catch (e) {{}}
setTimeout(function () {{
  quiet(fetch("http://{pub}/late"));
  quiet(fetch("http://{c4}/late")).then(function () {{ document.title = "settled"; }});
}}, 300);
</script></body></html>"""


def service_worker(port: int) -> str:
    return f'fetch("http://127.0.0.1:{port}/from-service-worker");\n'


class Canary:
    """Counts every connection to one port on 127.0.0.1 and on [::1] (and answers nothing)."""

    def __init__(self):
        self.hits: list[str] = []
        self.socks = [socket.socket(socket.AF_INET), socket.socket(socket.AF_INET6)]
        self.socks[0].bind(("127.0.0.1", 0))
        self.port = self.socks[0].getsockname()[1]
        self.socks[1].bind(("::1", self.port))
        self._stop = threading.Event()
        self._threads = []
        for s in self.socks:
            s.listen(64)
            s.settimeout(0.2)
            t = threading.Thread(target=self._run, args=(s,), daemon=True)
            t.start()
            self._threads.append(t)

    def _run(self, sock):
        while not self._stop.is_set():
            try:
                conn, addr = sock.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(1)
            try:
                first = conn.recv(200).split(b"\r\n", 1)[0].decode("latin-1", "replace")
            except OSError:
                first = ""
            self.hits.append(f"{addr[0]} {first}")
            conn.close()

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join()
        for s in self.socks:
            s.close()


class StubDns:
    """A DNS server on port 53 (UDP and TCP) of a loopback address of its own (``address``: one
    drawn at random in 127.0.0.0/8 unless given, so two test runs at once do not collide) that logs
    every question and answers each with NXDOMAIN."""

    def __init__(self, address: str | None = None):
        self.names: list[str] = []
        tries = [address] if address else [f"127.{random.randint(1, 254)}.{random.randint(0, 255)}."
                                           f"{random.randint(1, 254)}" for _ in range(20)]
        for i, self.address in enumerate(tries):
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                self.udp.bind((self.address, 53))
                self.tcp.bind((self.address, 53))
                break
            except OSError:
                self.udp.close()
                self.tcp.close()
                if i == len(tries) - 1:
                    raise
        self.udp.settimeout(0.2)
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._serve_udp, self._serve_tcp)]
        for t in self._threads:
            t.start()

    def _answer(self, query: bytes) -> bytes | None:
        if len(query) < 12:
            return None
        labels, i = [], 12
        while i < len(query) and query[i]:
            n = query[i]
            labels.append(query[i + 1:i + 1 + n].decode("ascii", "replace"))
            i += 1 + n
        self.names.append(".".join(labels).lower())
        question = query[12:i + 5]
        return query[:2] + struct.pack(">HHHHH", 0x8183, 1, 0, 0, 0) + question

    def _serve_udp(self):
        while not self._stop.is_set():
            try:
                query, addr = self.udp.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            reply = self._answer(query)
            if reply:
                self.udp.sendto(reply, addr)

    def _serve_tcp(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(1)
                try:
                    size = struct.unpack(">H", conn.recv(2))[0]
                    reply = self._answer(conn.recv(size))
                    if reply:
                        conn.sendall(struct.pack(">H", len(reply)) + reply)
                except (OSError, struct.error):
                    pass

    def close(self):
        self._stop.set()
        for t in self._threads:
            t.join()
        self.udp.close()
        self.tcp.close()


def watched_prefix(folder, address: str) -> list[str] | None:
    """A command prefix under which name lookups go to the :class:`StubDns` at ``address`` (a mount
    namespace whose /etc/resolv.conf names it), or None where this machine cannot make one (not
    root, no unshare)."""
    if not shutil.which("unshare") or os.geteuid() != 0:
        return None
    conf = os.path.join(folder, "resolv.conf")
    with open(conf, "w") as fh:
        fh.write(f"nameserver {address}\noptions attempts:1 timeout:1\n")
    prefix = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', conf]
    probe = subprocess.run([*prefix, "cat", "/etc/resolv.conf"], capture_output=True, text=True)
    return prefix if probe.returncode == 0 and address in probe.stdout else None


def _plain(url: str, control: str) -> dict:
    from playwright.sync_api import Error, sync_playwright

    from webfreeze.simulator.browser import chromium_path

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), headless=True)  # no flags of ours
        control_page = browser.new_page()
        try:  # the control: a lookup the stub must see
            control_page.goto(f"http://{control}/", timeout=15_000)
        except Error:
            pass
        control_page.close()
        page = browser.new_page()
        page.goto(url, wait_until="load", timeout=30_000)
        page.wait_for_function("document.title === 'settled'", timeout=30_000)
        page.wait_for_url("**/refresh", timeout=30_000)  # the meta refresh went, inside the archive
        final = page.url
        browser.close()
    return {"final_url": final}


def _env(archive: str, backend: str, url: str) -> dict:
    import webfreeze as wf

    env = wf.WebEnv(wf.EnvConfig(archive, backend=backend))
    try:
        env.reset(options={"task": {"id": "leak", "instruction": "", "start_url": url, "ground_truth": {}}})
        obs = None
        for _ in range(3):
            obs = env.step("noop(1000)")[0]
        # the meta refresh (2 s) runs on the browser's own clock, not the pumped timers: wait for it
        # (up to 60 s, a step at a time) however fast the steps came
        deadline = time.monotonic() + 60
        while backend == "browser" and not obs["url"].endswith("/refresh") and time.monotonic() < deadline:
            time.sleep(0.2)
            obs = env.step("noop(100)")[0]
        # What the replay answered: the page's own document, and the page's requests it had no
        # answer for (the canary's URLs, asked of the replay: proof the page ran in it)
        traj = env.trajectory(stopped=True)
        provenance = [traj.get("replay", {}).get("start") or {}] + [s.get("replay") or {} for s in traj["steps"]]
        return {"url": obs["url"] if isinstance(obs, dict) else None,
                "page": sorted({a["level"] for p in provenance for a in p.get("answers", ()) if a["url"] == url}),
                "misses": sorted({f["url"] for p in provenance for f in p.get("flagged", ())
                                  if f["level"] == "miss"})}
    finally:
        env.close()


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "plain":
        out = _plain(sys.argv[2], sys.argv[3])
    elif what == "env":
        out = _env(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown probe {what}")
    print(json.dumps(out))
