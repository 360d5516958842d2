"""Django admin: a login (the password submitted with Enter), the books' change list, its search
box submitted with Enter, and a result opened."""

import re

from webfreeze.recorder.session import record_answer

START = "admin/"
INSTRUCTION = ("Log in to the staff admin as librarian (password tide-pool-42), search the books for "
               "'storms' and give the ISBN of the book found.")
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.wait_for_url("**/admin/login/**")  # /admin/ redirects a visitor to the login form
    page.wait_for_function(FIRST_PAINT)
    page.get_by_label("Username").fill("librarian")
    password = page.get_by_label("Password")
    password.fill("tide-pool-42")
    password.press("Enter")
    page.wait_for_url("**/admin/")
    page.get_by_role("link", name="Books", exact=True).first.click()
    page.wait_for_url("**/admin/catalog/book/")
    page.wait_for_function(FIRST_PAINT)
    search = page.get_by_role("textbox", name="Search")
    search.fill("storms")
    search.press("Enter")
    page.wait_for_url(re.compile(r"/admin/catalog/book/\?q=storms$"))
    page.get_by_role("link", name="Winter Storms, 1900-1950").click()
    page.wait_for_url("**/admin/catalog/book/*/change/**")
    isbn = page.get_by_label("ISBN")
    record_answer(page, isbn.input_value(), isbn, evidence=["Winter Storms, 1900-1950"])
