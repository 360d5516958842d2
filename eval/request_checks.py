"""The ``requests`` ground truth: requests the agent must have sent, each answered as recorded.

A task whose point is an action on a recorded application (post a reply, file an issue, save a
page) cannot be told apart, by its answer alone, from an agent that only said it had done it. Its
``requests`` checks (docs/suites-and-runs.md) name what the action sends: ``{"method": "POST",
"url": "http://forum.test/topic/3/reply"}``. A check holds when the episode's replay provenance
(the start's and every step's ``replay.answers``, docs/trajectories.md) holds an answer to that
method and URL (:func:`same_request_url`: fragment, scheme and parameters starting with ``_``
aside) at a level that answers as recorded: ``exact``, ``canonical`` or ``model`` (a site model);
not ``live`` (``--patch-from-live`` sends a POST the archive lacks to the site as it is). Honest matching
answers a POST only when its body matches a recorded one (fields the replay rules call ignorable
aside), so a held check means the agent sent what the recorded person sent; a ``fuzzy`` answer or a
miss does not hold (the detail says it was sent but not answered as recorded). Ours: Persona2Web,
WebArena and WebCanvas have no such check; the nearest are WebArena's URL checks.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from webfreeze.common.http import page_url

# The levels at which a request counts as answered as recorded (simulator/provenance.py LEVELS).
# Not "live": with --patch-from-live a POST the archive does not hold is sent to the site as it is.
ANSWERED = ("exact", "canonical", "model")


def same_request_url(a: str, b: str) -> bool:
    """Whether two URLs name one request as a check reads them: the fragment dropped, the scheme,
    the host's case and a default port ignored, and the query compared as a set of pairs without
    those whose name starts with ``_`` (jQuery's cache buster ``_=``), as the replay's canonical
    level also reads them."""
    def key(url: str):
        parts = urlsplit(page_url(url))
        host = (parts.hostname or "").lower()
        port = parts.port
        if port is not None and (parts.scheme, port) not in (("http", 80), ("https", 443)):
            host = f"{host}:{port}"
        query = sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not k.startswith("_"))
        return host, parts.path or "/", query
    try:
        return key(a) == key(b)
    except ValueError:  # (a URL that does not split: only itself)
        return a == b


def among(sent, method: str, url: str) -> bool:
    """Whether the requests ``sent`` (``"METHOD URL"`` each) hold ``method url``, URLs compared as
    a check compares them (:func:`same_request_url`)."""
    method = str(method).upper()
    return any(m.upper() == method and same_request_url(u, url) for m, _, u in (str(s).partition(" ") for s in sent))


def episode_answers(trajectory: dict) -> list[dict] | None:
    """Every answer of an episode's replay provenance (the start's, then each step's), or None when
    the trajectory records none (written before provenance, or by an environment without a replay)."""
    replay = trajectory.get("replay")
    if not isinstance(replay, dict):
        return None
    parts = [replay.get("start")] + [s.get("replay") for s in trajectory.get("steps") or [] if isinstance(s, dict)]
    return [a for p in parts if isinstance(p, dict) for a in p.get("answers") or [] if isinstance(a, dict)]


def evaluate_requests(checks: list[dict], trajectory: dict) -> dict:
    """``success`` (every check held), ``score`` (the share that held) and ``checks``: each with
    ``method``, ``url``, ``passed`` and ``detail``."""
    answers = episode_answers(trajectory)
    out = []
    for c in checks:
        method, url = str(c["method"]).upper(), page_url(str(c["url"]))
        if answers is None:
            out.append({"method": method, "url": url, "passed": False,
                        "detail": "the trajectory records no replay provenance"})
            continue
        sent = [a for a in answers if str(a.get("method", "")).upper() == method
                and same_request_url(str(a.get("url", "")), url)]
        held = [a for a in sent if a.get("level") in ANSWERED]
        if held:
            detail = f"sent and answered ({held[0]['level']}, status {held[0].get('status')})"
        elif sent:
            detail = f"sent, but not answered as recorded ({sent[0].get('level')})"
        else:
            detail = "never sent"
        out.append({"method": method, "url": url, "passed": bool(held), "detail": detail})
    passed = sum(1 for c in out if c["passed"])
    return {"success": passed == len(out), "score": passed / len(out) if out else 0.0, "checks": out}


__all__ = ["ANSWERED", "episode_answers", "evaluate_requests", "same_request_url"]
