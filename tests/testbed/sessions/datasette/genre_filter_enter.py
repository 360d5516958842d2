"""Datasette: the table's filter form, its value typed and submitted with Enter.

Datasette answers the form's GET (``?_filter_column=genre&_filter_op=exact&_filter_value=travel``)
with a redirect to ``?genre__exact=travel``: an effect of the Enter, not a step of its own.
"""

import re

from webfreeze.recorder.session import record_answer

START = "testbed/books"
INSTRUCTION = "How many travel books does the library table list? Answer with a number."
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.wait_for_function(FIRST_PAINT)
    page.locator("select[name=_filter_column]").first.select_option("genre")
    value = page.locator("input[name=_filter_value]").first
    value.fill("travel")
    value.press("Enter")
    page.wait_for_url("**genre__exact=travel**")
    heading = page.locator("h3").first
    count = re.match(r"\s*(\d+) rows?", heading.inner_text()).group(1)
    record_answer(page, count, heading, evidence=[f"{count} rows where genre = \"travel\""])
