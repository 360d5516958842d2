"""``shop``: an online store (Persona2Web-style shopping site), served on loopback.

Routes: ``/`` categories and featured products; ``/c/<category>`` listing with filters
(``brand``, ``color``, ``size``, ``min_price``, ``max_price``, ``min_rating``), sorting (``sort`` =
relevance|price_asc|price_desc|rating|reviews) and paging (``page``); ``/search?q=`` the same over
all products; ``/p/<sku>`` product page with an add-to-cart form; ``/cart`` (GET view, POST
``/cart/add``, ``/cart/remove``: form posts, 303 back, cart kept per ``shop_session`` cookie);
``/checkout`` (GET form, POST places the order and redirects to ``/order/<n>``); ``/api/cart``
(JSON XHR with a timestamp). Catalogue deterministic for a seed; cart state lives in the server.

One class serves every shop: a :class:`ShopProfile` gives a shop its name, colour, catalogue
stream, brand mix and prices. ``NORTHWIND`` is ``shop.test`` (its pages never change: the demo's
tasks and cassette depend on them); ``LARKSPUR`` is the competing ``shop2.test``.
"""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlencode

from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from .common import SimulatedSite, esc, json_response, png, respond, route_map

SITE = "Northwind Market"
COLOR = (20, 110, 180)

CATEGORIES = {
    "shoes": ("Shoes", ["Running Shoe", "Trail Runner", "Leather Boot", "Canvas Sneaker", "Sandal", "Loafer"],
              ["36", "37", "38", "39", "40", "41", "42", "43", "44", "45"]),
    "clothing": ("Clothing", ["Linen Shirt", "Wool Sweater", "Rain Jacket", "Denim Jeans", "Hoodie", "Chinos"],
                 ["XS", "S", "M", "L", "XL", "XXL"]),
    "electronics": ("Electronics", ["Wireless Earbuds", "Bluetooth Speaker", "Smartwatch", "E-Reader",
                                    "Noise-Cancelling Headphones", "Portable Charger"], ["one size"]),
    "home": ("Home & Kitchen", ["Coffee Grinder", "Chef Knife", "Cast Iron Pan", "Desk Lamp", "Throw Blanket",
                                "French Press"], ["one size"]),
    "books": ("Books", ["Mystery Novel", "Cookbook", "Travel Guide", "Science Fiction Novel", "Biography",
                        "Poetry Collection"], ["paperback", "hardcover"]),
    "sports": ("Sports & Outdoors", ["Yoga Mat", "Camping Tent", "Water Bottle", "Cycling Helmet", "Trekking Poles",
                                     "Sleeping Bag"], ["S", "M", "L"]),
    "beauty": ("Beauty", ["Face Serum", "Sunscreen", "Shampoo", "Lip Balm", "Hand Cream", "Perfume"], ["one size"]),
    "toys": ("Toys & Games", ["Puzzle", "Board Game", "Building Blocks", "Plush Bear", "Kite", "Card Game"],
             ["one size"]),
}
BRANDS = ["Acme", "Borealis", "Cobalt", "Dune", "Evergreen", "Fjord", "Granite", "Harbor", "Ionic", "Juniper",
          "Kestrel", "Lumen"]
COLORS = ["black", "white", "grey", "navy", "red", "green", "blue", "beige", "brown", "pink"]


@dataclass(frozen=True)
class ShopProfile:
    """What makes one shop differ from another on the same code: name and colour, the random
    stream its catalogue is drawn from, its size, brands (optionally weighted), prices, the SKU
    prefix, cookie and the first order number."""

    name: str
    color: tuple[int, int, int]
    key: str  # the catalogue's random stream: random.Random(f"{key}-{seed}")
    n: int = 560
    brands: tuple[str, ...] = tuple(BRANDS)
    brand_weights: tuple[int, ...] | None = None  # None: every brand equally likely
    price_range: tuple[float, float] = (5, 300)
    price_factors: tuple[tuple[str, float], ...] = (("electronics", 1.6),)  # department -> multiplier
    sku_prefix: str = ""
    session_cookie: str = "shop_session"
    session_prefix: str = "c"
    first_order: int = 1001


NORTHWIND = ShopProfile(name=SITE, color=COLOR, key="shop")
LARKSPUR = ShopProfile(
    name="Larkspur Supply Co.", color=(120, 60, 150), key="shop2", n=240,
    # some brands both shops sell, some only this one, in another mix
    brands=("Acme", "Cobalt", "Fjord", "Juniper", "Lumen", "Nimbus", "Orchid", "Pinnacle", "Quill", "Redwood"),
    brand_weights=(3, 2, 3, 1, 2, 4, 3, 2, 2, 3),
    price_range=(4, 260), price_factors=(("electronics", 1.45), ("beauty", 0.8)),
    sku_prefix="L", session_cookie="lark_sid", session_prefix="l", first_order=70001)


@dataclass
class Product:
    sku: str
    name: str
    category: str
    brand: str
    color: str
    sizes: list[str]
    price: float
    rating: float
    reviews: int
    description: str


@lru_cache(maxsize=16)
def build_catalogue(seed: int = 0, n: int | None = None, profile: ShopProfile = NORTHWIND) -> list[Product]:
    """The shop's products for ``seed``, in catalogue order (deterministic); ``n`` defaults to the
    profile's catalogue size."""
    rnd = random.Random(f"{profile.key}-{seed}")
    products = []
    cats = list(CATEGORIES)
    factors = dict(profile.price_factors)
    lo, hi = profile.price_range
    for i in range(profile.n if n is None else n):
        cat = cats[i % len(cats)]
        _, kinds, sizes = CATEGORIES[cat]
        kind = rnd.choice(kinds)
        if profile.brand_weights is None:
            brand = rnd.choice(profile.brands)
        else:
            brand = rnd.choices(profile.brands, weights=profile.brand_weights)[0]
        color = rnd.choice(COLORS)
        avail = sorted(rnd.sample(sizes, k=rnd.randint(1, len(sizes))), key=sizes.index)
        price = round(rnd.uniform(lo, hi) * factors.get(cat, 1.0), 2)
        products.append(Product(
            sku=f"{profile.sku_prefix}{cat[:2].upper()}{i:05d}", name=f"{brand} {color.title()} {kind}", category=cat, brand=brand,
            color=color, sizes=avail, price=price, rating=round(rnd.uniform(2.5, 5.0), 1), reviews=rnd.randint(0, 4200),
            description=f"The {brand} {kind.lower()} in {color}: "
                        f"{rnd.choice(['durable', 'lightweight', 'classic', 'award-winning', 'eco-friendly'])}, "
                        f"{rnd.choice(['comfortable', 'compact', 'easy to clean', 'water-resistant', 'versatile'])} "
                        f"and backed by a {rnd.choice([1, 2, 3])}-year warranty."))
    return products


NAV = """<nav><a href="/">Home</a> <a href="/cart">Cart</a>
<form class="search" action="/search" method="get" role="search"><input type="search" name="q"
aria-label="Search products" placeholder="Search products"><button type="submit">Search</button></form></nav>"""


# The routes, built once for every instance (common.route_map).
_url_map = route_map(lambda: [
    Rule("/", endpoint="home"),
    Rule("/c/<category>", endpoint="category"),
    Rule("/search", endpoint="search"),
    Rule("/p/<sku>", endpoint="product"),
    Rule("/p/<sku>/image.png", endpoint="image"),
    Rule("/cart", endpoint="cart", methods=["GET"]),
    Rule("/cart/add", endpoint="cart_add", methods=["POST"]),
    Rule("/cart/remove", endpoint="cart_remove", methods=["POST"]),
    Rule("/checkout", endpoint="checkout", methods=["GET", "POST"]),
    Rule("/order/<int:number>", endpoint="order"),
    Rule("/api/cart", endpoint="api_cart"),
    Rule("/api/stats", endpoint="api_cart"),
    Rule("/static/<name>", endpoint="static"),
    Rule("/shop", endpoint="legacy"),
])


class ShopSite(SimulatedSite):
    """The WSGI application. Carts are per-session server state (a stateful site, as real shops are)."""

    title, color, nav = SITE, COLOR, NAV
    session_cookie, session_prefix, stats_src = "shop_session", "c", "/api/cart"

    def __init__(self, seed: int = 0, profile: ShopProfile = NORTHWIND):
        super().__init__()
        self.profile = profile
        self.title, self.color = profile.name, profile.color
        self.session_cookie, self.session_prefix = profile.session_cookie, profile.session_prefix
        self.products = build_catalogue(seed, profile=profile)
        self.by_sku = {p.sku: p for p in self.products}
        self._orders = itertools.count(profile.first_order)
        self._lock = threading.Lock()
        self.carts: dict[str, dict[tuple[str, str], int]] = {}
        self.orders: dict[int, dict] = {}
        self.url_map = _url_map()

    # ------------------------------------------------------------------ catalogue
    def on_home(self, request: Request) -> Response:
        cats = "".join(f'<li><a href="/c/{c}">{esc(name)}</a></li>' for c, (name, _, _) in CATEGORIES.items())
        featured = sorted(self.products, key=lambda p: (-p.reviews, p.sku))[:8]
        return self.html(request, self.title, f"<h1>{esc(self.title)}</h1><h2>Departments</h2><ul class='departments'>{cats}</ul>"
                                        f"<h2>Popular now</h2>{self._grid(featured)}")

    def on_legacy(self, request: Request) -> Response:
        return redirect("/", code=301)

    def on_category(self, request: Request, category: str) -> Response:
        if category not in CATEGORIES:
            raise NotFound(f"No department named '{category}'.")
        items = [p for p in self.products if p.category == category]
        return self._listing(request, f"/c/{category}", CATEGORIES[category][0], items)

    def on_search(self, request: Request) -> Response:
        q = request.args.get("q", "").strip().lower()
        items = [p for p in self.products if all(w in f"{p.name} {p.brand} {p.category} {p.description}".lower()
                                                 for w in q.split())] if q else []
        return self._listing(request, "/search", f"Results for \u201c{q}\u201d" if q else "Search", items)

    def _listing(self, request: Request, path: str, heading: str, items: list[Product]) -> Response:
        args = request.args
        facets = {"brand": sorted({p.brand for p in items}), "color": sorted({p.color for p in items}),
                  "size": sorted({s for p in items for s in p.sizes})}
        if args.get("brand"):
            items = [p for p in items if p.brand == args["brand"]]
        if args.get("color"):
            items = [p for p in items if p.color == args["color"]]
        if args.get("size"):
            items = [p for p in items if args["size"] in p.sizes]
        lo, hi, rmin = _float(args.get("min_price")), _float(args.get("max_price")), _float(args.get("min_rating"))
        items = [p for p in items if (lo is None or p.price >= lo) and (hi is None or p.price <= hi)
                 and (rmin is None or p.rating >= rmin)]
        sort = args.get("sort", "relevance")
        keys = {"price_asc": lambda p: (p.price, p.sku), "price_desc": lambda p: (-p.price, p.sku),
                "rating": lambda p: (-p.rating, -p.reviews, p.sku), "reviews": lambda p: (-p.reviews, p.sku)}
        if sort in keys:
            items = sorted(items, key=keys[sort])
        page = max(1, int(args.get("page", "1")) if args.get("page", "1").isdigit() else 1)
        per = 24
        total = len(items)
        base = {k: v for k, v in args.items() if k != "page"}
        filters = []
        for name, values in facets.items():
            options = "".join(f'<option value="{esc(v)}"{" selected" if args.get(name) == v else ""}>{esc(v)}</option>'
                              for v in values)
            filters.append(f'<label>{name.title()} <select name="{name}"><option value="">any</option>{options}'
                           f'</select></label>')
        hidden = f'<input type="hidden" name="q" value="{esc(args["q"])}">' if "q" in args else ""
        form = (f'<form class="filters" method="get" action="{path}">{hidden}{"".join(filters)}'
                f'<label>Min price <input type="number" name="min_price" value="{esc(args.get("min_price", ""))}"></label>'
                f'<label>Max price <input type="number" name="max_price" value="{esc(args.get("max_price", ""))}"></label>'
                f'<label>Min rating <select name="min_rating"><option value="">any</option>'
                + "".join(f'<option value="{r}"{" selected" if args.get("min_rating") == str(r) else ""}>{r}+</option>'
                          for r in (3, 4, 4.5)) + '</select></label>'
                '<label>Sort <select name="sort">' + "".join(
                    f'<option value="{k}"{" selected" if sort == k else ""}>{label}</option>' for k, label in (
                        ("relevance", "Featured"), ("price_asc", "Price: low to high"),
                        ("price_desc", "Price: high to low"), ("rating", "Avg. rating"), ("reviews", "Most reviews")))
                + '</select></label><button type="submit">Apply</button></form>')
        pages = "".join(f'<a href="{path}?{urlencode({**base, "page": n})}">{n}</a>' if n != page else f"<span>{n}</span>"
                        for n in range(1, (total + per - 1) // per + 1))
        body = (f"<h1>{esc(heading)}</h1>{form}<p class='count'>{total} products</p>"
                f"{self._grid(items[(page - 1) * per: page * per])}<div class='pagination'>{pages}</div>")
        return self.html(request, heading, body)

    def _grid(self, items: list[Product]) -> str:
        cells = "".join(
            f'<li class="product" data-sku="{p.sku}"><a href="/p/{p.sku}"><img src="/p/{p.sku}/image.png" '
            f'srcset="/p/{p.sku}/image.png 1x, /p/{p.sku}/image.png?w=2 2x" width="120" height="120" alt="{esc(p.name)}">'
            f'<span class="name">{esc(p.name)}</span></a> <span class="price">${p.price:.2f}</span> '
            f'<span class="rating" aria-label="{p.rating} out of 5 stars">{p.rating}</span> '
            f'<span class="reviews">({p.reviews} reviews)</span></li>' for p in items)
        return f'<ul class="grid">{cells}</ul>'

    def _product(self, sku: str) -> Product:
        if sku not in self.by_sku:
            raise NotFound(f"No product {sku}.")
        return self.by_sku[sku]

    def on_product(self, request: Request, sku: str) -> Response:
        p = self._product(sku)
        sizes = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in p.sizes)
        body = (f'<div class="product-page" data-sku="{p.sku}"><h1>{esc(p.name)}</h1>'
                f'<img src="/p/{p.sku}/image.png" srcset="/p/{p.sku}/image.png 1x, /p/{p.sku}/image.png?w=2 2x" '
                f'width="240" height="240" alt="{esc(p.name)}">'
                f'<dl class="attributes"><dt>Brand</dt><dd>{esc(p.brand)}</dd><dt>Colour</dt><dd>{esc(p.color)}</dd>'
                f'<dt>Department</dt><dd><a href="/c/{p.category}">{esc(CATEGORIES[p.category][0])}</a></dd>'
                f'<dt>Price</dt><dd class="price">${p.price:.2f}</dd><dt>Rating</dt><dd>{p.rating} out of 5 '
                f'({p.reviews} reviews)</dd></dl><p class="description">{esc(p.description)}</p>'
                f'<form method="post" action="/cart/add" class="add-to-cart"><input type="hidden" name="sku" '
                f'value="{p.sku}"><label>Size <select name="size">{sizes}</select></label><label>Quantity '
                f'<input type="number" name="qty" value="1" min="1" max="10"></label>'
                f'<button type="submit">Add to cart</button></form></div>')
        return self.html(request, p.name, body)

    def on_image(self, request: Request, sku: str) -> Response:
        p = self._product(sku)
        scale = 2 if request.args.get("w") == "2" else 1
        shade = sum(map(ord, p.color)) % 200
        return respond(request, png(60 * scale, 60 * scale, (shade, 255 - shade, (shade * 3) % 255)), "image/png",
                       cache="public, max-age=86400")

    # ------------------------------------------------------------------ cart and checkout
    def on_cart_add(self, request: Request) -> Response:
        session = self.session(request)
        p = self._product(request.form.get("sku", ""))
        size = request.form.get("size") or p.sizes[0]
        if size not in p.sizes:
            return self.html(request, "Cart", f"<h1>Size {esc(size)} is not available for {esc(p.name)}</h1>")
        qty = max(1, min(10, int(request.form.get("qty", "1")) if request.form.get("qty", "1").isdigit() else 1))
        with self._lock:
            cart = self.carts.setdefault(session, {})
            cart[(p.sku, size)] = cart.get((p.sku, size), 0) + qty
        return redirect("/cart", code=303)

    def on_cart_remove(self, request: Request) -> Response:
        session = self.session(request)
        with self._lock:
            self.carts.get(session, {}).pop((request.form.get("sku", ""), request.form.get("size", "")), None)
        return redirect("/cart", code=303)

    def _cart_lines(self, session: str) -> list[tuple[Product, str, int]]:
        with self._lock:
            return [(self.by_sku[sku], size, qty) for (sku, size), qty in sorted(self.carts.get(session, {}).items())]

    def on_cart(self, request: Request) -> Response:
        session = self.session(request)
        lines = self._cart_lines(session)
        if not lines:
            return self.html(request, "Cart", "<h1>Your cart is empty</h1>")
        rows = "".join(
            f'<tr data-sku="{p.sku}"><td><a href="/p/{p.sku}">{esc(p.name)}</a></td><td>{esc(size)}</td><td>{qty}</td>'
            f'<td>${p.price * qty:.2f}</td><td><form method="post" action="/cart/remove"><input type="hidden" '
            f'name="sku" value="{p.sku}"><input type="hidden" name="size" value="{esc(size)}"><button '
            f'type="submit">Remove</button></form></td></tr>' for p, size, qty in lines)
        total = sum(p.price * q for p, _, q in lines)
        return self.html(request, "Cart", f'<h1>Your cart</h1><table class="cart"><tr><th>Item</th><th>Size</th>'
                                          f'<th>Qty</th><th>Subtotal</th><th></th></tr>{rows}</table>'
                                          f'<p class="total">Total: ${total:.2f}</p><a href="/checkout">Checkout</a>')

    def on_checkout(self, request: Request) -> Response:
        session = self.session(request)
        lines = self._cart_lines(session)
        if request.method == "GET":
            if not lines:
                return redirect("/cart", code=302)
            return self.html(request, "Checkout", '<h1>Checkout</h1><form method="post" action="/checkout">'
                             '<label>Name <input name="name" required></label><label>Address <input name="address" '
                             'required></label><label>Delivery <select name="delivery"><option value="standard">'
                             'Standard</option><option value="express">Express</option></select></label>'
                             '<button type="submit">Place order</button></form>')
        if not lines:
            return redirect("/cart", code=303)
        name, address = request.form.get("name", "").strip(), request.form.get("address", "").strip()
        if not name or not address:
            return self.html(request, "Checkout", "<h1>Please give a name and an address</h1>")
        with self._lock:
            number = next(self._orders)
            self.orders[number] = {"session": session, "name": name, "address": address,
                                   "delivery": request.form.get("delivery", "standard"),
                                   "items": [{"sku": p.sku, "size": s, "qty": q, "price": p.price} for p, s, q in lines]}
            self.carts.pop(session, None)
        return redirect(f"/order/{number}", code=303)

    def on_order(self, request: Request, number: int) -> Response:
        session = self.session(request)
        order = self.orders.get(number)
        if order is None or order["session"] != session:
            raise NotFound("No such order.")
        items = "".join(f"<li>{esc(self.by_sku[i['sku']].name)} ({esc(i['size'])}) x {i['qty']}</li>"
                        for i in order["items"])
        return self.html(request, f"Order {number}", f'<h1>Thank you, {esc(order["name"])}</h1><p class="order-number">'
                                                     f'Order #{number}</p><ul>{items}</ul>')

    def on_api_cart(self, request: Request) -> Response:
        session = self.session(request)
        lines = self._cart_lines(session)
        return json_response(request, {"summary": f"{sum(q for _, _, q in lines)} items in cart",
                                       "served_at": int(self.clock() * 1000), "echo": request.args.get("_", "")})



def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None
