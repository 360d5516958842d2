"""``bench run --executor ray``: the run folder equals the local process pool's (timings aside) on
the demo suite, with a Ray started for the run and on a real two-node Ray cluster started on this
machine with ``ray start`` (each node in a network namespace the test makes, joined by a veth pair and
closed to everything else); a worker killed mid-run is replaced and its episode run again, and a hung
episode ends as an error at its timeout."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from webfreeze.demo import SUITE

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

SUPPORT = Path(__file__).resolve().parents[1] / "support"
BROWSER_TASKS = ("scholar-site-info-001", "scholar-paper-retrieval-001", "shop-001", "booking-001")


def _env(**more) -> dict:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **more)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SUPPORT), env.get("PYTHONPATH")) if p)
    return env


def _bench(out: Path, *args, env=None, timeout=300, prefix=()) -> subprocess.CompletedProcess:
    proc = subprocess.run([*prefix, sys.executable, "-m", "webfreeze", "bench", "run", SUITE, "--out", str(out),
                           "--no-report", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env or _env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _comparable(run: Path, skip=()) -> tuple:
    """The run folder as bytes, timings aside: every trajectory, tasks.jsonl, and the manifest's
    comparable part (without times and circumstances)."""
    from webfreeze.eval.report import build_report, report_json
    from webfreeze.simulator.trajectory import dumps, without_timings

    trajectories = {p.name: dumps(without_timings(json.loads(p.read_text())))
                    for p in sorted((run / "trajectories").glob("*.json")) if p.stem not in skip}
    report, _ = build_report(run)
    report.pop("timings")
    if skip:  # the run-level aggregates count the skipped tasks: compared task by task instead
        report.pop("summary")
        report.pop("replay", None)
        report["tasks"] = {k: v for k, v in report["tasks"].items() if k not in skip}
    return trajectories, (run / "tasks.jsonl").read_bytes(), report_json(report)


@pytest.fixture(scope="module")
def local_text(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "text"
    _bench(out, "--agent", "reference", "--backend", "text", "--workers", "2")
    return out


def test_a_ray_run_equals_the_local_run_text_and_browser(local_text, tmp_path):
    ray_text = tmp_path / "ray-text"
    _bench(ray_text, "--agent", "reference", "--backend", "text", "--workers", "2", "--executor", "ray")
    manifest = json.loads((ray_text / "manifest.json").read_text())
    assert manifest["complete"] and manifest["circumstances"]["executor"] == "ray"
    assert manifest["circumstances"]["retries"] == {"worker_died": 0, "provider": 0, "timeouts": 0}
    assert _comparable(ray_text) == _comparable(local_text)
    proc = subprocess.run([sys.executable, "-m", "webfreeze", "bench", "compare", str(local_text), str(ray_text)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the browser backend, on a few tasks of each site
    tasks = [a for t in BROWSER_TASKS for a in ("--tasks", t)]
    local_b, ray_b = tmp_path / "local-browser", tmp_path / "ray-browser"
    _bench(local_b, "--agent", "reference", "--backend", "browser", "--workers", "2", *tasks)
    _bench(ray_b, "--agent", "reference", "--backend", "browser", "--workers", "2", "--executor", "ray", *tasks)
    assert _comparable(ray_b) == _comparable(local_b)


# --- a two-node cluster, in network namespaces made by the test -------------------------------------
# On Linux Ray resolves a 127.0.0.1 node or cluster address to the machine's routable one (and with
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which keeps it on loopback, refuses a second node); this
# workplace allows only loopback and addresses inside network namespaces a test makes itself. So
# each node gets a network namespace of its own, made here: its loopback and one end of a veth pair,
# 10.213.0.1/30 (head) and 10.213.0.2/30 (second node), no other link and no route beyond the pair.
# Every Ray address is then one of the pair's, the driver runs in the head's namespace, and whatever
# Ray tries beyond them (its cloud-metadata probes) finds no route. Namespaces, and the veth pair with
# them, are deleted at the end, after every process left inside them (only this test's) is killed.

HEAD_IP, NODE_IP = "10.213.0.1", "10.213.0.2"
RAY_PORT = 6379  # each namespace has ports of its own: a fixed port cannot collide with the machine's


def _ip(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _in(ns: str) -> list:
    return ["ip", "netns", "exec", ns]


def _ray(*args) -> list:
    return [sys.executable, "-m", "ray.scripts.scripts", *args]


def _kill_inside(ns: str) -> None:
    """SIGKILL every process left in namespace ``ns`` (one this test made: they are the test's)."""
    for pid in _ip("netns", "pids", ns).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextlib.contextmanager
def _namespace_pair():
    """Two network namespaces joined by a veth pair and closed to everything else; skips the test
    when this machine cannot make them (no ``ip``, not root / no CAP_NET_ADMIN, no veth)."""
    if sys.platform != "linux" or not shutil.which("ip"):
        pytest.skip("a two-node Ray cluster needs network namespaces (Linux, iproute2's `ip`)")
    tag = secrets.token_hex(3)
    names = (f"wfray-{tag}-head", f"wfray-{tag}-node")
    made = []
    try:
        for ns in names:
            r = _ip("netns", "add", ns)
            if r.returncode:
                pytest.skip(f"cannot make a network namespace (needs root or CAP_NET_ADMIN): {r.stderr.strip()}")
            made.append(ns)
        r = _ip("link", "add", f"wfh{tag}", "netns", names[0], "type", "veth", "peer", "name", f"wfn{tag}",
                "netns", names[1])
        if r.returncode:
            pytest.skip(f"cannot make a veth pair between network namespaces: {r.stderr.strip()}")
        for ns, link, addr in ((names[0], f"wfh{tag}", HEAD_IP), (names[1], f"wfn{tag}", NODE_IP)):
            for args in (("addr", "add", f"{addr}/30", "dev", link), ("link", "set", link, "up"),
                         ("link", "set", "lo", "up")):
                r = _ip("-n", ns, *args)
                assert r.returncode == 0, f"ip -n {ns} {' '.join(args)}: {r.stderr.strip()}"
        yield names
    finally:
        for ns in made:
            _kill_inside(ns)
        for ns in made:
            _ip("netns", "del", ns)


def _node_id(ns: str) -> str | None:
    """The Ray node id of the raylet running in namespace ``ns`` (from its command line)."""
    for pid in _ip("netns", "pids", ns).stdout.split():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for a in args:
            if a.startswith(b"--node_id="):
                return a.split(b"=", 1)[1].decode()
    return None


def _host(addr: str) -> str:
    """The host part of an address as `ss` prints it (``[::ffff:10.0.0.1]:80``, ``*%lo:53``, ...)."""
    host = addr.rsplit(":", 1)[0].strip("[]").split("%")[0]
    return host.removeprefix("::ffff:")


@contextlib.contextmanager
def _watch_sockets(namespaces):
    """Every (namespace, local host, peer host) that `ss -tuna` shows in ``namespaces`` while the block
    runs, sampled every 0.2 s."""
    seen: set = set()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for ns in namespaces:
                out = subprocess.run([*_in(ns), "ss", "-tunaH"], capture_output=True, text=True, timeout=30).stdout
                for line in out.splitlines():
                    cols = line.split()
                    if len(cols) >= 6:
                        seen.add((ns, _host(cols[4]), _host(cols[5])))
            stop.wait(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=60)


@pytest.fixture
def two_node_cluster(tmp_path):
    """A Ray head and a second node started with `ray start` on this machine, one CPU each, each in a
    network namespace of its own (see above); stopped at the end: SIGTERM to the two `ray start
    --block` processes (each stops its node), then SIGKILL to whatever is left in the namespaces.
    (Not `ray stop`: it stops every Ray on the machine, other runs' too.)"""
    if not shutil.which("ss"):
        pytest.skip("a two-node Ray cluster test needs iproute2's `ss` to watch its sockets")
    with _namespace_pair() as (head_ns, node_ns):
        # the cluster's token (Ray 2.5x+ clusters require one) for both nodes and the run's driver
        # (and, for the ray_agents:Gathered agent, the folder where each worker's first episode
        # waits for the other's: the nodes' workers inherit their raylet's environment)
        env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
                   WF_GATHER_DIR=str(tmp_path / "gathered"), WF_GATHER_COUNT="2")
        address = f"{HEAD_IP}:{RAY_PORT}"
        common = ["--num-cpus", "1", "--object-store-memory", str(100 * 2**20), "--block", "--disable-usage-stats"]
        procs, logs = [], []
        temps = [tempfile.mkdtemp(prefix="wfray-", dir="/tmp") for _ in range(2)]  # Ray's socket paths: short

        def start(ns, *args):
            log = tmp_path / f"ray-start-{len(procs)}.log"
            logs.append(log)
            with log.open("wb") as f:
                procs.append(subprocess.Popen([*_in(ns), *_ray("start", *args, *common)], env=env, stdout=f,
                                              stderr=subprocess.STDOUT, start_new_session=True))

        def wait_for(nodes: int):
            deadline = time.monotonic() + 150
            while True:
                status = subprocess.run([*_in(head_ns), *_ray("status", "--address", address)], capture_output=True,
                                        text=True, env=env, timeout=60)
                if status.returncode == 0 and status.stdout.count(" node_") >= nodes:
                    return
                dead = [p for p in procs if p.poll() is not None]
                assert not dead and time.monotonic() < deadline, \
                    f"the Ray cluster did not reach {nodes} node(s): " + " | ".join(
                        log.read_text(errors="replace")[-600:] for log in logs)
                time.sleep(1)

        try:
            start(head_ns, "--head", "--node-ip-address", HEAD_IP, "--port", str(RAY_PORT), "--temp-dir", temps[0],
                  "--include-dashboard", "false")
            wait_for(1)
            start(node_ns, "--address", address, "--node-ip-address", NODE_IP, "--temp-dir", temps[1])
            wait_for(2)
            yield {"address": address, "env": env, "namespaces": (head_ns, node_ns),
                   "node_ids": (_node_id(head_ns), _node_id(node_ns))}
        finally:
            # the second node first, then the head; `ray start --block` drains its node and stops its
            # processes on SIGTERM (in ~3 s: sent to the whole group, the GCS would go first and the
            # drain wait 30 s for it); what is left is killed with the namespaces
            for p in reversed(procs):
                if p.poll() is None:
                    p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=30)
            for t in temps:
                shutil.rmtree(t, ignore_errors=True)


def test_a_run_on_a_two_node_cluster_equals_the_local_run(two_node_cluster, tmp_path):
    """Both nodes play episodes and the run equals a local one. The agent is the reference agent whose
    workers' first episodes wait for each other (ray_agents:Gathered), so a node whose worker starts
    late still gets an episode: the executor hands them out as workers ask, and a worker that started
    early could otherwise finish the suite's quick text episodes alone."""
    cluster = two_node_cluster
    agent = ("--agent", "ray_agents:Gathered", "--backend", "text")
    local = tmp_path / "local"
    _bench(local, *agent, "--workers", "2")  # (no WF_GATHER_DIR here: the plain reference agent)
    head_ns, node_ns = cluster["namespaces"]
    # the namespaces reach each other and nothing else
    for ns in cluster["namespaces"]:
        assert [r.split()[0] for r in _ip("-n", ns, "-4", "route", "show").stdout.splitlines()] == ["10.213.0.0/30"]
        for outside in ("8.8.8.8", "169.254.169.254", "2001:4860:4860::8888"):
            assert _ip("-n", ns, "route", "get", outside).returncode != 0, f"{ns} has a route to {outside}"
    out = tmp_path / "cluster"
    with _watch_sockets(cluster["namespaces"]) as seen:
        # the driver in the head's namespace, as a user's driver on the head machine
        _bench(out, *agent, "--workers", "2", "--executor", "ray",
               "--ray-address", cluster["address"], env=cluster["env"], prefix=_in(head_ns))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"]
    circumstances = manifest["circumstances"]
    assert circumstances["ray_nodes"] == 2
    # both nodes played episodes: the run's episodes per node, keyed by the raylets' own node ids
    by_node = circumstances["ray_episodes_by_node"]
    assert set(by_node) == set(cluster["node_ids"]), (by_node, cluster["node_ids"])
    assert all(n > 0 for n in by_node.values())
    assert sum(by_node.values()) == len(list((out / "trajectories").glob("*.json")))
    assert _comparable(out) == _comparable(local)
    # every socket the cluster and the driver had was on loopback or the pair's addresses, and the
    # nodes did talk across the pair
    allowed = {"127.0.0.1", "::1", HEAD_IP, NODE_IP, "*", "0.0.0.0", "::"}
    assert {s for s in seen if not {s[1], s[2]} <= allowed} == set()
    assert any({s[1], s[2]} == {HEAD_IP, NODE_IP} for s in seen), sorted(seen)


def test_a_killed_worker_is_replaced_and_a_hung_episode_times_out(tmp_path):
    """The timeout ends the episode the test hangs (Flaky's, for ten minutes), and no other: an
    episode's time starts when a started actor takes it (a new actor's start-up, slow on a loaded
    machine, is not counted), and the ordinary episodes here take well under a second of the 30."""
    tasks = ("--tasks", "scholar-site-info-00*", "--tasks", "shop-00*")
    agent = ("--agent", "ray_agents:Flaky", "--backend", "text")
    plain = tmp_path / "plain"
    _bench(plain, *agent, *tasks, "--workers", "2")
    out = tmp_path / "ray"
    marker = tmp_path / "died"
    _bench(out, *agent, *tasks, "--workers", "2", "--executor", "ray", "--episode-timeout", "30",
           env=_env(WF_DIE_TASK="scholar-site-info-002", WF_DIE_MARKER=str(marker), WF_HANG_TASK="shop-003"))
    assert marker.is_file()  # a worker really was killed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"]
    assert manifest["circumstances"]["retries"] == {"worker_died": 1, "provider": 0, "timeouts": 1}
    hung = json.loads((out / "trajectories" / "shop-003.json").read_text())
    assert hung["end"]["reason"] == "error" and hung["end"]["cause"] == "timeout"
    assert "timeout of 30 s" in hung["end"]["detail"]
    # every other episode, the killed one included, is the plain run's
    assert _comparable(out, skip={"shop-003"}) == _comparable(plain, skip={"shop-003"})
