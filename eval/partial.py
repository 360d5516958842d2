"""Partial credit (WebArxiv): how much of the reference trajectory the agent reproduced.

Definition (also in docs/suites-and-runs.md):

    overlap = LCS(agent, reference) / len(reference)

over the *normalised actions* of both trajectories (``trajectory.Action``: kind + target identity
by role and accessible name, or the normalised URL for goto, or the direction for scroll; typed
and selected text normalised). LCS is the length of the longest common subsequence, two actions
being equal when ``Action.matches`` says so. Extra agent actions cost nothing; missing or
reordered reference actions do. ``partial = overlap > 0.7`` (strictly). A reference with no
actions gives ``overlap = None`` and no partial credit.
"""

from __future__ import annotations

from .trajectory import Action, agent_actions, reference_actions

PARTIAL_THRESHOLD = 0.7


def lcs_length(a: list[Action], b: list[Action]) -> int:
    """Length of the longest common subsequence of two action lists (O(len(a) * len(b)))."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x.matches(y) else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def evaluate_partial(reference: dict, trajectory: dict, threshold: float = PARTIAL_THRESHOLD) -> dict:
    """``{"overlap", "partial", "lcs", "reference_actions", "agent_actions", "reference", "agent"}``
    (the last two: the normalised actions as strings, for the report)."""
    ref = reference_actions(reference)
    got = agent_actions(trajectory)
    lcs = lcs_length(got, ref)
    overlap = lcs / len(ref) if ref else None
    return {"overlap": overlap, "partial": overlap is not None and overlap > threshold, "lcs": lcs,
            "reference_actions": len(ref), "agent_actions": len(got),
            "reference": [str(a) for a in ref], "agent": [str(a) for a in got]}
