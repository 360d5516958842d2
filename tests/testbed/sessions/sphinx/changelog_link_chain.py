"""Sphinx: a link chain through the table of contents and the pages' "next" links."""

from webfreeze.recorder.session import record_answer

START = "index.html"
INSTRUCTION = ("In the Tidepool documentation, what was the default lease_seconds before version 1.2? "
               "Answer with a number.")


def run(page):
    page.set_default_timeout(60_000)
    page.get_by_role("link", name="Configuration", exact=True).first.click()
    page.wait_for_url("**/configuration.html")
    page.get_by_role("link", name="Changelog", exact=True).first.click()
    page.wait_for_url("**/changelog.html")
    record_answer(page, "120", page.get_by_text("went from 120 to 300"),
                  evidence=["The default lease_seconds went from 120 to 300."])
