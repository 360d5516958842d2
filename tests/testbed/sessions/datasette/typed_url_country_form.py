"""Datasette: a URL typed mid-session (the authors table), then its filter form submitted with its
button."""

import re
from urllib.parse import urljoin

from webfreeze.recorder.session import record_answer

START = "testbed/books"
INSTRUCTION = "How many authors in the library database are from Peru? Answer with a number."
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.goto(urljoin(page.url, "/testbed/authors"))  # typed into the address bar
    page.wait_for_function(FIRST_PAINT)
    page.locator("select[name=_filter_column]").first.select_option("country")
    page.locator("input[name=_filter_value]").first.fill("Peru")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**country__exact=Peru**")
    heading = page.locator("h3").first
    count = re.match(r"\s*(\d+) rows?", heading.inner_text()).group(1)
    record_answer(page, count, heading, evidence=[f"{count} rows where country = \"Peru\""])
