"""Sphinx: the sidebar's search box, submitted with Enter; the results are drawn by searchtools.js,
and one of them is followed."""

from webfreeze.recorder.session import record_answer

START = "index.html"
INSTRUCTION = ("Search the Tidepool documentation for 'requeue' and find the command that requeues "
               "a dead job. Answer with the command as written.")
FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    page.set_default_timeout(60_000)
    page.wait_for_function(FIRST_PAINT)
    box = page.get_by_role("textbox", name="Quick search")
    box.fill("requeue")
    box.press("Enter")
    page.wait_for_url("**/search.html?q=requeue**")
    page.get_by_text("Search finished").wait_for()  # searchtools.js has drawn every result
    page.get_by_role("link", name="Queues", exact=True).last.click()
    page.wait_for_url("**/queues.html**")
    answer = "tidepool requeue jobs.pool JOB_ID"
    record_answer(page, answer, page.get_by_text(answer), evidence=[answer])
