"""Episodes ended by infrastructure, not by the agent: counted apart in every report.

An episode's ``end.cause`` names who ended it when it was not the agent: ``provider`` (the LLM
provider still failing after the client's retries) or ``site`` (a live site failing during a live
run: DNS, TLS, 5xx, a timeout; see docs/live.md). Both are scored as run (the task is not done) but
are never the agent's failure, and a resumed run retries them. Reports keep one total,
``infrastructure_errors``, and add ``site_errors`` only when a site failed, so that a report of a
run without live site failures keeps the bytes it had before site failures were counted.
"""

from __future__ import annotations

from typing import Any, Iterable

PROVIDER_CAUSE = "provider"
SITE_CAUSE = "site"
AGENT_CAUSE = "agent"  # the agent's own error (an exception in it, as a harness saw it): not infrastructure
INFRASTRUCTURE_CAUSES = (PROVIDER_CAUSE, SITE_CAUSE)


def is_infrastructure(end: dict) -> bool:
    """Whether an episode's ``end`` says infrastructure (a provider or a live site) ended it."""
    return end.get("reason") == "error" and end.get("cause") in INFRASTRUCTURE_CAUSES


def infrastructure_counts(results: Iterable[dict]) -> dict[str, Any]:
    """``{"infrastructure_errors": n}`` over task results (their ``end_cause``), plus
    ``"site_errors": m`` (the part of n that live sites caused) when m is not 0."""
    causes = [r.get("end_cause") for r in results]
    site = causes.count(SITE_CAUSE)
    total = causes.count(PROVIDER_CAUSE) + site
    return {"infrastructure_errors": total, **({"site_errors": site} if site else {})}


def infrastructure_phrase(row: dict) -> str:
    """How a summary row's infrastructure errors came about, for a warning line: "ended by an LLM
    provider failure", "ended by a live site failing", or both with their counts."""
    total = int(row.get("infrastructure_errors") or 0)
    site = int(row.get("site_errors") or 0)
    if not site:
        return "ended by an LLM provider failure"
    if site == total:
        return "ended by a live site failing"
    return f"ended by infrastructure ({total - site} by an LLM provider failure, {site} by a live site failing)"
