"""A run's settings, as two types: :class:`RunSpec` (what the run is: equal specs give equal
trajectories) and :class:`RunOptions` (how it is executed), built in one place (:func:`build_run`);
and the names every part of a run shares: the run folder's format, the cassette's file name,
:class:`RunError`, the checks of a context condition and of the history-retrieval settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from webfreeze.common.errors import WebfreezeError
from webfreeze.runs.context import CONTEXT_KEYS, ContextError  # noqa: F401  (CONTEXT_KEYS: RunSpec.context's keys)
from webfreeze.runs.context import check_context as check_context_condition

RUN_FORMAT = "webfreeze-run"
RUN_VERSION = 1
CASSETTE_NAME = "llm-cassette.sqlite"
CASSETTE_MODES = ("record", "replay", "auto")
ORACLE_LABEL = "upper bound"


class RunError(WebfreezeError, RuntimeError):
    """The run cannot start or continue: one line for the user."""


@dataclass
class RunSpec:
    """What a run is: everything that must be equal for two runs to give equal trajectories. The
    manifest's identity (suite, archive, agent, env, selection, personas, context) is made from it
    (:func:`webfreeze.runs.prepare.prepare`); a run folder holding another spec is refused."""

    suite: str
    agent: str
    archive: str | None = None                 # None: the one the suite's manifest names
    agent_config: dict = field(default_factory=dict)
    backend: str = "browser"
    seed: int = 0
    max_steps: int = 30
    screenshots: bool = False                  # (the browser takes one per step: part of the run)
    site_models: dict = field(default_factory=dict)  # host -> simulated site kind (over the suite's)
    # the suite manifest's replay_rules (filled in by prepare): over the archive's, over the agent defaults
    replay_rules: dict = field(default_factory=dict)
    tasks: list = field(default_factory=list)  # task-id globs to run (empty: all)
    limit: int | None = None                   # then at most the first N, in the suite's order
    persona: str | None = None                 # a persona folder (personas generate): the users' histories
    history: dict = field(default_factory=dict)  # retrieval settings: k, threshold, model, key_fields
    # long-context condition (webfreeze.runs.context): {} none; else tokens, pool, tokenizer, seed[, a1_run]
    context: dict = field(default_factory=dict)


@dataclass
class RunOptions:
    """How a run is executed: none of it changes a trajectory. The manifest keeps what matters of it
    as circumstances (workers, executor, where the cassette was and in which mode)."""

    out: str                                   # the run folder
    workers: int = 1
    executor: str = "local"                    # local (this machine's process pool) or ray
    ray_address: str | None = None             # an existing Ray cluster (None: a local Ray for the run)
    episode_timeout_s: float | None = None     # ray: an episode running longer ends as an error
    retries: int = 2                           # ray: re-runs of an episode after an infrastructure failure
    cassette: str | None = None                # default: RUN_DIR/llm-cassette.sqlite
    cassette_mode: str = "record"
    llm_concurrency: int | None = None         # LLM calls in flight at once, across the workers
    # live runs (webfreeze/runs/live.py, docs/live.md): the run records itself, or patches the archive's
    # misses live; kept out of the identity: a live run and its offline re-run are the same run
    live: bool = False
    patch_from_live: bool = False
    record_into: str | None = None             # default RUN_DIR/live.wfz (or patched.wfz)
    resolve: dict = field(default_factory=dict)  # host -> (address, port), as record's --resolve
    upstream: dict | None = None               # set by live.run_live for the workers
    # live runs: (user, password) the browser answers HTTP authentication with (never written anywhere)
    http_credentials: tuple | None = None


SPEC_SETTINGS = tuple(f for f in RunSpec.__dataclass_fields__ if f not in ("suite", "agent", "archive",
                                                                          "replay_rules"))
OPTION_SETTINGS = tuple(f for f in RunOptions.__dataclass_fields__ if f != "out")


def build_run(suite, agent: str, out, *, archive=None, **settings) -> tuple[RunSpec, RunOptions]:
    """The one place a run's settings become a :class:`RunSpec` and :class:`RunOptions`: for
    ``bench run``, studies' cells, ``bundle run`` and :func:`webfreeze.run` alike. ``settings`` are
    the two types' fields by name (paths may be ``Path``s; ``tasks`` may be one glob); an unknown
    one is a :class:`RunError` naming it."""
    unknown = sorted(set(settings) - set(SPEC_SETTINGS) - set(OPTION_SETTINGS))
    if unknown:
        known = ", ".join(sorted(SPEC_SETTINGS + OPTION_SETTINGS))
        raise RunError(f"a run has no setting {unknown[0]!r} (its settings: {known})")
    # (None is "the default" for every setting: a front end passes what it was not given as None)
    spec = {k: v for k, v in settings.items() if k in SPEC_SETTINGS and v is not None}
    options = {k: v for k, v in settings.items() if k in OPTION_SETTINGS and v is not None}
    if isinstance(spec.get("tasks"), str):  # one glob, not a sequence of one-letter globs
        spec["tasks"] = [spec["tasks"]]
    if "tasks" in spec:
        spec["tasks"] = list(spec["tasks"])
    for key in ("agent_config", "site_models", "history", "context"):
        if key in spec:
            spec[key] = dict(spec[key])
    if "persona" in spec:
        spec["persona"] = str(spec["persona"])
    if "cassette" in options:
        options["cassette"] = str(options["cassette"])
    return (RunSpec(suite=str(suite), agent=agent, archive=str(archive) if archive else None, **spec),
            RunOptions(out=str(out), **options))


def check_context(context: dict | None) -> dict:
    """A context condition (``RunSpec.context``) checked and filled in, for a study file or a
    command line: ``{}`` or ``{tokens, tokenizer, seed, pool, a1_run}``; raises :class:`RunError`
    (one line naming the key). See :func:`webfreeze.runs.context.check_context`."""
    try:
        return check_context_condition(context)
    except ContextError as exc:
        raise RunError(str(exc)) from None


HISTORY_SETTINGS = ("k", "threshold", "model", "key_fields")


def history_settings(given: dict) -> dict:
    """The retrieval settings, defaults filled in (Persona2Web's: top 20 above 0.5, key type + object)."""
    out = {"k": 20, "threshold": 0.5, "model": "all-MiniLM-L6-v2", "key_fields": ["type", "object"]}
    out.update({k: v for k, v in given.items() if v is not None})
    if isinstance(out["key_fields"], str):
        out["key_fields"] = [f.strip() for f in out["key_fields"].split(",") if f.strip()]
    if isinstance(out["k"], bool) or not isinstance(out["k"], int) or out["k"] < 1:
        raise RunError(f"--history-k must be a whole number, 1 or more (not {out['k']!r})")
    if isinstance(out["threshold"], bool) or not isinstance(out["threshold"], (int, float)) \
            or not -1 <= out["threshold"] <= 1:
        raise RunError(f"--history-threshold must be a similarity between -1 and 1 (not {out['threshold']!r})")
    fields = ("timestamp", "type", "object", "website")
    bad = [f for f in out["key_fields"] if f not in fields]
    if bad or not out["key_fields"]:
        raise RunError(f"--key-fields takes some of {', '.join(fields)} (not {','.join(out['key_fields'])!r})")
    out["key_fields"] = list(out["key_fields"])
    return out
