"""Trac: a custom query, a form POST that carries Trac's form token (``__FORM_TOKEN``, also a
cookie): a label clicked to tick a status (the browser passes the click on to its checkbox, which
the recorder logs once), the results grouped by component with a select, the Update button, and
the count of one group read from the grouped listing (Trac answers the POST with a redirect)."""

from urllib.parse import urljoin

from webfreeze.recorder.session import record_answer

START = ""
INSTRUCTION = ("In the library's tracker, make a custom query of every ticket, closed ones included, grouped "
               "by component. How many tickets does the circulation component have?")
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.goto(urljoin(page.url, "/query"))  # typed into the address bar
    page.wait_for_function(FIRST_PAINT)
    page.get_by_text("closed", exact=True).click()  # the status filter's label
    page.get_by_label("Group results by").select_option(label="Component")
    page.get_by_role("button", name="Update").click()
    page.wait_for_url("**/query?**group=component**")
    group = page.locator("h2.report-result", has_text="Component: circulation")
    count = group.locator(".numrows").inner_text().strip().strip("()").split()[0]
    record_answer(page, count, group, evidence=["Component: circulation (3 matches)"])
