"""An example session script for ``webfreeze record session --script`` (docs/authoring.md).

It drives the simulated shop (``webfreeze sites serve shop``, http://127.0.0.1:8000/) the way a
person would, and every step it takes becomes a step of the reference trajectory:

- a search typed into the search box and submitted with Enter (logged as a press in that field),
- a sort chosen in the results' filter form, submitted with its button,
- a link followed to the cheapest product, a quantity typed, the add-to-cart form submitted,
- a URL typed into the address bar (``page.goto``: logged as a navigation of cause ``goto``),
- the checkout form, where the shopper says who they are (the shop has no accounts; on a site
  with a login, the same three lines fill the user name and password and press the button),
- the answer, with ``record_answer``: the text, the element that shows it, and the evidence the
  page must show (checked at once: a string the page does not show stops the session here).

Run it (the trajectory goes to shop-order.json, the exchanges into shop.wfz)::

    webfreeze sites serve shop --port 8000 &
    webfreeze record session http://127.0.0.1:8000/ --archive shop.wfz \\
        --trajectory shop-order.json --script examples/sessions/shop_order.py

The waits are the ones a real page needs: Chromium drops keyboard input sent before a page's first
paint, and after each action that loads a page the script waits for that page (its URL) before it
reads or touches it.
"""

from urllib.parse import urljoin

from webfreeze.recorder.session import record_answer

FIRST_PAINT = "performance.getEntriesByName('first-paint').length > 0"


def run(page):
    """Search, sort, open the cheapest result, add two to the cart, check out, answer."""
    page.wait_for_function(FIRST_PAINT)
    search = page.get_by_label("Search products")
    search.fill("running shoe")
    search.press("Enter")  # the form's own submission, as a person's Enter
    page.wait_for_url("**/search?q=running+shoe")

    page.get_by_label("Sort").select_option(label="Price: low to high")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**sort=price_asc**")

    cheapest = page.locator("li.product a").first
    cheapest.click()
    page.wait_for_url("**/p/**")
    page.wait_for_function(FIRST_PAINT)
    price = page.locator(".price").inner_text()
    page.get_by_label("Quantity").fill("2")
    page.get_by_role("button", name="Add to cart").click()
    page.wait_for_url("**/cart")

    # typed into the address bar: the reference agent will goto() it too
    page.goto(urljoin(page.url, "/checkout"))
    page.wait_for_function(FIRST_PAINT)
    page.get_by_label("Name").fill("Ada Lovelace")
    page.get_by_label("Address").fill("12 Analytical Way")
    page.get_by_label("Delivery").select_option(label="Express")
    page.get_by_role("button", name="Place order").click()
    page.wait_for_url("**/order/**")

    number = page.locator(".order-number")
    record_answer(page, number.inner_text(), number,
                  evidence=[number.inner_text(), "Thank you, Ada Lovelace", "x 2"])
    print(f"ordered two at {price} each")
