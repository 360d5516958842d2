"""Where a run's episodes play: the runner's executors.

An executor takes the run's :class:`~webfreeze.runs.execute.WorkerSpec` and its jobs (each task's view
and, for an oracle, its reference) and plays every job through
:func:`webfreeze.runs.worker.play` in workers that each hold one environment and one agent. It
calls ``progress(summary)`` after each episode and returns circumstances for the manifest (e.g.
retries). Everything else (the run folder, the manifest, resume) is the runner's, the same for all.

- ``local``: this machine; one worker in this process, or a pool of spawned processes.
- ``ray``: Ray actors, on a Ray started for the run or an existing cluster
  (:mod:`webfreeze.runs.ray`).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed

from webfreeze.runs import worker
from webfreeze.runs.ray import RayExecutor, prepare_ray_env
from webfreeze.runs.spec import RunError

EXECUTORS = ("local", "ray")


class LocalExecutor:
    """This machine: one worker in this process (``workers == 1`` or a single job), else a pool of
    ``workers`` spawned processes (a browser per worker; never a forked one)."""

    name = "local"

    def __init__(self, workers: int):
        self.workers = workers

    def run(self, spec, jobs: list, progress=None) -> dict:
        if self.workers == 1 or len(jobs) <= 1:
            try:
                try:
                    worker.init(spec.config, spec.archive, spec.manifest, spec.llm)
                except Exception as exc:
                    raise RunError(worker.one_line(exc)) from None
                for task, ref in jobs:
                    summary = worker.run_episode(task, ref)
                    if progress:
                        progress(summary)
            finally:
                worker.close()
            return {}
        # The environment's module in this process first (late: the sim extra): a missing extra is
        # then the CLI's one line naming it, not a pool whose every process fails to start.
        import webfreeze.simulator.env  # noqa: F401

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(self.workers, len(jobs)), mp_context=ctx, initializer=worker.pool_init,
                                 initargs=(spec.config, spec.archive, spec.manifest, spec.llm)) as pool:
            futures = [pool.submit(worker.pool_episode, task, ref) for task, ref in jobs]
            try:
                for fut in as_completed(futures):
                    summary = fut.result()
                    if progress:
                        progress(summary)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        return {}


def check_executor(config) -> None:
    """Refuse executor settings that cannot work, in one line, before anything is written."""
    if config.executor not in EXECUTORS:
        raise RunError(f"unknown executor {config.executor!r} ({' or '.join(EXECUTORS)})")
    if config.executor != "ray":
        if config.ray_address:
            raise RunError("--ray-address goes with --executor ray")
        if config.episode_timeout_s is not None:
            raise RunError("--episode-timeout needs --executor ray (the local pool cannot stop one hung episode)")
        return
    if config.episode_timeout_s is not None and config.episode_timeout_s <= 0:
        raise RunError("--episode-timeout must be above 0 seconds")
    if config.retries < 0:
        raise RunError("--retries must be at least 0")
    prepare_ray_env(config.ray_address)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise RunError("--executor ray needs Ray: pip install 'webfreeze[ray]'") from None


def make_executor(config):
    """The executor a run's settings name."""
    if config.executor == "ray":
        return RayExecutor(config.workers, address=config.ray_address, episode_timeout_s=config.episode_timeout_s,
                           retries=config.retries)
    return LocalExecutor(config.workers)
