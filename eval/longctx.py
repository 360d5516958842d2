"""Long-context scores: retrieval success of a dependent task (subtask A2 of the long-context
WebAgents paper).

The paper asks whether the agent, placed after a long injected history on some other page, goes
back to where subtask A1 happened. Per dependent task (``depends_on``) we record, under
``long_context``:

- ``a1_url``: where A1 ended (the trajectory's ``context.a1_url`` when the runner composed a context,
  else the final URL of A1's trajectory in the same run); ``a1_host`` its host;
- ``start_url``: where A2's episode started (``context.start_url``, else its first step's URL);
- ``started_elsewhere``: ``"domain"`` when A2 started on another host than A1's page, ``"page"``
  when on A1's host but another page, None when it started on A1's page itself (then there is
  nothing to retrieve: the "none" condition starts there);
- ``returned_to_domain`` / ``returned_to_page``: whether any page A2 visited after its start is on
  A1's host / is A1's page (URLs compared without fragment and trailing slash);
- ``retrieval_success``: ``returned_to_domain`` when it started on another domain,
  ``returned_to_page`` when it started on A1's domain elsewhere, None when not applicable (started
  on A1's page, or no A1 outcome known) -- our reading, docs/long-context.md;
- ``context_tokens`` / ``target_tokens`` / ``fillers``: the injected context (None without one).

:func:`summarise` aggregates the dependent tasks of a run (``report.json`` ``long_context``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from webfreeze.common.http import page_url


def _norm(url) -> str | None:
    if not isinstance(url, str) or not url:
        return None
    return page_url(url).rstrip("/")  # (a hash route, #/faq, is a page of its own)


def _host(url) -> str | None:
    try:
        return urlsplit(url).hostname if isinstance(url, str) and url else None
    except ValueError:
        return None


def final_url(traj: dict | None) -> str | None:
    """Where an episode ended: ``final_url``, else the last step's URL after acting (or before)."""
    if not isinstance(traj, dict):
        return None
    if isinstance(traj.get("final_url"), str) and traj["final_url"]:
        return traj["final_url"]
    for s in reversed(traj.get("steps") or []):
        for key in ("url_after", "url"):
            if isinstance(s, dict) and isinstance(s.get(key), str) and s[key]:
                return s[key]
    return None


def visited_after_start(traj: dict) -> list[str]:
    """The pages an episode showed after its start page, in order (each step's URL after acting,
    the next steps' URLs, the final URL)."""
    urls = []
    steps = [s for s in traj.get("steps") or [] if isinstance(s, dict) and s.get("kind") != "history"]
    for i, s in enumerate(steps):
        if i > 0 and isinstance(s.get("url"), str):
            urls.append(s["url"])
        if isinstance(s.get("url_after"), str):
            urls.append(s["url_after"])
    if steps and isinstance(traj.get("final_url"), str) and traj["final_url"]:
        urls.append(traj["final_url"])
    return urls


def retrieval(trajectory: dict | None, a1_url: str | None, start_url: str | None = None) -> dict:
    """The ``long_context`` record of one A2 episode, given where A1 ended (see the module docstring)."""
    ctx = trajectory.get("context") if isinstance(trajectory, dict) and isinstance(trajectory.get("context"),
                                                                                    dict) else {}
    steps = (trajectory or {}).get("steps") or []
    if start_url is None:
        start_url = ctx.get("start_url") or (steps[0].get("url") if steps and isinstance(steps[0], dict) else None)
    out = {"a1_url": a1_url, "a1_host": _host(a1_url), "start_url": start_url, "started_elsewhere": None,
           "returned_to_domain": None, "returned_to_page": None, "retrieval_success": None,
           "context_tokens": ctx.get("tokens"), "target_tokens": ctx.get("target_tokens"),
           "fillers": len(ctx["fillers"]) if isinstance(ctx.get("fillers"), list) else None}
    if trajectory is None or a1_url is None or start_url is None:
        return out
    a1_page, a1_host = _norm(a1_url), _host(a1_url)
    later = visited_after_start(trajectory)
    out["returned_to_domain"] = any(_host(u) == a1_host for u in later)
    out["returned_to_page"] = any(_norm(u) == a1_page for u in later)
    if _host(start_url) != a1_host:
        out["started_elsewhere"] = "domain"
        out["retrieval_success"] = out["returned_to_domain"]
    elif _norm(start_url) != a1_page:
        out["started_elsewhere"] = "page"
        out["retrieval_success"] = out["returned_to_page"]
    return out


def long_context_results(tasks: list, trajectories: dict, results: list[dict]) -> None:
    """Add ``long_context`` to the result of every dependent task of a run (in place). ``tasks``
    are the run's :class:`~webfreeze.eval.tasks.Task` objects, ``trajectories`` by task id."""
    by_id = {r["task_id"]: r for r in results}
    for task in tasks:
        dep = task.depends_on
        if dep is None or task.id not in by_id:
            continue
        traj = trajectories.get(task.id)
        ctx = traj.get("context") if isinstance(traj, dict) and isinstance(traj.get("context"), dict) else {}
        a1_url = ctx.get("a1_url") if "a1_url" in ctx else final_url(trajectories.get(dep))
        rec = retrieval(traj, a1_url)
        rec["a1_task"] = dep
        a1_result = by_id.get(dep)
        rec["a1_success"] = a1_result.get("success") if a1_result and a1_result["outcome"] != "missing" else None
        by_id[task.id]["long_context"] = rec


def summarise(results: list[dict]) -> dict | None:
    """The run's dependent tasks together: their success rate (the paper's TS), retrieval success
    over those where it applies (RS), and the context sizes. None when the run has none."""
    dependent = [r for r in results if isinstance(r.get("long_context"), dict)]
    if not dependent:
        return None
    ran = [r for r in dependent if r.get("outcome") != "missing"]
    applicable = [r for r in ran if r["long_context"]["retrieval_success"] is not None]
    tokens = [r["long_context"]["context_tokens"] for r in ran if isinstance(r["long_context"]["context_tokens"], int)]
    targets = sorted({r["long_context"]["target_tokens"] for r in ran
                      if isinstance(r["long_context"]["target_tokens"], int)})
    hits = sum(1 for r in applicable if r["long_context"]["retrieval_success"])
    return {"dependent_tasks": len(dependent), "ran": len(ran),
            "success_rate": (sum(1 for r in ran if r.get("success")) / len(ran)) if ran else None,
            "retrieval": {"applicable": len(applicable), "successes": hits,
                          "rate": hits / len(applicable) if applicable else None},
            "target_tokens": targets, "mean_context_tokens": sum(tokens) / len(tokens) if tokens else None}
