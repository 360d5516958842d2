"""Fill a new Trac environment with the test bed's content (run by the test bed's interpreter,
which has Trac; not imported by the tests): components, a milestone, tickets, wiki pages, and the
permissions of its one user. Every date is fixed, so two environments made from this script show
the same content.

Usage: python trac_seed.py ENV_PATH USER
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone

from trac.env import Environment
from trac.perm import PermissionSystem
from trac.ticket.model import Component, Milestone, Ticket, Version
from trac.wiki.model import WikiPage

WHEN = datetime(2026, 3, 2, 9, 30, tzinfo=timezone.utc)

COMPONENTS = {"catalogue": "Search, records and the public catalogue", "circulation": "Loans, returns and holds"}
MILESTONE = ("Spring catalogue", datetime(2026, 6, 1, tzinfo=timezone.utc),
             "The new catalogue search and the holds queue.")
# (summary, type, component, priority, milestone, description)
TICKETS = [
    ("Barcode scanner drops leading zeros", "defect", "circulation", "major", MILESTONE[0],
     "Scanning a barcode that starts with 0 stores it without the zero, so the loan is not found."),
    ("Search by ISBN-10 finds nothing", "defect", "catalogue", "critical", MILESTONE[0],
     "Searching for an ISBN-10 such as 0306406152 returns no books; the ISBN-13 works."),
    ("Show the shelf location on the book page", "enhancement", "catalogue", "minor", MILESTONE[0],
     "Readers ask where a book stands; the record has the shelf, the page does not show it."),
    ("Holds queue ignores the pickup branch", "defect", "circulation", "major", "",
     "A hold placed for the river branch is offered at the main desk."),
    ("Export the overdue list as a spreadsheet", "task", "circulation", "trivial", "",
     "The desk prints the overdue list by hand every Monday."),
]
WIKI = {
    "ReadingRoom": "= Reading room =\n\nOpen from 9 to 17. See [wiki:CataloguingRules] before adding records.\n",
    "CataloguingRules": ("= Cataloguing rules =\n\n * Titles as on the title page.\n"
                         " * One record per edition; report duplicates as tickets (see #2).\n"),
}


def main(path: str, user: str) -> None:
    env = Environment(path)
    for name in ("component1", "component2"):
        Component(env, name).delete()
    for name in ("milestone1", "milestone2", "milestone3", "milestone4"):
        Milestone(env, name).delete()
    for name in ("1.0", "2.0"):
        Version(env, name).delete()
    for name, text in COMPONENTS.items():
        c = Component(env)
        c.name, c.owner, c.description = name, user, text
        c.insert()
    m = Milestone(env)
    m.name, m.due, m.description = MILESTONE
    m.insert()
    for n, (summary, kind, component, priority, milestone, text) in enumerate(TICKETS):
        t = Ticket(env)
        t.populate({"summary": summary, "type": kind, "component": component, "priority": priority,
                    "milestone": milestone, "description": text, "reporter": user, "status": "new"})
        t.insert(when=WHEN.replace(hour=10 + n))
    for name, text in WIKI.items():
        page = WikiPage(env, name)
        page.text = text
        page.save(user, "Test bed content", WHEN)
    PermissionSystem(env).grant_permission(user, "TICKET_ADMIN")
    env.config.set("logging", "log_type", "none")  # (the access log is tracd's request log)
    env.config.save()
    env.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:3])
