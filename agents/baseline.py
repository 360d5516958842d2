"""``keyword``: a simple non-LLM baseline agent.

It reads only the instruction and the observation (never the ground truth):

1. If the instruction quotes something (``"..."``) or names a paper identifier and the page has a
   search box not used yet, it types that into the box and presses Enter.
2. Otherwise it clicks the not-yet-clicked link or button whose name shares the most words with
   the instruction (at least one), for at most ``max_clicks`` clicks.
3. Then it answers with the page's text line sharing the most words with the instruction, or with
   the first number on the page when the instruction asks "how many".

Deterministic: ties go to the first element in document order.
"""

from __future__ import annotations

import ast
import re

from .base import Agent, AgentError, norm, quote, words

STOP = set("""a an and any are as at be by can did do does for from give has have how in is it its list
many me name of on or paper papers please site the their them this to using was what when where which who
with you your answer number""".split())
PAPER_ID = re.compile(r"\b\d{4}\.\d{5}\b")
QUOTED = re.compile(r"\"([^\"]+)\"")
NUMBER = re.compile(r"\b\d[\d,]*(?:\.\d+)?\b")
# A line of the observation tree: `[bid] role 'name'` and more after it; the name is a Python string
# literal (single or double quotes, backslash escapes), read up to its own closing quote.
LINE = re.compile(r"""^\t*(?:\[(?P<bid>[^\]]+)\] )?(?P<role>\w+) (?P<name>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")""",
                  re.M)


def _name_of(match: re.Match) -> str:
    try:
        return str(ast.literal_eval(match.group("name")))
    except (ValueError, SyntaxError):
        return ""


class KeywordAgent(Agent):
    name = "keyword"

    def __init__(self, max_clicks: int = 3):
        if isinstance(max_clicks, bool) or not isinstance(max_clicks, int) or max_clicks < 0:
            raise AgentError(f"max_clicks must be a whole number, 0 or more (not {max_clicks!r})")
        self.max_clicks = max_clicks
        self.keywords: set[str] = set()
        self.query: str | None = None
        self.searched = False
        self.pending_enter: str | None = None
        self.clicked: set[str] = set()
        self.clicks = 0
        self.instruction = ""

    def config(self) -> dict:
        return {"max_clicks": self.max_clicks}

    def reset(self, task) -> None:
        self.instruction = task.get("instruction", "")
        self.keywords = {w for w in words(self.instruction) if w not in STOP and len(w) > 1}
        quoted = QUOTED.findall(self.instruction)
        ids = PAPER_ID.findall(self.instruction)
        self.query = quoted[0] if quoted else (ids[0] if ids else None)
        self.searched = False
        self.pending_enter = None
        self.clicked = set()
        self.clicks = 0

    def _overlap(self, text: str) -> int:
        return len(self.keywords & set(words(text)))

    def act(self, obs: dict) -> dict:
        elements = [e for e in obs.get("elements") or [] if e.get("visible", True)]
        if self.pending_enter is not None:
            bid, self.pending_enter = self.pending_enter, None
            return {"action": f"press({quote(bid)}, 'Enter')", "thought": "submit the search"}
        if self.query and not self.searched:
            box = next((e for e in elements if e.get("role") in ("searchbox", "textbox")
                        and "search" in norm(e.get("name"))), None)
            if box is not None:
                self.searched = True
                self.pending_enter = box["bid"]
                return {"action": f"fill({quote(box['bid'])}, {quote(self.query)})",
                        "thought": f"search for {self.query!r}"}
        if self.clicks < self.max_clicks:
            best, best_score = None, 0
            for e in elements:
                if e.get("role") not in ("link", "button") or not e.get("clickable", True):
                    continue
                key = f"{e.get('role')}:{norm(e.get('name'))}"
                score = self._overlap(e.get("name", ""))
                if self.query and norm(self.query) in norm(e.get("name")):
                    score += 5
                if key not in self.clicked and score > best_score:
                    best, best_score = e, score
            if best is not None:
                self.clicks += 1
                self.clicked.add(f"{best.get('role')}:{norm(best.get('name'))}")
                return {"action": f"click({quote(best['bid'])})",
                        "thought": f"follow {best.get('name')!r} ({best_score} shared words)"}
        text = obs.get("axtree_text", "")
        lines = [name for name in (_name_of(m) for m in LINE.finditer(text)) if name]
        if "how many" in norm(self.instruction) or "how large" in norm(self.instruction):
            for line in sorted(lines, key=lambda s: -self._overlap(s)):
                m = NUMBER.search(line)
                if m:
                    return {"action": f"send_msg_to_user({quote(m.group(0))})", "thought": f"number from {line!r}"}
        best_line = max(lines, key=self._overlap, default="")
        return {"action": f"send_msg_to_user({quote(best_line)})", "thought": "the best-matching text on the page"}
