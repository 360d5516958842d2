"""``bench run --executor ray``: the run folder equals the local process pool's (timings aside) on
the demo suite, with a Ray started for the run and on a real two-node Ray cluster started on this
machine with ``ray start`` (loopback only); a worker killed mid-run is replaced and its episode run
again, and a hung episode ends as an error at its timeout."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from webfreeze.demo import SUITE

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
BROWSER_TASKS = ("scholar-site-info-001", "scholar-paper-retrieval-001", "shop-001", "booking-001")


def _env(**more) -> dict:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **more)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH")) if p)
    return env


def _bench(out: Path, *args, env=None, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "webfreeze", "bench", "run", SUITE, "--out", str(out),
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
    if skip:
        report.pop("summary")
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


@pytest.fixture
def two_node_cluster():
    """A Ray head and a second node on this machine, loopback only, each one CPU; stopped (by the
    ids of the `ray start --block` processes this fixture started) at the end."""
    # LEAD ENGINEER: disabled. This workplace allows traffic to loopback addresses only (127.0.0.0/8,
    # ::1); a node that Ray moves to the machine's own routable address (192.0.2.2 here) breaks that
    # rule even on one host. Do not re-enable unless every node and the driver provably stay on
    # 127.0.0.1 (check with `ss -tnp` while it runs); otherwise leave this test skipped.
    pytest.skip("a two-node Ray cluster here moves off loopback; not allowed in this workplace")
    temp = tempfile.mkdtemp(prefix="wfray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = _free_port()
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--block", "--disable-usage-stats"]
    # The cluster's token (Ray 2.5x+ clusters require one) for every node and the run's driver. The
    # nodes are told 127.0.0.1, but Ray swaps that for this machine's own routable address in a
    # multi-node cluster (and refuses a second node when told not to): traffic stays on this host.
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    procs = []
    try:
        procs.append(subprocess.Popen([_ray_cli(), "start", "--head", "--port", str(port), "--temp-dir", temp,
                                       "--include-dashboard", "false", "--dashboard-agent-listen-port", str(_free_port()),
                                       *common], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 150
        while subprocess.run([_ray_cli(), "status", "--address", address], capture_output=True,
                             env=env).returncode != 0:
            assert time.monotonic() < deadline, "the Ray head did not come up"
            time.sleep(1)
        procs.append(subprocess.Popen([_ray_cli(), "start", "--address", address, "--dashboard-agent-listen-port",
                                       str(_free_port()), *common], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + 150
        while True:
            status = subprocess.run([_ray_cli(), "status", "--address", address], capture_output=True, text=True,
                                    env=env).stdout
            if status.count("node_") >= 2:
                break
            assert time.monotonic() < deadline, f"the second node did not join: {status[-800:]}"
            time.sleep(1)
        yield address, env
    finally:
        for p in reversed(procs):  # `ray start --block` stops its node's processes on SIGTERM
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            try:  # what is left of that node's process group (started by this fixture)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp, ignore_errors=True)


def test_a_run_on_a_two_node_cluster_equals_the_local_run(local_text, two_node_cluster, tmp_path):
    address, env = two_node_cluster
    out = tmp_path / "cluster"
    _bench(out, "--agent", "reference", "--backend", "text", "--workers", "2", "--executor", "ray",
           "--ray-address", address, env=env)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["circumstances"]["ray_nodes"] == 2  # the run was spread over both nodes
    assert _comparable(out) == _comparable(local_text)


def test_a_killed_worker_is_replaced_and_a_hung_episode_times_out(tmp_path):
    tasks = ("--tasks", "scholar-site-info-00*", "--tasks", "shop-00*")
    agent = ("--agent", "ray_agents:Flaky", "--backend", "text")
    plain = tmp_path / "plain"
    _bench(plain, *agent, *tasks, "--workers", "2")
    out = tmp_path / "ray"
    marker = tmp_path / "died"
    _bench(out, *agent, *tasks, "--workers", "2", "--executor", "ray", "--episode-timeout", "20",
           env=_env(WF_DIE_TASK="scholar-site-info-002", WF_DIE_MARKER=str(marker), WF_HANG_TASK="shop-003"))
    assert marker.is_file()  # a worker really was killed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"]
    assert manifest["circumstances"]["retries"] == {"worker_died": 1, "provider": 0, "timeouts": 1}
    hung = json.loads((out / "trajectories" / "shop-003.json").read_text())
    assert hung["end"]["reason"] == "error" and hung["end"]["cause"] == "timeout"
    assert "timeout of 20 s" in hung["end"]["detail"]
    # every other episode, the killed one included, is the plain run's
    assert _comparable(out, skip={"shop-003"}) == _comparable(plain, skip={"shop-003"})
