"""Sphinx: a page's URL typed mid-session, then a cross reference followed on it."""

from urllib.parse import urljoin

from webfreeze.recorder.session import record_answer

START = "index.html"
INSTRUCTION = ("In the Tidepool documentation, how many times is a job that raises retried? "
               "Answer with a number.")


def run(page):
    page.set_default_timeout(60_000)
    page.goto(urljoin(page.url, "quickstart.html"))  # typed into the address bar
    page.get_by_role("link", name="Retry policy", exact=True).first.click()
    page.wait_for_url("**/retries.html**")
    record_answer(page, "5", page.get_by_text("retried up to 5 times"),
                  evidence=["A job that raises is retried up to 5 times"])
