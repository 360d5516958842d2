"""A run's worker: one environment and one agent, started once (:func:`init`), playing episodes
(:func:`play`) until it is closed (:func:`close`). Every executor (the local process pool, Ray
actors) plays episodes through this module, so what an episode is never depends on where it ran.
"""

from __future__ import annotations

import atexit
import time

from webfreeze.agents import AgentError, AgentServices, TaskView, is_oracle, make_agent
from webfreeze.eval.infrastructure import AGENT_CAUSE
from webfreeze.llm.errors import LLMError, ProviderError
from webfreeze.personas.retrieval import RetrievalError, open_user_history
from webfreeze.runs import live
from webfreeze.runs.spec import RunError, history_settings
from webfreeze.simulator.site_models import SimulatedSiteModel
from webfreeze.simulator.trajectory import write_trajectory

_WORKER: dict = {}


def init(config: dict, archive: str, manifest: dict, llm: dict) -> None:
    """Start this worker: its agent (with its LLM services) and its environment over ``archive``."""
    # (late: the environment needs the sim extra, Gymnasium; modules that only read runs do not)
    from webfreeze.simulator.env import EnvConfig, WebEnv

    models = [SimulatedSiteModel(kind, host) for host, kind in config["site_models"].items()]
    # one agent per worker: a model it loads is loaded once, not per episode
    agent = make_agent(config["agent"], **config["agent_config"])
    services = AgentServices(cassette=llm["cassette"], cassette_mode=llm["mode"], local_base_url=llm["local_base_url"],
                             slots_dir=llm["slots_dir"], concurrency=llm["concurrency"])
    setup = getattr(agent, "setup", None)
    if setup is not None:
        setup(services)
    env = WebEnv(EnvConfig(archive, backend=config["backend"], seed=config["seed"], max_steps=config["max_steps"],
                           screenshots=config["screenshots"], site_models=models,
                           rules=config.get("replay_rules") or None,
                           history=_history_provider(config["persona"], config["history"]),
                           upstream=config.get("upstream")))  # (live runs)
    _WORKER.update(env=env, config=config, manifest=manifest, agent=agent, services=services)


def _history_provider(folder: str | None, settings: dict):
    """``task -> the user's history handle`` (one per persona, opened once per worker), or None."""
    if folder is None:
        return None
    opened: dict = {}

    def provider(task: dict):
        pid = task.get("persona")
        if not pid:
            return None
        if pid not in opened:
            try:
                opened[pid] = open_user_history(folder, str(pid), **history_settings(settings))
            except RetrievalError as exc:  # a missing model or a bad history: no episode can go right
                raise RunError(str(exc)) from None
        return opened[pid]

    return provider


def close() -> None:
    """Close this worker's agent, its LLM services and its environment (errors ignored: it is going away)."""
    agent, services = _WORKER.pop("agent", None), _WORKER.pop("services", None)
    for closing in (getattr(agent, "close", None), getattr(services, "close", None)):
        if closing is not None:
            try:
                closing()
            except Exception:  # a worker that is going away reports nothing more
                pass
    env = _WORKER.pop("env", None)
    if env is not None:
        try:
            env.close()
        except Exception:  # interrupted: the browser may already be gone
            pass


def play(task: dict, reference: dict | None) -> tuple[dict, dict, dict]:
    """One task in this worker's environment: returns (trajectory, screenshots by step, summary),
    nothing written. Every executor plays episodes through this function.

    The agent sees a :class:`~webfreeze.agents.TaskView` of ``task`` (no ground truth) and the
    ``reference`` only if it is an oracle. The trajectory names the cassette entries the episode
    used (``llm_entries``, ``[key, n]`` pairs) when it used any: the run's LLM digest covers them."""
    env, config, manifest, agent = _WORKER["env"], _WORKER["config"], _WORKER["manifest"], _WORKER["agent"]
    context_record = task.get("context_record")
    if context_record is not None:
        task = {k: v for k, v in task.items() if k != "context_record"}
    view = TaskView.from_task(task, reference if is_oracle(agent) else None)
    cassette = _worker_cassette()
    if cassette is not None:
        cassette.take_used()  # nothing of an earlier episode counts for this one
    t0 = time.perf_counter()
    error, cause = None, None
    try:
        agent.reset(view)
    except AgentError as exc:
        error, cause = str(exc), AGENT_CAUSE
    except LLMError as exc:
        if not isinstance(exc, ProviderError):
            # strict replay missed, a damaged cassette, no API key: no episode of this run can go right
            raise RunError(str(exc)) from None
        error, cause = str(exc), "provider"
    except Exception as exc:  # an agent's own bug ends its episode, not the run
        error, cause = f"agent failed in reset: {type(exc).__name__}: {exc}", AGENT_CAUSE
    obs, _ = env.reset(seed=config["seed"], options={"task": task})
    while error is None:
        a0 = time.perf_counter()
        try:
            out = agent.act(obs)
            if not isinstance(out, dict) or not isinstance(out.get("action"), str):
                raise AgentError(f"act() must return a dict with an 'action' string, not {type(out).__name__}")
        except LLMError as exc:
            if not isinstance(exc, ProviderError):  # e.g. strict replay missed: this is not the recorded run
                raise RunError(str(exc)) from None
            error, cause = str(exc), "provider"  # an infrastructure failure, counted apart
            break
        except Exception as exc:  # an agent's own bug ends its episode, not the run
            error, cause = f"agent failed: {type(exc).__name__}: {exc}", AGENT_CAUSE
            break
        fields = {k: v for k, v in out.items() if k != "action"}
        fields["agent_ms"] = round((time.perf_counter() - a0) * 1000, 3)
        obs, _, terminated, truncated, _ = env.step(out["action"], agent=fields)
        if terminated or truncated:
            break
    failed = live.episode_failure(env.site_failures())  # live runs: the site failed, not the agent
    if failed and error is None:
        error, cause = failed, live.SITE_CAUSE
    trajectory = env.trajectory(stopped=error is not None)
    if error is not None:
        trajectory["end"] = {"reason": "error", "detail": error}
        if cause:
            trajectory["end"]["cause"] = cause
    trajectory["agent"] = manifest["agent"]
    trajectory["suite"] = {"name": manifest["suite"]["name"], "digest": manifest["suite"]["digest"]}
    trajectory["env"]["site_models"] = config["site_models"]
    if context_record is not None:
        trajectory["context"] = context_record
    cassette = _worker_cassette()  # (an agent opens the cassette at its first call: maybe in this episode)
    used = cassette.take_used() if cassette is not None else []
    if used:
        trajectory["llm_entries"] = used
    # screenshots by step, and the DOM snapshots by their dom/ path (write_trajectory writes both)
    shots = {**env.recorder.shots, **env.recorder.doms} if env.recorder else {}
    summary = {"task_id": task["id"], "end": trajectory["end"]["reason"], "steps": len(trajectory["steps"]),
               "ms": round((time.perf_counter() - t0) * 1000, 1)}
    if cause:
        summary["cause"] = cause
    return trajectory, shots, summary


def _worker_cassette():
    """The cassette this worker's agent opened through its services (None when it opened none: an
    agent without LLM calls never opens one)."""
    services = _WORKER.get("services")
    return getattr(services, "_cassette", None)  # (read, never opened here)


def run_episode(task: dict, reference: dict | None) -> dict:
    """One task in this worker's environment; writes its trajectory and returns a summary."""
    trajectory, shots, summary = play(task, reference)
    write_trajectory(trajectory, _WORKER["config"]["out"], shots)
    return summary


def pool_episode(task: dict, reference: dict | None) -> dict:
    """:func:`run_episode` in a pool process, or the one-line reason this process could not start."""
    if "init_error" in _WORKER:  # this worker could not start: say why, in one line, for every task
        raise RunError(_WORKER["init_error"])
    return run_episode(task, reference)


def pool_init(config: dict, archive: str, manifest: dict, llm: dict) -> None:
    """A pool process's initializer: :func:`init`, with a failure kept as one line for its episodes."""
    atexit.register(close)
    try:
        init(config, archive, manifest, llm)
    except Exception as exc:  # an initializer's exception would break the whole pool with tracebacks
        _WORKER["init_error"] = one_line(exc)


def one_line(exc: BaseException) -> str:
    """What a worker that failed tells the user: an error of ours as it is, anything else in one line."""
    from webfreeze.simulator.env import EnvError  # (late: the sim extra, as in init)

    if isinstance(exc, (AgentError, LLMError, EnvError, RunError)):
        return str(exc)
    return f"a worker could not start: {type(exc).__name__}: {exc}".splitlines()[0]

