"""Datasette: a link chain from the table along a foreign key to the author's row, and from there
back to the author's books ("Links from other tables")."""

import re

from webfreeze.recorder.session import record_answer

START = "testbed/books"
INSTRUCTION = ("How many books of the library table are by the author of its first book? "
               "Answer with a number.")


def run(page):
    page.set_default_timeout(60_000)
    page.locator("td.col-author_id a").first.click()  # the foreign key, labelled by the author's name
    page.wait_for_url("**/testbed/authors/*")
    books = page.get_by_role("link", name=re.compile(r"^\d+ rows?$"))
    books.click()
    page.wait_for_url("**/testbed/books?author_id=*")
    heading = page.locator("h3").first
    count = re.match(r"\s*(\d+) rows?", heading.inner_text()).group(1)
    record_answer(page, count, heading, evidence=[f"{count} rows where author_id = "])
