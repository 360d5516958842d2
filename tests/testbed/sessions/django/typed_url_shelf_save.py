"""Django admin: a login (the button clicked), a URL typed mid-session (the shelves' change list),
and a change form saved (a CSRF-protected POST, answered by a redirect and a message).

The shelf is saved unchanged, so the application's data stay as the other tasks expect them."""

from urllib.parse import urljoin

from webfreeze.recorder.session import record_answer

START = "admin/"
INSTRUCTION = ("Log in to the staff admin as librarian (password tide-pool-42), open the Lighthouse "
               "shelf, save it without changes, and say which room it is in.")
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.wait_for_url("**/admin/login/**")
    page.wait_for_function(FIRST_PAINT)
    page.get_by_label("Username").fill("librarian")
    page.get_by_label("Password").fill("tide-pool-42")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    page.goto(urljoin(page.url, "/admin/catalog/shelf/"))  # typed into the address bar
    page.get_by_role("link", name="Lighthouse", exact=True).click()
    page.wait_for_url("**/admin/catalog/shelf/*/change/")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_url("**/admin/catalog/shelf/")
    row = page.locator("tr", has=page.get_by_role("link", name="Lighthouse", exact=True))
    room = row.locator("td.field-room")
    record_answer(page, room.inner_text().strip(), room, evidence=["was changed successfully", "Reading room"])
