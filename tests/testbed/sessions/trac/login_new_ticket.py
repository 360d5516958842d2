"""Trac: a login over HTTP basic authentication (recorded with ``--http-credentials``: the browser
answers Trac's 401 challenge), then a ticket created. The summary is typed key by key, as a person
types (logged with ``keys: true``); the new-ticket form has a field Trac's script disables at load
(the owner of the "assign" action, not chosen), which a browser does not send, so the text backend
must not either (it reads the session's DOM snapshot of the form)."""

from webfreeze.recorder.session import record_answer

START = ""
INSTRUCTION = ("Log in to the library's tracker and file a task 'Label the returns trolley'. "
               "What number does the new ticket get?")
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.wait_for_function(FIRST_PAINT)
    page.get_by_role("link", name="Login").click()
    page.wait_for_url("**/")
    page.get_by_role("link", name="New Ticket").click()
    page.wait_for_url("**/newticket")
    page.wait_for_function(FIRST_PAINT)
    page.get_by_label("Summary:").click()
    page.keyboard.type("Label the returns trolley")
    page.get_by_label("Description:", exact=True).fill("Returns pile up unsorted.")
    page.get_by_label("Type:").select_option(label="task")
    page.get_by_role("button", name="Create ticket").click()
    page.wait_for_url("**/ticket/*")
    heading = page.locator("#trac-ticket-title")
    number = page.url.split("#")[0].rstrip("/").rsplit("/", 1)[1]  # (Trac adds #ticket)
    record_answer(page, f"#{number}", heading, evidence=[f"#{number}", "Label the returns trolley"])
