"""Django: the public catalogue, a link chain from the list to a book and back, then another book."""

from webfreeze.recorder.session import record_answer

START = ""
INSTRUCTION = ("In the library catalogue, open 'Keeping the Light', go back to the catalogue and open "
               "'The Keeper's Logbook'. In which room is the shelf of both books? Answer with the room.")


def run(page):
    page.set_default_timeout(60_000)
    page.get_by_role("link", name="Keeping the Light").click()
    page.wait_for_url("**/books/*/")
    page.get_by_role("link", name="Back to the catalogue").click()
    page.wait_for_url("**/")
    page.get_by_role("link", name="The Keeper's Logbook").click()
    page.wait_for_url("**/books/*/")
    shelf = page.locator("dd").first
    record_answer(page, "Reading room", shelf, evidence=["Lighthouse (Reading room)"])
