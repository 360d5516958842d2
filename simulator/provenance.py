"""Replay provenance: how the answers an agent got were matched, per step and per episode.

Each backend hands over, after a step's observation, the answers the step caused as records
(:func:`answer_record`); :func:`step_provenance` folds them into the step's ``replay`` field and
:func:`episode_provenance` sums the steps into the trajectory's. The shapes are documented in
docs/trajectories.md ("Replay provenance") and docs/suites-and-runs.md. Everything here is a pure function
of the records, sorted where their arrival order could vary, so the bytes are deterministic.
"""

from __future__ import annotations

# From the most faithful to the least: a main document's level is the worst of its navigation's hops.
# ("live": fetched from the live site through the recorder while patching misses, webfreeze/runs/live.py)
LEVELS = ("exact", "canonical", "model", "live", "fuzzy", "miss")
_RANK = {level: n for n, level in enumerate(LEVELS)}
KINDS = ("document", "xhr", "subresource")
# The levels an agent must be told about (and a report counts).
FLAGGED = ("fuzzy", "miss")

# Playwright's resource types, folded into the three kinds provenance counts.
_XHR_TYPES = frozenset({"xhr", "fetch", "eventsource"})


def kind_of_resource(resource_type: str) -> str:
    """``document``, ``xhr`` or ``subresource`` for a Playwright ``request.resource_type``."""
    if resource_type == "document":
        return "document"
    return "xhr" if resource_type in _XHR_TYPES else "subresource"


def refused_after_answer(status: int | None, failure: str) -> bool:
    """Whether a request that failed after its answer came (``status``; None: none came) counts
    with that answer rather than as a miss: the browser refused the answer as it refuses the
    site's own (a module script answered 404; a cross-origin body its policy blocks), or the page
    cancelled the request while its body came (``ERR_ABORTED``: Gradio aborts a prediction's event
    stream once its message has come; a script aborts a fetch whose body it never reads). Any other
    failure after an answer (a body that does not decode, or ends short) is the replay's: a miss."""
    if status is None:
        return False
    why = failure or ""
    return status >= 400 or "ERR_BLOCKED_BY" in why or "ERR_ABORTED" in why


# An answer's ``why`` when it came from an event stream still open when recorded (Gradio's heartbeat):
# its bytes are the site's, and the replay ended it where the site kept it open. Not flagged.
OPEN_STREAM_WHY = "an event stream still open when recorded: its events, then ended by the replay"


def answer_record(kind: str, method: str, url: str, level: str, status: int, *, main: bool = False,
                  score: float | None = None, capture_url: str | None = None, mime: str | None = None,
                  size: int | None = None, why: str | None = None, capture: int | None = None) -> dict:
    """One answered request: ``main`` when it is a hop of the main frame's navigation; ``mime`` and
    ``size`` (bytes) describe the body served, when known; ``why``: a WebSocket miss's reason (no
    recording of it, opened more often than recorded, or where its conversation parted), the
    socket's second, ``canonical`` record's ``WEBSOCKET_SET_ASIDE`` (a message matched only with its
    ``socket_volatile`` parts set aside), :data:`OPEN_STREAM_WHY`, or why a repeated request was
    answered fuzzily (replayer/replay.py ``REPEAT_WHY``); ``capture``: the id of the
    exchange that answered, kept for a request with a body (not GET or HEAD), whose body the
    trajectory does not hold (``eval export-har`` takes the request and its answer from it)."""
    rec = {"kind": kind, "method": method, "url": url, "level": level if level in _RANK else "miss",
           "status": status, "main": main}
    if score is not None:
        rec["score"] = round(float(score), 4)
    if capture_url is not None:
        rec["capture_url"] = capture_url
    if mime is not None:
        rec["mime"] = mime
    if size is not None:
        rec["size"] = int(size)
    if why:
        rec["why"] = why
    if capture is not None and rec["level"] != "miss" and method.upper() not in ("GET", "HEAD"):
        rec["capture"] = int(capture)
    return rec


# Why a settle stopped short (simulator/browser_backend.py): its count of rounds, its wall-clock
# safety net, a load event that never came.
UNSETTLED = ("rounds", "time", "load")


def settle_record(unsettled: list[str], stalled: int) -> dict:
    """A note among a step's records (not an answer): the settles of the step that stopped short
    (``unsettled``: why, among UNSETTLED) and how many loads the page's runtime stopped waiting
    for (``stalled``). Made only when either is non-empty."""
    return {"settle": {"unsettled": sorted(set(unsettled), key=UNSETTLED.index), "stalled": int(stalled)}}


def _settle_of(records: list[dict]) -> tuple[list[dict], dict | None]:
    """The answers of a step's records, and its settle notes merged into one (None without any)."""
    notes = [r["settle"] for r in records if "settle" in r]
    answers = [r for r in records if "settle" not in r]
    if not notes:
        return answers, None
    why = sorted({w for n in notes for w in n["unsettled"]}, key=UNSETTLED.index)
    return answers, {"unsettled": why, "stalled": sum(n["stalled"] for n in notes)}


# What a step's flagged answers and its document keep of a record (the body's description is in
# ``answers`` only).
_BODY = ("mime", "size", "capture")  # (and the exchange that answered: kept in answers only)


def ordered_answers(records: list[dict]) -> list[dict]:
    """Every answer of a step in an order that does not depend on the network's timing: the main
    frame's navigation hops first, as they came (a redirect chain is sequential), then the others
    sorted by kind, method, URL and how they were answered."""
    hops = [r for r in records if r["main"]]
    rest = sorted((r for r in records if not r["main"]),
                  key=lambda r: (r["kind"], r["method"], r["url"], r["level"], r["status"],
                                 r.get("capture_url") or "", r.get("mime") or "", r.get("size") or 0,
                                 r.get("capture") or 0))
    return [dict(r) for r in hops + rest]


def distinct_subresources(records: list[dict]) -> list[dict]:
    """``records`` with each subresource answer (an image, a stylesheet, a font, a script) kept
    once when the step has it more than once alike. Whether Chromium asks again for a subresource
    it already fetched in the step depends on its memory cache and the timing of the page's
    rendering (an image that failed, then a second element with the same ``src``: asked again, or
    joined to the first request while it was still under way), not on the page or the replay, so
    counting every request made runs of the same episode differ. Ours: documents and XHRs, which
    the page's scripts ask for and see, stay counted as requested."""
    seen: set = set()
    out = []
    for r in records:
        if r["kind"] == "subresource" and not r["main"]:
            key = tuple(sorted(r.items()))
            if key in seen:
                continue
            seen.add(key)
        out.append(r)
    return out


def step_provenance(records: list[dict]) -> dict:
    """A step's ``replay`` field: ``document`` (the main document's worst hop: level, method, url,
    status, and for a fuzzy answer its score and capture_url; null when the step loaded no
    document), ``requests`` (``{kind: {level: count}}``), ``flagged`` (every fuzzy answer and
    miss, sorted) and ``answers`` (every answer, in :func:`ordered_answers`' order, with the body's
    media type and size: what ``eval export-har`` writes); and, only when the step's settle stopped
    short or loads stalled, ``settle`` (``unsettled``: why; ``stalled``: how many loads): the page
    observed may not have been ready. A subresource answered alike more than once in the step
    (the same URL, level, status and body) counts once: see :func:`distinct_subresources`."""
    records, settle = _settle_of(records)
    records = distinct_subresources(records)
    document = None
    counts: dict[str, dict[str, int]] = {}
    flagged = []
    for rec in records:
        by_level = counts.setdefault(rec["kind"], {})
        by_level[rec["level"]] = by_level.get(rec["level"], 0) + 1
        if rec["main"] and (document is None or _RANK[rec["level"]] >= _RANK[document["level"]]):
            document = rec
        if rec["level"] in FLAGGED:
            flagged.append({k: v for k, v in rec.items() if k != "main" and k not in _BODY})
    flagged.sort(key=lambda r: (r["kind"], r["level"], r["method"], r["url"], r.get("capture_url") or ""))
    out = {
        "document": None if document is None else {k: v for k, v in document.items()
                                                   if k not in ("main", "kind") and k not in _BODY},
        "requests": {k: dict(sorted(v.items())) for k, v in sorted(counts.items())},
        "flagged": flagged,
        "answers": ordered_answers(records),
    }
    if settle is not None:
        out["settle"] = settle
    return out


def episode_provenance(start: dict | None, steps: list[dict]) -> dict:
    """The trajectory's ``replay`` field from the episode's start (the reset's page) and its steps'
    ``replay`` fields: ``start``, ``requests`` summed, ``fuzzy_documents`` and ``fuzzy_xhr`` (answers
    of those kinds at the fuzzy level), ``misses`` (of any kind), ``documents`` (main documents by
    level) and ``compromised`` (any of the three counts above 0, or a start page that did not load:
    ``start["error"]``, the line the agent was shown); and, only when some are not 0,
    ``unsettled`` (the parts whose settle stopped short) and ``stalled`` (loads the pages' runtime
    stopped waiting for)."""
    parts = ([start] if start else []) + [s for s in steps if s]
    total: dict[str, dict[str, int]] = {}
    documents: dict[str, int] = {}
    for part in parts:
        for kind, by_level in part.get("requests", {}).items():
            t = total.setdefault(kind, {})
            for level, n in by_level.items():
                t[level] = t.get(level, 0) + n
        doc = part.get("document")
        if doc:
            documents[doc["level"]] = documents.get(doc["level"], 0) + 1
    fuzzy_documents = total.get("document", {}).get("fuzzy", 0)
    fuzzy_xhr = total.get("xhr", {}).get("fuzzy", 0)
    misses = sum(by_level.get("miss", 0) for by_level in total.values())
    out = {
        "start": start,
        "requests": {k: dict(sorted(v.items())) for k, v in sorted(total.items())},
        "documents": dict(sorted(documents.items())),
        "fuzzy_documents": fuzzy_documents, "fuzzy_xhr": fuzzy_xhr, "misses": misses,
        "compromised": bool(fuzzy_documents or fuzzy_xhr or misses or (start or {}).get("error")),
    }
    settles = [part["settle"] for part in parts if isinstance(part.get("settle"), dict)]
    unsettled = sum(1 for s in settles if s.get("unsettled"))
    stalled = sum(int(s.get("stalled") or 0) for s in settles)
    if unsettled:
        out["unsettled"] = unsettled
    if stalled:
        out["stalled"] = stalled
    return out


def flagged_answers(trajectory: dict) -> list[dict]:
    """Every fuzzy answer and miss of a trajectory (the start's and each step's), each with the
    ``step`` it belongs to (null for the start); empty for trajectories without provenance."""
    out = []
    replay = trajectory.get("replay")
    if isinstance(replay, dict) and isinstance(replay.get("start"), dict):
        out += [{**f, "step": None} for f in replay["start"].get("flagged") or []]
    for s in trajectory.get("steps") or []:
        prov = s.get("replay") if isinstance(s, dict) else None
        if isinstance(prov, dict):
            out += [{**f, "step": s.get("step")} for f in prov.get("flagged") or []]
    return out
