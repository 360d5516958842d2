"""The benchmark runner behind ``webfreeze bench run``: a suite, an archive, an agent -> a run directory.

A run directory holds ``manifest.json`` (what ran: archive and suite digests, agent and its
config, environment settings, package versions; times kept in top-level ``*_at``/``*_s`` keys),
``tasks.jsonl`` (the suite's tasks), ``trajectories/<task>.json`` (one per episode, written
atomically as each ends) and ``screenshots/`` when asked for. Episodes run in worker processes,
each with its own environment (one browser per worker); a task's trajectory depends only on the
task, the archive, the agent and the seed, never on which worker ran it or in what order.

An interrupted run resumes: tasks with a trajectory are kept, the others run. A run directory
that holds a different run (another suite, archive, agent, settings or task selection) is refused.

Agents get a task view (:class:`webfreeze.agents.TaskView`): never the ground truth, and the
reference trajectory only when the agent is an oracle (whose runs the manifest labels the upper
bound). One agent instance serves every episode of a worker. Every LLM call goes through the run's
cassette (``llm-cassette.sqlite`` unless ``cassette`` names another); a run of an agent on the
embedded local model starts that model's server once, unless it replays strictly.
"""

import contextlib
import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from webfreeze.agents.base import HANDLE_FIELDS, VISIBLE_FIELDS
from webfreeze.common.digests import file_sha256
from webfreeze.common.files import write_json
from webfreeze.eval.tasks import canonical_line, dependency_waves
from webfreeze.llm import Cassette
from webfreeze.llm.local import LOCAL_MODEL_ID, LocalModelServer, local_model_path
from webfreeze.runs import live
from webfreeze.runs.context import ContextError, a1_trajectory, compose, run_instructions
from webfreeze.runs.executors import make_executor
from webfreeze.runs.prepare import Prepared, package_versions, prepare, utc_now
from webfreeze.runs.spec import CASSETTE_NAME, RunError, build_run


def _visible(task: dict) -> dict:
    """A suite line without what agents must not see (its ground truth and anything not listed)."""
    return {k: task[k] for k in (*VISIBLE_FIELDS, *HANDLE_FIELDS) if k in task}


def tasks_lines(tasks) -> str:
    """A run folder's ``tasks.jsonl``: each task's canonical line, in the order given."""
    return "".join(canonical_line(t.raw) + "\n" for t in tasks)


def copy_references(tasks, suite_root, out: Path) -> None:
    """Reference trajectory files beside the run's tasks.jsonl, so a run directory is self-contained."""
    for task in tasks:
        ref = task.ground_truth.get("reference_trajectory")
        if isinstance(ref, str) and not ref.startswith(("trajectories/", "screenshots/")):
            src, dst = Path(suite_root) / ref, out / ref
            if src.is_file() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)




@dataclass
class WorkerSpec:
    """What every worker of a run starts from, whatever the executor: the run's settings (with
    ``out``), the archive's path and digest, the manifest, and the LLM services' settings."""
    config: dict
    archive: str
    archive_digest: str
    manifest: dict
    llm: dict


def execute(prep: Prepared, *, progress=None) -> dict:
    """Run the tasks still to do; returns the finished manifest. ``progress(summary)`` after each.

    The executor (``RunOptions.executor``: the local process pool, or Ray) only decides where episodes
    play; what is written, and how the manifest accounts for it, is the same for all of them."""
    out = Path(prep.options.out)
    executor = make_executor(prep.options)
    fresh = not out.exists()
    try:
        if live.is_live(prep.options):  # live runs: the recording proxy serves the whole run
            return live.run_live(prep, lambda: _execute(prep, executor, progress))
        return _execute(prep, executor, progress)
    except BaseException:
        # A run that failed before its first episode was kept (the local model server would not
        # start, a worker could not build its agent) leaves no folder behind that a corrected
        # command would then refuse as "a different run".
        if fresh and out.is_dir() and not any((out / "trajectories").glob("*.json")):
            shutil.rmtree(out, ignore_errors=True)
        raise


def _execute(prep: Prepared, executor, progress) -> dict:
    spec, options, out = prep.spec, prep.options, Path(prep.options.out)
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    (out / "tasks.jsonl").write_text(tasks_lines(prep.suite.tasks), encoding="utf-8")
    copy_references(prep.suite.tasks, prep.suite.root, out)
    # how many workers ran it, on which executor, from where: circumstances (kept out of the
    # comparable part of the report)
    manifest = dict(prep.manifest, started_at=utc_now(), complete=False, tasks_done=len(prep.done),
                    circumstances={"workers": options.workers, "executor": executor.name,
                                   "suite_path": _run_relative(prep.suite.root, out),
                                   "archive_path": _run_relative(prep.archive, out)})
    if spec.persona is not None and "personas" in prep.manifest:
        manifest["circumstances"]["persona_dir"] = str(Path(spec.persona).resolve())
    if spec.context:
        manifest["circumstances"].update({k: str(Path(v).resolve()) for k, v in (
            ("context_pool", spec.context.pool), ("context_a1_run", spec.context.a1_run)) if v})
    write_json(out / "manifest.json", manifest)
    t0 = time.perf_counter()
    # what every worker starts from: the spec (as prepare filled it in) and where to write
    wconfig = dict(asdict(spec), out=str(out), upstream=options.upstream)  # (upstream: live runs)
    # What crosses into the workers is the agent's view of each task: never its ground truth, and
    # the reference only for an oracle (the worker processes never hold more than the agent may see).
    oracle = prep.manifest["agent"]["oracle"]
    # A dependent task plays after the task it depends on (its A1): one wave after another.
    waves = dependency_waves(prep.todo)
    jobs = bool(prep.todo)
    cassette = Path(options.cassette) if options.cassette else out / CASSETTE_NAME
    llm = {"cassette": str(cassette), "mode": options.cassette_mode, "local_base_url": None,
           "slots_dir": None, "concurrency": options.llm_concurrency}
    server, slots, local_model = None, None, None
    stats: dict = {}
    try:
        if jobs and options.cassette_mode != "replay" and prep.local_model:
            server = LocalModelServer(log_path=out / "local-model.log")
            server.start()
            llm["local_base_url"] = server.base_url
            local_model = _local_model_identity()
        if jobs and options.workers > 1:
            slots = tempfile.mkdtemp(prefix="webfreeze-llm-slots-")
            llm["slots_dir"] = slots
        worker_spec = WorkerSpec(wconfig, str(prep.archive), prep.archive_digest, manifest, llm)
        # (an executor with a session, Ray, starts once for all the waves)
        session = getattr(executor, "session", None) if len(waves) > 1 else None
        with session() if session is not None else contextlib.nullcontext():
            for wave in waves:
                wave_jobs = [(_job_task(prep, t), t.reference if oracle else None) for t in wave]
                _merge_stats(stats, executor.run(worker_spec, wave_jobs, progress) or {})
    finally:
        if server is not None:
            server.stop()
        if slots is not None:
            shutil.rmtree(slots, ignore_errors=True)
        # counted on disk, as a resumed run counts them: with workers, an interrupted run's episodes
        # already under way still finish and are kept
        done = sum((out / "trajectories" / f"{t.id}.json").is_file() for t in prep.suite.tasks)
        manifest.update(tasks_done=done, complete=done == len(prep.suite.tasks), finished_at=utc_now(),
                        elapsed_s=round(time.perf_counter() - t0, 3))
        if stats:
            manifest["circumstances"].update(stats)
        if cassette.is_file():
            try:
                manifest["llm"], how = _cassette_entry(cassette, options.cassette_mode, out,
                                                       used_entries(out, prep.suite.tasks))
                manifest["circumstances"].update(how)
            except Exception as exc:  # the run's own outcome matters more than this account of it
                manifest["circumstances"]["cassette_error"] = str(exc).splitlines()[0] if str(exc) else repr(exc)
            if local_model:
                manifest["circumstances"]["local_model"] = local_model
        write_json(out / "manifest.json", manifest)
    return manifest


def open_run_folder(prep: Prepared, *, executor: str, workers: int = 1) -> dict:
    """For a driver that plays a prepared run's episodes itself (the MCP server): write what the
    run folder holds before its first episode, as :func:`execute` does (``trajectories/``,
    ``tasks.jsonl``, the references, the manifest marked incomplete with its circumstances);
    returns that manifest, for :func:`close_run_folder`."""
    out = Path(prep.options.out)
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    (out / "tasks.jsonl").write_text(tasks_lines(prep.suite.tasks), encoding="utf-8")
    copy_references(prep.suite.tasks, prep.suite.root, out)
    manifest = dict(prep.manifest, started_at=utc_now(), complete=False, tasks_done=len(prep.done),
                    circumstances={"workers": workers, "executor": executor,
                                   "suite_path": _run_relative(prep.suite.root, out),
                                   "archive_path": _run_relative(prep.archive, out)})
    write_json(out / "manifest.json", manifest)
    return manifest


def close_run_folder(prep: Prepared, manifest: dict, elapsed_s: float) -> dict:
    """Count the run's trajectories on disk into ``manifest`` (``tasks_done``, ``complete``,
    ``finished_at``, ``elapsed_s``) and write it; returns it. May be called after every episode."""
    out = Path(prep.options.out)
    done = sum((out / "trajectories" / f"{t.id}.json").is_file() for t in prep.suite.tasks)
    manifest.update(tasks_done=done, complete=done == len(prep.suite.tasks), finished_at=utc_now(),
                    elapsed_s=round(elapsed_s, 3))
    write_json(out / "manifest.json", manifest)
    return manifest


def _job_task(prep: Prepared, task) -> dict:
    """What crosses into a worker for ``task``: its visible part and, for a dependent task under a
    context condition, its composed ``context``, its start URL (where the last injected trajectory
    ended) and the trajectory's ``context`` record (under ``context_record``, which the agent's view
    never holds)."""
    visible = _visible(task.raw)
    spec = prep.spec
    if not spec.context or not task.depends_on:
        return visible
    a1_run = spec.context.a1_run or prep.options.out
    try:
        a1 = a1_trajectory(a1_run, task.depends_on)
        if a1 is None:
            raise ContextError(f"task {task.id}: subtask A1 {task.depends_on!r} has no trajectory in {a1_run}")
        instructions = {t.id: t.instruction for t in prep.suite.tasks}
        if task.depends_on not in instructions and isinstance(a1.get("instruction"), str):
            instructions[task.depends_on] = a1["instruction"]
        if task.depends_on not in instructions:
            instructions[task.depends_on] = run_instructions(a1_run).get(task.depends_on)
        shown, record, start = compose(task, a1, prep.pool, spec.context.as_dict(), instructions)
    except ContextError as exc:
        raise RunError(str(exc)) from None
    return dict(visible, context=shown, start_url=start, context_record=record)


def _merge_stats(total: dict, more: dict) -> None:
    """An executor's circumstances over several waves: counts added, the rest the largest."""
    for k, v in more.items():
        if isinstance(v, dict):
            _merge_stats(total.setdefault(k, {}), v)
        elif k in total and isinstance(v, (int, float)) and isinstance(total[k], (int, float)):
            total[k] = total[k] + v if k != "ray_nodes" else max(total[k], v)
        else:
            total[k] = v


def used_entries(out: Path, tasks=None) -> list:
    """The cassette entries a run's episodes used, from their trajectories' ``llm_entries``: those of
    ``tasks`` (objects with an ``id``), or of every trajectory in the run folder."""
    folder = out / "trajectories"
    paths = sorted(folder.glob("*.json")) if tasks is None else [folder / f"{t.id}.json" for t in tasks]
    used = set()
    for path in paths:
        try:
            entries = json.loads(path.read_text(encoding="utf-8")).get("llm_entries") or []
        except (OSError, ValueError, AttributeError):
            continue  # a task without a trajectory (not run) or an unreadable one names nothing
        used.update((str(k), int(n)) for k, n in entries)
    return sorted(used)


def _local_model_identity() -> dict:
    """Which local model answered (its id and GGUF file digest) and which build of llama.cpp's
    server (the xllamacpp version): replies differ between model files and llama.cpp builds, so a
    recorded cassette says what recorded it."""
    path = local_model_path()
    return {"id": LOCAL_MODEL_ID, "file": path.name, "sha256": file_sha256(path),
            "xllamacpp": package_versions().get("xllamacpp")}


def _run_relative(path, out) -> str:
    """Where ``path`` lies, as a manifest keeps it: relative to the run folder ``out`` when it lies
    inside it, else absolute. Never relative to the current directory, which another command (a
    ``bundle pack`` from elsewhere) does not share."""
    target, root = Path(path).resolve(), Path(out).resolve()
    try:
        return target.relative_to(root).as_posix()
    except ValueError:
        return str(target)


def manifest_path(run_dir, where: str | None) -> Path | None:
    """The file or folder a run's manifest names (a circumstance such as ``suite_path``), found
    from any current directory: absolute as written, else relative to the run folder. Manifests
    written before paths were kept that way held them relative to the directory the run started
    from, unknown now: the run folder's ancestors are tried in turn (a project's runs usually lie
    below the folder the command ran in). None when ``where`` is empty or names nothing there."""
    if not where:
        return None
    p = Path(where)
    if p.is_absolute():
        return p if p.exists() else None
    run = Path(run_dir).resolve()
    for base in (run, *run.parents, Path.cwd()):
        if (base / p).exists():
            return base / p
    return None


def _cassette_entry(cassette: Path, mode: str, out: Path, used: list) -> tuple[dict, dict]:
    """The manifest's account of the run's LLM calls: the digest of the cassette entries the run
    used (keys, requests and responses, no latencies; see :meth:`Cassette.entries_digest`) and how
    many, which a replay of the run from any cassette holding them reproduces; and, as
    circumstances, where the cassette was, in which mode, and the whole file's digest."""
    c = Cassette(cassette, "replay")
    try:
        digest, calls = c.entries_digest(used)
        file_digest = c.digest()
    finally:
        close = getattr(c, "close", None)
        if close:
            close()
    where = _run_relative(cassette, out)
    # What the calls were goes with the run; how this run got them (recorded now, or replayed from
    # which file) is a circumstance, kept out of the comparable part of the report.
    return ({"entries_digest": digest, "calls": calls},
            {"cassette": where, "cassette_mode": mode, "cassette_file_digest": file_digest})


# ------------------------------------------------------------------------------------ library
def run(suite, agent: str, out, *, archive=None, progress=None, **settings) -> dict:
    """Run ``agent`` (a name, ``package.module:Class`` or entry point) on ``suite`` over the replayed
    archive, writing the run directory ``out``; returns the finished manifest.

    ``settings`` are :class:`~webfreeze.runs.spec.RunSpec`'s and
    :class:`~webfreeze.runs.spec.RunOptions`' fields (backend, seed, max_steps, screenshots,
    agent_config, site_models, tasks, limit, persona, history, context; workers, cassette,
    cassette_mode, llm_concurrency, executor, ray_address, episode_timeout_s, retries).
    ``progress(summary)`` is called after each episode. Score it with :func:`webfreeze.score_run`.
    Raises :class:`RunError` (one line) when the run cannot start or go on.
    """
    return execute(prepare(*build_run(suite, agent, out, archive=archive, **settings)), progress=progress)
