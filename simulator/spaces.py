"""Gymnasium spaces that the environment's real observations and actions belong to.

Gymnasium's own ``Text`` space admits only the characters of its charset (alphanumerics by
default), while an accessibility tree, a URL or an agent's action holds any character; these spaces
admit any string (within a length), a list of element summaries, and an optional PNG. Their
``sample()`` draws from printable ASCII with the space's generator, so that
``gymnasium.utils.env_checker.check_env`` can send random actions (which the environment answers
with a parse error in ``last_action_error``, as for any bad action).
"""

from __future__ import annotations

import string

import gymnasium as gym
import numpy as np

_PRINTABLE = np.array(list(string.printable[:95]))  # letters, digits, punctuation, space


class _PythonSpace(gym.Space):
    """A space of plain Python values (no array shape, not flattenable to NumPy)."""

    def __init__(self, seed=None):
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and vars(other).get("max_length") == vars(self).get("max_length")


class AnyText(_PythonSpace):
    """Any ``str`` of at most ``max_length`` characters."""

    def __init__(self, max_length: int, seed=None):
        self.max_length = max_length
        super().__init__(seed=seed)

    def sample(self, mask=None, probability=None) -> str:
        n = int(self.np_random.integers(1, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_PRINTABLE, size=n))

    def contains(self, x) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.max_length})"


class TextList(_PythonSpace):
    """A list of strings (the open pages' URLs)."""

    def sample(self, mask=None, probability=None) -> list:
        return ["about:blank"]

    def contains(self, x) -> bool:
        return isinstance(x, list) and all(isinstance(s, str) for s in x)


class ElementList(_PythonSpace):
    """The observation's ``elements``: a list of element summaries, each a dict with a string ``bid``."""

    def sample(self, mask=None, probability=None) -> list:
        return [{"bid": "1", "role": "link", "name": "", "visible": True, "clickable": True}]

    def contains(self, x) -> bool:
        return isinstance(x, list) and all(isinstance(e, dict) and isinstance(e.get("bid"), str) for e in x)


class OptionalPNG(_PythonSpace):
    """A screenshot: PNG bytes, or None when the environment takes none."""

    def sample(self, mask=None, probability=None):
        return None

    def contains(self, x) -> bool:
        return x is None or (isinstance(x, bytes) and x.startswith(b"\x89PNG"))


class HistoryResults(_PythonSpace):
    """The observation's ``history_results``: the entries a history search returned (dicts with a
    string ``id`` and a numeric ``score``), empty after any other step."""

    def sample(self, mask=None, probability=None) -> list:
        return []

    def contains(self, x) -> bool:
        return isinstance(x, list) and all(
            isinstance(e, dict) and isinstance(e.get("id"), str) and isinstance(e.get("score"), (int, float))
            for e in x)


def observation_space(max_steps: int) -> gym.spaces.Dict:
    """The space of :meth:`WebEnv.reset`'s and :meth:`WebEnv.step`'s observations."""
    return gym.spaces.Dict({
        "url": AnyText(8192), "title": AnyText(4096), "goal": AnyText(65536),
        "axtree_text": AnyText(10**8), "elements": ElementList(), "screenshot": OptionalPNG(),
        "open_pages": TextList(), "last_action_error": AnyText(65536),
        "step": gym.spaces.Discrete(max_steps + 1),
        "history": AnyText(10**6), "history_results": HistoryResults(),
    })


def action_space() -> AnyText:
    """An action is one string in any of the three dialects (simulator/actions.py)."""
    return AnyText(4096)
