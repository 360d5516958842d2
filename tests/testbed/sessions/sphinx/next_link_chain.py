"""Sphinx: a link chain through the table of contents and a page's "next" link."""

from webfreeze.recorder.session import record_answer

START = "index.html"
INSTRUCTION = ("In the Tidepool documentation, at most how many waiting jobs does a queue hold? "
               "Answer with a number.")


def run(page):
    page.set_default_timeout(60_000)
    page.get_by_role("link", name="Installation", exact=True).first.click()
    page.wait_for_url("**/install.html")
    page.get_by_role("link", name="next", exact=True).first.click()  # the header's "next" link
    page.wait_for_url("**/quickstart.html")
    record_answer(page, "50000", page.get_by_text("at most 50000 waiting jobs"),
                  evidence=["A queue holds at most 50000 waiting jobs"])
