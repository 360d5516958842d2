"""The benchmark runner behind ``webfreeze bench run``: a suite, an archive, an agent -> a run directory.

A run directory holds ``manifest.json`` (what ran: archive and suite digests, agent and its
config, environment settings, package versions; times kept in top-level ``*_at``/``*_s`` keys),
``tasks.jsonl`` (the suite's tasks), ``trajectories/<task>.json`` (one per episode, written
atomically as each ends) and ``screenshots/`` when asked for. Episodes run in worker processes,
each with its own environment (one browser per worker); a task's trajectory depends only on the
task, the archive, the agent and the seed, never on which worker ran it or in what order.

An interrupted run resumes: tasks with a trajectory are kept, the others run. A run directory
that holds a different run (another suite, archive, agent or settings) is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

RUN_FORMAT = "webfreeze-run"
RUN_VERSION = 1
BACKENDS = ("browser", "text")


class RunError(RuntimeError):
    """The run cannot start or continue: one line for the user."""


@dataclass
class RunConfig:
    suite: str
    archive: str | None
    agent: str
    out: str
    workers: int = 1
    backend: str = "browser"
    seed: int = 0
    max_steps: int = 30
    screenshots: bool = False
    agent_config: dict = field(default_factory=dict)
    site_models: dict = field(default_factory=dict)  # host -> simulated site kind


def _versions() -> dict:
    out = {}
    for name in ("webfreeze", "playwright", "gymnasium", "lxml"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    out["python"] = sys.version.split()[0]
    return out


def _write_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# ------------------------------------------------------------------------------------ preparation
@dataclass
class Prepared:
    config: RunConfig
    suite: object
    archive: Path
    archive_digest: str
    manifest: dict
    todo: list
    done: list


def resolve_archive(suite, archive: str | None) -> Path:
    """``--archive`` if given, else the suite manifest's ``archive`` (relative to the suite)."""
    if archive:
        path = Path(archive)
    else:
        ref = (suite.manifest or {}).get("archive") if hasattr(suite, "manifest") else None
        if not ref:
            raise RunError("no archive: give --archive (the suite's manifest names none)")
        path = Path(suite.root) / ref
    if not path.is_file():
        raise RunError(f"{path}: no such archive" + ("" if archive else " (named by the suite's manifest)"))
    return path


def check_site_models(models: dict) -> None:
    """Refuse a site model of a kind that does not exist (``--site-model HOST=KIND``)."""
    from webfreeze.simulator.site_models import STATEFUL_PATHS

    for host, kind in models.items():
        if kind not in STATEFUL_PATHS:
            raise RunError(f"site model {host}={kind}: unknown kind (known: {', '.join(sorted(STATEFUL_PATHS))})")


def prepare(config: RunConfig) -> Prepared:
    """Check everything and create (or reopen) the run directory; nothing is written before all
    checks pass."""
    from webfreeze.agents import AgentError, make_agent
    from webfreeze.archives import Archive, ArchiveError, archive_digest
    from webfreeze.eval.tasks import TaskError, load_suite

    if config.backend not in BACKENDS:
        raise RunError(f"unknown backend {config.backend!r} (browser or text)")
    if config.workers < 1:
        raise RunError("--workers must be at least 1")
    try:
        agent = make_agent(config.agent, **config.agent_config)
    except AgentError as exc:
        raise RunError(str(exc)) from None
    except TypeError as exc:
        raise RunError(f"agent {config.agent!r}: bad --agent-config ({exc})") from None
    try:
        suite = load_suite(config.suite)
    except TaskError as exc:
        raise RunError(str(exc)) from None
    if not suite.tasks:
        raise RunError(f"{config.suite}: the suite has no tasks")
    unstartable = [t.id for t in suite.tasks if not t.start_url]
    if unstartable:  # (a suite may leave it null, as Mind2Web-Live's tasks do; an episode cannot)
        more = f" and {len(unstartable) - 3} more" if len(unstartable) > 3 else ""
        raise RunError(f"{config.suite}: {len(unstartable)} task(s) have no start_url, and an episode starts "
                       f"there: {', '.join(unstartable[:3])}{more}")
    archive = resolve_archive(suite, config.archive)
    try:  # an archive that cannot be opened is refused before anything is written
        Archive.open(archive).close()
    except ArchiveError as exc:
        raise RunError(str(exc)) from None
    digest = archive_digest(archive)
    site_models = dict((suite.manifest or {}).get("site_models") or {})
    site_models.update(config.site_models)
    config.site_models = dict(sorted(site_models.items()))
    check_site_models(config.site_models)
    manifest = {
        "format": RUN_FORMAT, "version": RUN_VERSION,
        "suite": {"name": suite.name, "digest": suite.digest, "tasks": len(suite.tasks),
                  "path": str(Path(suite.root))},
        "archive": {"path": str(archive), "digest": digest},
        "archive_matches_suite": None if not suite.archive_digest else suite.archive_digest == digest,
        "agent": {"name": agent.name, "config": agent.config()},
        "env": {"backend": config.backend, "seed": config.seed, "max_steps": config.max_steps,
                "screenshots": config.screenshots, "site_models": config.site_models},
        "versions": _versions(),
    }
    if config.backend == "browser":
        from webfreeze.simulator.browser import browser_build

        manifest["versions"]["browser"] = browser_build(shell=True)
    out = Path(config.out)
    identity = {k: manifest[k] for k in ("suite", "archive", "agent", "env")}
    if out.exists():
        if not out.is_dir():
            raise RunError(f"{out}: exists and is not a directory")
        old_path = out / "manifest.json"
        if old_path.is_file():
            try:
                old = json.loads(old_path.read_text(encoding="utf-8"))
            except ValueError:
                raise RunError(f"{old_path}: not a readable run manifest; use a new --out") from None
            if {k: old.get(k) for k in identity} != identity:
                diff = [k for k in identity if old.get(k) != identity[k]]
                what = f"its {diff[0]} differs" if len(diff) == 1 else f"its {', '.join(diff)} differ"
                raise RunError(f"{out} holds a different run ({what}); use a new --out")
        elif any(out.iterdir()):
            raise RunError(f"{out}: exists, is not empty and holds no run; use a new --out")
    done, todo = [], []
    for task in suite.tasks:
        (done if (out / "trajectories" / f"{task.id}.json").is_file() else todo).append(task)
    return Prepared(config, suite, archive, digest, manifest, todo, done)


def _tasks_lines(suite) -> str:
    from webfreeze.eval.tasks import canonical_line

    return "".join(canonical_line(t.raw) + "\n" for t in suite.tasks)


def _copy_references(suite, out: Path) -> None:
    """Reference trajectory files beside the run's tasks.jsonl, so a run directory is self-contained."""
    for task in suite.tasks:
        ref = task.ground_truth.get("reference_trajectory")
        if isinstance(ref, str) and not ref.startswith(("trajectories/", "screenshots/")):
            src, dst = Path(suite.root) / ref, out / ref
            if src.is_file() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)


# ------------------------------------------------------------------------------------ episodes
_WORKER: dict = {}


def _worker_init(config: dict, archive: str, manifest: dict) -> None:
    from webfreeze.simulator.env import EnvConfig, WebEnv
    from webfreeze.simulator.site_models import SimulatedSiteModel

    models = [SimulatedSiteModel(kind, host) for host, kind in config["site_models"].items()]
    env = WebEnv(EnvConfig(archive, backend=config["backend"], seed=config["seed"], max_steps=config["max_steps"],
                           screenshots=config["screenshots"], site_models=models))
    _WORKER.update(env=env, config=config, manifest=manifest)


def _worker_close() -> None:
    env = _WORKER.pop("env", None)
    if env is not None:
        try:
            env.close()
        except Exception:  # interrupted: the browser may already be gone
            pass


def run_episode(task: dict, reference: dict | None) -> dict:
    """One task in this worker's environment; writes its trajectory and returns a summary."""
    from webfreeze.agents import AgentError, make_agent
    from webfreeze.simulator.trajectory import write_trajectory

    env, config, manifest = _WORKER["env"], _WORKER["config"], _WORKER["manifest"]
    agent = make_agent(config["agent"], **config["agent_config"])
    t0 = time.perf_counter()
    error = None
    try:
        agent.reset(task, reference)
    except AgentError as exc:
        error = str(exc)
    obs, _ = env.reset(seed=config["seed"], options={"task": task})
    while error is None:
        a0 = time.perf_counter()
        try:
            out = agent.act(obs)
        except Exception as exc:  # an agent's own bug ends its episode, not the run
            error = f"agent failed: {type(exc).__name__}: {exc}"
            break
        fields = {k: v for k, v in out.items() if k != "action"}
        fields["agent_ms"] = round((time.perf_counter() - a0) * 1000, 3)
        obs, _, terminated, truncated, _ = env.step(out["action"], agent=fields)
        if terminated or truncated:
            break
    trajectory = env.trajectory(stopped=error is not None)
    if error is not None:
        trajectory["end"] = {"reason": "error", "detail": error}
    trajectory["agent"] = manifest["agent"]
    trajectory["suite"] = {"name": manifest["suite"]["name"], "digest": manifest["suite"]["digest"]}
    trajectory["env"]["site_models"] = config["site_models"]
    shots = dict(env.recorder.shots) if env.recorder else {}
    write_trajectory(trajectory, config["out"], shots)
    return {"task_id": task["id"], "end": trajectory["end"]["reason"], "steps": len(trajectory["steps"]),
            "ms": round((time.perf_counter() - t0) * 1000, 1)}


def _pool_episode(task: dict, reference: dict | None) -> dict:
    return run_episode(task, reference)


def _pool_init(config: dict, archive: str, manifest: dict) -> None:
    import atexit

    _worker_init(config, archive, manifest)
    atexit.register(_worker_close)


def execute(prep: Prepared, *, progress=None) -> dict:
    """Run the tasks still to do; returns the finished manifest. ``progress(summary)`` after each."""
    config, out = prep.config, Path(prep.config.out)
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    (out / "tasks.jsonl").write_text(_tasks_lines(prep.suite), encoding="utf-8")
    _copy_references(prep.suite, out)
    manifest = dict(prep.manifest, started_at=_now(), complete=False, tasks_done=len(prep.done),
                    workers=config.workers)
    _write_json(out / "manifest.json", manifest)
    t0 = time.perf_counter()
    wconfig = dict(asdict(config), out=str(out))
    jobs = [(t.raw, t.reference) for t in prep.todo]
    try:
        if config.workers == 1 or len(jobs) <= 1:
            _worker_init(wconfig, str(prep.archive), manifest)
            try:
                for task, ref in jobs:
                    summary = run_episode(task, ref)
                    if progress:
                        progress(summary)
            finally:
                _worker_close()
        else:
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")  # a browser per worker; never fork one
            with ProcessPoolExecutor(max_workers=min(config.workers, len(jobs)), mp_context=ctx,
                                     initializer=_pool_init, initargs=(wconfig, str(prep.archive), manifest)) as pool:
                futures = [pool.submit(_pool_episode, task, ref) for task, ref in jobs]
                try:
                    for fut in as_completed(futures):
                        summary = fut.result()
                        if progress:
                            progress(summary)
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    finally:
        # counted on disk, as a resumed run counts them: with workers, an interrupted run's episodes
        # already under way still finish and are kept
        done = sum((out / "trajectories" / f"{t.id}.json").is_file() for t in prep.suite.tasks)
        manifest.update(tasks_done=done, complete=done == len(prep.suite.tasks), finished_at=_now(),
                        elapsed_s=round(time.perf_counter() - t0, 3))
        _write_json(out / "manifest.json", manifest)
    return manifest
