"""Trac: a search typed into the header's box and submitted with Enter, a result followed to its
ticket, and the ticket's priority read (anonymous: Trac lets visitors read everything)."""

from webfreeze.recorder.session import record_answer

START = ""
INSTRUCTION = ("Search the library's tracker for 'ISBN' and open the ticket about ISBN-10 searches. "
               "What is its priority?")
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.wait_for_function(FIRST_PAINT)
    box = page.get_by_label("Search:")
    box.fill("ISBN")
    box.press("Enter")
    page.wait_for_url("**/search?q=ISBN**")
    page.get_by_role("link", name="Search by ISBN-10 finds nothing").click()
    page.wait_for_url("**/ticket/2")
    priority = page.locator("td[headers=h_priority]")
    record_answer(page, priority.inner_text().strip(), priority,
                  evidence=["Search by ISBN-10 finds nothing", "Priority: critical"])
