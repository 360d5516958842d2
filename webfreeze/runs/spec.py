"""A run's settings, as two types: :class:`RunSpec` (what the run is: equal specs give equal
trajectories) and :class:`RunOptions` (how it is executed), built in one place (:func:`build_run`);
and the names every part of a run shares: the run folder's format, the cassette's file name,
:class:`RunError`, the typed settings of a context condition (:class:`ContextSettings`) and of the
history retrieval (:class:`HistorySettings`).

:class:`RunSpec` is frozen and checks its settings when it is made (one :class:`RunError` line
naming the setting): a bad ``wf.run(...)`` setting is refused before anything starts, and a spec
filled in later (:func:`webfreeze.runs.prepare.prepare`) is a new spec (``dataclasses.replace``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from webfreeze.common.errors import WebfreezeError
from webfreeze.runs.context import CONTEXT_KEYS, ContextError  # noqa: F401  (CONTEXT_KEYS: RunSpec.context's keys)
from webfreeze.runs.context import check_context as check_context_condition
from webfreeze.simulator.backends import check_backend
from webfreeze.simulator.site_models import check_site_models

RUN_FORMAT = "webfreeze-run"
RUN_VERSION = 1
CASSETTE_NAME = "llm-cassette.sqlite"
CASSETTE_MODES = ("record", "replay", "auto")
ORACLE_LABEL = "upper bound"


class RunError(WebfreezeError, RuntimeError):
    """The run cannot start or continue: one line for the user."""


# ------------------------------------------------------------------------------------ value checks
def _whole(value, what: str, *, low: int | None = None, none_ok: bool = False):
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        bound = f", {low} or more" if low is not None else ""
        raise RunError(f"{what} must be a whole number{bound} (not {value!r})")
    return value


def _flag(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise RunError(f"{what} must be true or false (not {value!r})")
    return value


def _text(value, what: str, *, none_ok: bool = False):
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise RunError(f"{what} must be a string (not {value!r})")
    return value


def _table(value, what: str) -> dict:
    """A JSON object with string keys, copied (a caller's dict changed later does not change the spec)."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise RunError(f"{what} must be a table of named settings (not {value!r})")
    return dict(value)


# ------------------------------------------------------------------------------------ typed settings
HISTORY_SETTINGS = ("k", "threshold", "model", "key_fields")
KEY_FIELDS = ("timestamp", "type", "object", "website")


@dataclass(frozen=True)
class HistorySettings:
    """The history-retrieval settings (Persona2Web's defaults: the top 20 entries above 0.5
    similarity, keyed on type + object). Made with :meth:`of`, which checks them."""

    k: int = 20
    threshold: float = 0.5
    model: str = "all-MiniLM-L6-v2"
    key_fields: tuple[str, ...] = ("type", "object")

    @classmethod
    def of(cls, given: HistorySettings | Mapping | None) -> HistorySettings:
        """``given`` (a table of :data:`HISTORY_SETTINGS`, None values meaning the default, or
        settings already made) checked; :class:`RunError` names the first bad one."""
        if isinstance(given, HistorySettings):
            given = given.as_dict()
        if given is None:
            given = {}
        if not isinstance(given, Mapping):
            raise RunError(f"history must be a table of {', '.join(HISTORY_SETTINGS)} (not {given!r})")
        unknown = sorted(set(given) - set(HISTORY_SETTINGS), key=str)
        if unknown:
            raise RunError(f"unknown history setting {unknown[0]!r} (known: {', '.join(HISTORY_SETTINGS)})")
        out = {f.name: f.default for f in fields(cls)}
        out.update({k: v for k, v in given.items() if v is not None})
        k, threshold, model, key_fields = out["k"], out["threshold"], out["model"], out["key_fields"]
        if isinstance(key_fields, str):
            key_fields = [f.strip() for f in key_fields.split(",") if f.strip()]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise RunError(f"history k (--history-k) must be a whole number, 1 or more (not {k!r})")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1 <= threshold <= 1:
            raise RunError(f"history threshold (--history-threshold) must be a similarity between -1 and 1 (not {threshold!r})")
        if not isinstance(model, str) or not model.strip():
            raise RunError(f"the history model must name an embedding model (not {model!r})")
        if not isinstance(key_fields, (list, tuple)) or not all(isinstance(f, str) for f in key_fields):
            raise RunError(f"history key_fields (--key-fields) takes some of {', '.join(KEY_FIELDS)} (not {key_fields!r})")
        bad = [f for f in key_fields if f not in KEY_FIELDS]
        if bad or not key_fields:
            raise RunError(f"history key_fields (--key-fields) takes some of {', '.join(KEY_FIELDS)} (not {','.join(key_fields)!r})")
        return cls(k=k, threshold=threshold, model=model, key_fields=tuple(key_fields))

    def as_dict(self) -> dict:
        """The settings as the manifest's ``personas.retrieval`` writes them."""
        return {"k": self.k, "threshold": self.threshold, "model": self.model, "key_fields": list(self.key_fields)}


@dataclass(frozen=True)
class ContextSettings:
    """A long-context condition (:mod:`webfreeze.runs.context`): the prior context's size in
    tokens, the tokenizer that counts it, the seed of the filler's order, the filler pool's path
    and the run to take subtask A1's trajectories from (None: this run). Made with :meth:`of`."""

    tokens: int
    tokenizer: str
    seed: int = 0
    pool: str | None = None
    a1_run: str | None = None

    @classmethod
    def of(cls, given: ContextSettings | Mapping | None) -> ContextSettings | None:
        """``given`` checked and filled in (:func:`webfreeze.runs.context.check_context`); None
        for no condition (``None`` or ``{}``). :class:`RunError` names the bad key."""
        if given is None or isinstance(given, ContextSettings):
            return given
        if isinstance(given, Mapping):
            given = dict(given)
        checked = check_context(given)
        return cls(**checked) if checked else None

    def as_dict(self) -> dict:
        return {"tokens": self.tokens, "tokenizer": self.tokenizer, "seed": self.seed, "pool": self.pool,
                "a1_run": self.a1_run}


# ------------------------------------------------------------------------------------ the two types
@dataclass(frozen=True)
class RunSpec:
    """What a run is: everything that must be equal for two runs to give equal trajectories. The
    manifest's identity (suite, archive, agent, env, selection, personas, context) is made from it
    (:func:`webfreeze.runs.prepare.prepare`); a run folder holding another spec is refused.

    Made, every setting is checked (:class:`RunError`, one line naming it) and the typed ones
    converted: ``history`` a table becomes :class:`HistorySettings`, ``context`` a table
    :class:`ContextSettings` (``{}``: None), ``tasks`` a tuple."""

    suite: str
    agent: str
    archive: str | None = None                 # None: the one the suite's manifest names
    agent_config: dict = field(default_factory=dict)  # the agent's own settings (its shape is the agent's)
    backend: str = "browser"
    seed: int = 0
    max_steps: int = 30
    screenshots: bool = False                  # (the browser takes one per step: part of the run)
    site_models: dict = field(default_factory=dict)  # host -> simulated site kind (over the suite's)
    # the suite manifest's replay_rules (filled in by prepare): over the archive's, over the agent defaults
    replay_rules: dict = field(default_factory=dict)
    tasks: tuple[str, ...] = ()                # task-id globs to run (empty: all)
    limit: int | None = None                   # then at most the first N, in the suite's order
    persona: str | None = None                 # a persona folder (personas generate): the users' histories
    history: HistorySettings = field(default_factory=HistorySettings)  # the retrieval settings
    # long-context condition (webfreeze.runs.context): None, or its tokens, pool, tokenizer, seed[, a1_run]
    context: ContextSettings | None = None

    def __post_init__(self):
        def put(name: str, value) -> None:
            object.__setattr__(self, name, value)  # (frozen: only here, while it is made)

        _text(self.suite, "suite")
        if not isinstance(self.agent, str) or not self.agent.strip():
            raise RunError(f"agent must name an agent (not {self.agent!r})")
        _text(self.archive, "archive", none_ok=True)
        put("agent_config", _table(self.agent_config, "agent_config"))
        _text(self.backend, "backend")
        check_backend(self.backend, RunError)
        _whole(self.seed, "seed")
        _whole(self.max_steps, "max_steps", low=1)
        _flag(self.screenshots, "screenshots")
        site_models = _table(self.site_models, "site_models")
        if not all(isinstance(v, str) for v in site_models.values()):
            raise RunError(f"site_models maps a host to a site kind's name (not {site_models!r})")
        check_site_models(site_models, RunError)
        put("site_models", site_models)
        put("replay_rules", _table(self.replay_rules, "replay_rules"))
        tasks = (self.tasks,) if isinstance(self.tasks, str) else self.tasks
        if not isinstance(tasks, (list, tuple)) or not all(isinstance(t, str) and t for t in tasks):
            raise RunError(f"tasks must be task-id globs (not {self.tasks!r})")
        put("tasks", tuple(tasks))
        if _whole(self.limit, "limit", none_ok=True) is not None and self.limit < 1:
            raise RunError("--limit must be at least 1")
        _text(self.persona, "persona", none_ok=True)
        put("history", HistorySettings.of(self.history))
        put("context", ContextSettings.of(self.context))


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


def check_options(options: RunOptions) -> None:
    """The options' types and values, as :func:`build_run` takes them (the combinations, such as an
    executor's own settings, are checked by :func:`webfreeze.runs.prepare.prepare`)."""
    _text(options.out, "out")
    if _whole(options.workers, "workers") < 1:
        raise RunError("--workers must be at least 1")
    _text(options.executor, "executor")
    _text(options.ray_address, "ray_address", none_ok=True)
    timeout = options.episode_timeout_s
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise RunError(f"episode_timeout_s must be a number of seconds (not {timeout!r})")
    _whole(options.retries, "retries")
    _text(options.cassette, "cassette", none_ok=True)
    if options.cassette_mode not in CASSETTE_MODES:
        raise RunError(f"unknown cassette mode {options.cassette_mode!r} ({', '.join(CASSETTE_MODES)})")
    _whole(options.llm_concurrency, "llm_concurrency", low=1, none_ok=True)
    _flag(options.live, "live")
    _flag(options.patch_from_live, "patch_from_live")
    _text(options.record_into, "record_into", none_ok=True)
    _table(options.resolve, "resolve")


SPEC_SETTINGS = tuple(f for f in RunSpec.__dataclass_fields__ if f not in ("suite", "agent", "archive",
                                                                          "replay_rules"))
OPTION_SETTINGS = tuple(f for f in RunOptions.__dataclass_fields__ if f != "out")


def build_run(suite, agent: str, out, *, archive=None, **settings) -> tuple[RunSpec, RunOptions]:
    """The one place a run's settings become a :class:`RunSpec` and :class:`RunOptions`: for
    ``bench run``, studies' cells, ``bundle run`` and :func:`webfreeze.run` alike. ``settings`` are
    the two types' fields by name (paths may be ``Path``s; ``tasks`` may be one glob; ``history``
    and ``context`` tables or their typed settings). An unknown setting, or one of the wrong type
    or value, is a :class:`RunError` naming it, here, before the run starts."""
    unknown = sorted(set(settings) - set(SPEC_SETTINGS) - set(OPTION_SETTINGS))
    if unknown:
        known = ", ".join(sorted(SPEC_SETTINGS + OPTION_SETTINGS))
        raise RunError(f"a run has no setting {unknown[0]!r} (its settings: {known})")
    # (None is "the default" for every setting: a front end passes what it was not given as None)
    spec = {k: v for k, v in settings.items() if k in SPEC_SETTINGS and v is not None}
    options = {k: v for k, v in settings.items() if k in OPTION_SETTINGS and v is not None}
    if "persona" in spec:
        spec["persona"] = str(spec["persona"])
    if "cassette" in options:
        options["cassette"] = str(options["cassette"])
    built = RunSpec(suite=str(suite), agent=agent, archive=str(archive) if archive else None, **spec)
    run_options = RunOptions(out=str(out), **options)
    check_options(run_options)
    return built, run_options


def check_context(context: Mapping | None) -> dict:
    """A context condition (``RunSpec.context``) checked and filled in, for a study file or a
    command line: ``{}`` or ``{tokens, tokenizer, seed, pool, a1_run}``; raises :class:`RunError`
    (one line naming the key). See :func:`webfreeze.runs.context.check_context`."""
    try:
        return check_context_condition(dict(context) if context is not None else None)
    except ContextError as exc:
        raise RunError(str(exc)) from None


def history_settings(given: HistorySettings | Mapping | None) -> dict:
    """The retrieval settings, defaults filled in (Persona2Web's: top 20 above 0.5, key type + object),
    as a table (:meth:`HistorySettings.as_dict`)."""
    return HistorySettings.of(given).as_dict()
