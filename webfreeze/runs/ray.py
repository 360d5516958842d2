"""The Ray executor: a run's episodes played by Ray actors, on a Ray started for the run (bound to
127.0.0.1, no dashboard, no usage statistics) or on an existing cluster (``--ray-address``).

Each actor holds one environment and one agent (as a local worker process does) and plays episodes
through :func:`webfreeze.runs.worker.play`; the trajectory and its screenshots come back to the
driver, which writes them with the same function the local workers use, so the run folder is the
local executor's, byte for byte apart from timings.

The archive is opened read-only by the actors: at its path when the node sees the same file (the
digest is checked), else from a copy shipped once through Ray's object store (on a cluster named by
``--ray-address``) and cached on the node's disk under its digest. The LLM cassette is read and
written at its path: on a cluster of several machines it must be on a shared file system.

Supervision, by the driver: an episode running longer than ``episode_timeout_s`` (counted from when
a started actor takes it: an actor's own start-up is not counted) ends as ``error`` (cause
``timeout``) and its actor is replaced; an actor that dies (its process killed, its node
lost) has its episode run again on a new actor, and an episode ended by the LLM provider failing
(cause ``provider``) is run again too, up to ``retries`` times each. Retries and timeouts are
counted in the manifest's circumstances, apart from the task outcomes.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from pathlib import Path

from webfreeze.archives import archive_digest  # the digest the run's manifest holds
from webfreeze.runs import worker
from webfreeze.runs.spec import RunError
from webfreeze.simulator.trajectory import FORMAT, VERSION, write_trajectory

# (``import ray`` stays inside the functions: Ray is an optional extra, and its environment must be
# set, prepare_ray_env, before it is first imported)

CACHE_ENV = "WEBFREEZE_CACHE"


def archive_cache_dir() -> Path:
    """Where a node keeps shipped archives (``$WEBFREEZE_CACHE/archives`` or ~/.cache/webfreeze/archives)."""
    base = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "webfreeze")
    return Path(base) / "archives"


def _sha256_file(path: Path) -> str:
    return archive_digest(path)


def local_archive(path: str, digest: str, shipped) -> str:
    """The archive as a file on this node: ``path`` when it holds ``digest``, else the cached copy
    of ``shipped`` (bytes from the object store), written once, atomically, under its digest."""
    p = Path(path)
    if p.is_file() and _sha256_file(p) == digest:
        return str(p)
    if shipped is None:
        raise RuntimeError(f"{path}: the archive is not on this node (and was not shipped)")
    cache = archive_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{digest.split(':', 1)[-1]}.wfz"
    if target.is_file() and _sha256_file(target) == digest:
        return str(target)
    tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
    tmp.write_bytes(shipped)
    if _sha256_file(tmp) != digest:
        tmp.unlink()
        raise RuntimeError(f"the shipped archive does not hold {digest}")
    os.replace(tmp, target)
    return str(target)


def _node_id() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # not in a Ray worker
        return None


class EpisodeWorker:
    """One Ray actor: one environment and one agent, started as a local worker is."""

    def __init__(self, spec: dict, shipped=None):
        self.init_error = None
        try:
            archive = local_archive(spec["archive"], spec["archive_digest"], shipped)
            worker.init(spec["config"], archive, spec["manifest"], spec["llm"])
        except Exception as exc:  # reported as one line by the driver, never as a traceback
            self.init_error = worker.one_line(exc)

    def pid(self) -> int:
        return os.getpid()

    def play(self, task: dict, reference: dict | None) -> dict:
        """Play one episode; returns the trajectory, its screenshots and the summary, or ``fatal``
        (one line) when the run cannot go on (strict replay missed, the worker could not start)."""
        if self.init_error:
            return {"fatal": self.init_error}
        try:
            trajectory, shots, summary = worker.play(task, reference)
        except RunError as exc:
            return {"fatal": str(exc)}
        except Exception as exc:  # a bug in a worker: still one line for the user
            return {"fatal": worker.one_line(exc).replace("a worker could not start", "a worker failed")}
        return {"trajectory": trajectory, "shots": shots, "summary": summary, "node": _node_id()}

    def close(self) -> None:
        worker.close()


def prepare_ray_env(address: str | None) -> None:
    """Environment for Ray, set before it is imported: no usage statistics; and for a Ray started
    here, every address on loopback (Ray otherwise swaps 127.0.0.1 for this machine's routable
    address, unless its "no cluster" switch is set, as it is by default on macOS and Windows)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not address:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
# A closed port on loopback: a request sent through it fails at once, on this machine.
_DEAD_PROXY = "http://127.0.0.1:9"


def _proxy_env_as_it_was() -> dict:
    """The driver's proxy settings (empty where unset), given back to the actors, so that an agent's
    LLM calls from a worker go where they would from the driver."""
    return {k: os.environ.get(k, "") for k in _PROXY_VARS}


@contextlib.contextmanager
def _no_cloud_probe():
    """While a local Ray starts: HTTP through a closed loopback proxy, except to loopback itself.
    Ray's dashboard process asks cloud metadata services (169.254.169.254 and
    metadata.google.internal) which cloud it runs on whenever it starts, usage statistics or not;
    a Ray started for a run talks to nothing beyond this machine. The processes started here keep
    these settings; the driver's own are restored afterwards."""
    saved = {k: os.environ.get(k) for k in _PROXY_VARS}
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ[k] = _DEAD_PROXY
    for k in ("NO_PROXY", "no_proxy"):
        os.environ[k] = "127.0.0.1,localhost,::1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_ray(address: str | None, workers: int) -> bool:
    """Connect to the cluster at ``address``, or start a Ray for this run on 127.0.0.1 (no
    dashboard, no usage statistics). Returns whether Ray was started here (then stop it after)."""
    prepare_ray_env(address)
    import ray

    if ray.is_initialized():
        return False
    quiet = {"log_to_driver": False, "logging_level": "ERROR", "configure_logging": True}
    # Ray gives a starting node a fixed 30 s to register; on a loaded machine a first start can miss
    # that, and a second one (warm caches) usually makes it
    for attempt in range(2):
        try:
            if address:
                ray.init(address=address, **quiet)
            else:
                with _no_cloud_probe():
                    ray.init(num_cpus=max(workers, 1), include_dashboard=False, _node_ip_address="127.0.0.1",
                             runtime_env={"env_vars": _proxy_env_as_it_was()}, **quiet)
            return True
        except Exception as exc:  # ConnectionError, a failed start: one line
            ray.shutdown()
            if attempt == 0 and not address and "timed out during startup" in str(exc):
                continue
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise RunError(f"cannot start {where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
                from None
    return True


def timeout_trajectory(spec, task: dict, detail: str, cause: str) -> dict:
    """The trajectory of an episode the driver had to end (it timed out, or its worker kept dying):
    no steps, ``end`` = error with the reason and its cause."""
    config, manifest = spec.config, spec.manifest
    context = {"context": task["context_record"]} if task.get("context_record") is not None else {}
    return {**context,
        "format": FORMAT, "version": VERSION, "task_id": task["id"],
        "suite": {"name": manifest["suite"]["name"], "digest": manifest["suite"]["digest"]},
        "env": {"backend": config["backend"], "seed": config["seed"], "max_steps": config["max_steps"],
                "archive_digest": spec.archive_digest, "site_models": config["site_models"]},
        "agent": manifest["agent"], "steps": [], "answer": None,
        "end": {"reason": "error", "detail": detail, "cause": cause},
        "final_url": None, "final_state": {}, "timing": {"total_ms": 0.0},
    }


def _absolute(spec):
    llm = dict(spec.llm)
    if llm.get("cassette"):
        llm["cassette"] = os.path.abspath(llm["cassette"])
    return replace(spec, archive=os.path.abspath(spec.archive), llm=llm,
                   config=dict(spec.config, out=os.path.abspath(spec.config["out"])))


class RayExecutor:
    """Episodes on Ray actors (see the module docstring)."""

    name = "ray"

    def __init__(self, workers: int, *, address: str | None = None, episode_timeout_s: float | None = None,
                 retries: int = 2):
        self.workers = workers
        self.address = address
        self.timeout = episode_timeout_s
        self.retries = retries

    @contextlib.contextmanager
    def session(self):
        """Ray for the whole run (the runner plays dependent tasks in waves, one ``run`` each): started
        once here and shut down at the end, instead of once per wave."""
        started = start_ray(self.address, self.workers)
        try:
            yield self
        finally:
            if started:
                import ray

                ray.shutdown()

    def run(self, spec, jobs: list, progress=None) -> dict:
        import ray

        # workers may run elsewhere (another folder, another node): every path they open is absolute
        spec = _absolute(spec)
        started = start_ray(self.address, self.workers)
        counts = {"worker_died": 0, "provider": 0, "timeouts": 0}
        nodes: set = set()
        by_node: dict = {}     # node id -> episodes whose trajectory it played (written)
        actors: dict = {}      # actor -> (ref, job index, started) while busy, None while idle
        starting: dict = {}    # a new actor's first call -> the actor, until its constructor has run
        try:
            shipped = None
            if self.address:  # another machine may not see our disk: ship the archive once
                shipped = ray.put(Path(spec.archive).read_bytes())
            remote = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=1)(EpisodeWorker)
            spec_dict = {"config": spec.config, "archive": spec.archive, "archive_digest": spec.archive_digest,
                         "manifest": spec.manifest, "llm": spec.llm}

            def new_actor() -> None:
                # an actor takes episodes once started: its start-up (a process, imports, the
                # environment) is no part of an episode's time, however loaded the machine is
                actor = remote.options(scheduling_strategy="SPREAD").remote(spec_dict, shipped)
                starting[actor.pid.remote()] = actor

            queue = list(range(len(jobs)))
            attempts = [0] * len(jobs)
            for _ in range(min(self.workers, len(jobs))):
                new_actor()
            pending: dict = {}  # ref -> actor
            while queue or pending:
                for actor, busy in list(actors.items()):
                    if busy is None and queue:
                        i = queue.pop(0)
                        attempts[i] += 1
                        ref = actor.play.remote(*jobs[i])
                        actors[actor] = (ref, i, time.monotonic())
                        pending[ref] = actor
                wait_s = None
                if self.timeout is not None and pending:
                    now = time.monotonic()
                    wait_s = max(0.0, min(self.timeout - (now - actors[a][2]) for a in pending.values()))
                ready, _ = ray.wait(list(pending) + list(starting), num_returns=1, timeout=wait_s)
                if ready and ready[0] in starting:  # started (or died starting: its first episode says so)
                    actors[starting.pop(ready[0])] = None
                    continue
                if not ready:  # the longest-running episode passed its time: end it, replace its actor
                    now = time.monotonic()
                    for ref, actor in list(pending.items()):
                        ref_, i, t0 = actors[actor]
                        if now - t0 >= self.timeout:
                            ray.kill(actor, no_restart=True)
                            del pending[ref], actors[actor]
                            new_actor()
                            counts["timeouts"] += 1
                            task = jobs[i][0]
                            traj = timeout_trajectory(spec, task, f"the episode ran past its timeout of "
                                                                  f"{self.timeout:g} s and was stopped", "timeout")
                            write_trajectory(traj, spec.config["out"], {})
                            if progress:
                                progress({"task_id": task["id"], "end": "error", "steps": 0,
                                          "ms": round(self.timeout * 1000, 1), "cause": "timeout"})
                    continue
                ref = ready[0]
                actor = pending.pop(ref)
                _, i, _ = actors[actor]
                actors[actor] = None
                try:
                    result = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                        ray.exceptions.ObjectLostError) as exc:
                    del actors[actor]
                    new_actor()
                    counts["worker_died"] += 1
                    if attempts[i] <= self.retries:
                        queue.insert(0, i)
                        continue
                    task = jobs[i][0]
                    detail = (f"its worker died {attempts[i]} time(s): "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
                    write_trajectory(timeout_trajectory(spec, task, detail, "worker"), spec.config["out"], {})
                    if progress:
                        progress({"task_id": task["id"], "end": "error", "steps": 0, "ms": 0.0, "cause": "worker"})
                    continue
                if "fatal" in result:
                    raise RunError(result["fatal"])
                nodes.add(result.get("node"))
                summary = result["summary"]
                if summary.get("cause") == "provider" and attempts[i] <= self.retries:
                    counts["provider"] += 1
                    queue.insert(0, i)
                    continue
                write_trajectory(result["trajectory"], spec.config["out"], result["shots"])
                if result.get("node"):
                    by_node[result["node"]] = by_node.get(result["node"], 0) + 1
                if progress:
                    progress(summary)
        finally:
            # idle actors close their browser and agent first; busy ones (an interrupted run) are killed
            idle = [a for a, busy in actors.items() if busy is None]
            try:
                ray.wait([a.close.remote() for a in idle], num_returns=len(idle), timeout=30)
            except Exception:  # closing is a courtesy; the kill below ends them anyway
                pass
            for actor in [*actors, *starting.values()]:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # already gone
                    pass
            if started:
                ray.shutdown()
        return {"retries": counts, "ray_nodes": len(nodes - {None}),
                "ray_episodes_by_node": dict(sorted(by_node.items()))}
