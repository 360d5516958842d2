"""Checks over the exported site state (``trajectory["final_state"]``: host -> the site's export).

A check (docs/suites-and-runs.md) is ``{"host", "path", <test>}``; ``path`` is dotted (``cart.items``; a list
index is a number: ``cart.items.0.sku``; ``""`` is the host's whole export). Tests:

- ``contains``: the value at path is a list holding an element that contains the given value —
  for an object, every given key is present with a containing value (recursively; numbers
  compare by value, so 2 == 2.0); for anything else, equality. On a string, ``contains`` with a
  string is a substring test; on an object, ``contains`` with an object is the same key test.
- ``count``: the value at path is a list or object with exactly that many entries.
- ``equals``: the value at path equals the given value (numbers by value).

A missing host or path fails the check (the detail says which).
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


def resolve(state: Any, path: str) -> Any:
    cur = state
    for part in [p for p in path.split(".") if p != ""] if path else []:
        if isinstance(cur, dict):
            cur = cur.get(part, _MISSING)
        elif isinstance(cur, list) and part.lstrip("-").isdigit():
            idx = int(part)
            cur = cur[idx] if -len(cur) <= idx < len(cur) else _MISSING
        else:
            cur = _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def _contains(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` contains ``expected`` (the element test of ``contains``)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _contains(actual[k], v) for k, v in expected.items())
    return _equal(actual, expected)


def run_check(final_state: dict, check: dict) -> dict:
    host, path = check["host"], check.get("path", "")
    out = {"host": host, "path": path, "success": False, "detail": None}
    if host not in final_state:
        out["detail"] = f"no state exported for {host}"
        return out
    value = resolve(final_state[host], path)
    if value is _MISSING:
        out["detail"] = f"{host}: nothing at {path!r}"
        return out
    if "contains" in check:
        want = check["contains"]
        out["test"] = "contains"
        if isinstance(value, list):
            ok = any(_contains(el, want) for el in value)
        elif isinstance(value, str) and isinstance(want, str):
            ok = want in value
        elif isinstance(value, dict) and isinstance(want, dict):
            ok = _contains(value, want)
        else:
            ok = False
        out["success"] = ok
        if not ok:
            out["detail"] = f"{host}: {path!r} holds no match for {want!r}"
    elif "count" in check:
        out["test"] = "count"
        if isinstance(value, (list, dict)):
            out["success"] = len(value) == check["count"]
            out["detail"] = None if out["success"] else f"{host}: {path!r} has {len(value)}, expected {check['count']}"
        else:
            out["detail"] = f"{host}: {path!r} is not a list or object"
    else:
        out["test"] = "equals"
        out["success"] = _equal(value, check["equals"])
        if not out["success"]:
            out["detail"] = f"{host}: {path!r} is {value!r}, expected {check['equals']!r}"
    return out


def evaluate_final_state(checks: list[dict], trajectory: dict) -> dict:
    """``{"success", "score", "checks"}``; score = share of checks passing, success = all pass."""
    state = trajectory.get("final_state") or {}
    results = [run_check(state, c) for c in checks]
    passed = sum(1 for r in results if r["success"])
    return {"success": passed == len(results), "score": passed / len(results) if results else 0.0,
            "checks": results}
