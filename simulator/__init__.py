"""What an agent lives in: the environment over a replayed archive (observations, actions,
trajectories), its browser and text backends, simulated stateful sites and multi-session histories.

Public names (imported on first use, so that importing one module of the stage stays light):
:class:`WebEnv`, :class:`EnvConfig`, :class:`EnvError` (``env``); :class:`Action`,
:func:`parse_action`, :func:`try_parse`, :func:`format_action`, :class:`ActionError` (``actions``);
:class:`TrajectoryRecorder`, :func:`write_trajectory` (``trajectory``); :class:`SimulatedSiteModel`
(``site_models``).
"""

from importlib import import_module

_PUBLIC = {
    "WebEnv": "env", "EnvConfig": "env", "EnvError": "env",
    "Action": "actions", "ActionError": "actions", "parse_action": "actions", "try_parse": "actions",
    "format_action": "actions", "DIALECTS": "actions",
    "TrajectoryRecorder": "trajectory", "write_trajectory": "trajectory",
    "SimulatedSiteModel": "site_models",
}


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


__all__ = sorted(_PUBLIC)
