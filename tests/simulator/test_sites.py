"""The simulated preprint archive (`scholar`), over real HTTP on loopback."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
from urllib.parse import urlencode

import lxml.html
import pytest

from webfreeze.simulator.sites import serve
from webfreeze.simulator.sites.scholar_data import ARCHIVES, build_corpus


class Client:
    """A tiny HTTP client that does not follow redirects or decode bodies (we check both)."""

    def __init__(self, server):
        self.server = server

    def get(self, path, headers=None, method="GET", body=None):
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            headers: dict[str, str] = {}
            for k, v in resp.getheaders():  # repeated headers (Set-Cookie) joined by newlines
                headers[k.lower()] = f"{headers[k.lower()]}\n{v}" if k.lower() in headers else v
            return resp.status, headers, resp.read()
        finally:
            conn.close()

    def page(self, path):
        status, headers, body = self.get(path)
        assert status == 200, (path, status)
        return lxml.html.fromstring(body)


@pytest.fixture(scope="module")
def site():
    server = serve("scholar", seed=0)
    yield Client(server)
    server.stop()


@pytest.fixture(scope="module")
def corpus():
    return build_corpus(0)


def test_corpus_shape(corpus):
    papers = corpus.papers
    assert len(papers) >= 300
    archives = {p.archive for p in papers}
    assert len(archives) >= 8 and archives <= set(ARCHIVES)
    assert all(len(ARCHIVES[a][1]) >= 3 for a in archives)
    assert len({p.id for p in papers}) == len(papers)
    assert any(len(p.versions) == 2 for p in papers) and any(len(p.versions) == 1 for p in papers)
    assert any(p.doi for p in papers) and any(p.journal_ref for p in papers)
    assert all(p.versions[0].submitted < p.versions[-1].submitted or len(p.versions) == 1 for p in papers)
    assert build_corpus(1).papers[0].title != papers[0].title or build_corpus(1).papers[0].id != papers[0].id


def test_same_seed_same_bytes(site):
    other = serve("scholar", seed=0)
    try:
        paths = ["/", "/list/cs/recent", "/abs/" + build_corpus(0).papers[5].id, "/search?query=graph",
                 "/static/style.css?v=1", "/help/submit"]
        for path in paths:
            for enc in ("", "gzip", "br"):
                hdrs = {"Accept-Encoding": enc, "Cookie": "scholar_session=x"}
                a = site.get(path, hdrs)
                b = Client(other).get(path, hdrs)
                assert a[0] == b[0] == 200 and a[2] == b[2], (path, enc)
    finally:
        other.stop()
    different = serve("scholar", seed=1)
    try:
        assert Client(different).get("/list/cs/recent")[2] != site.get("/list/cs/recent")[2]
    finally:
        different.stop()


def test_home_lists_every_archive_and_category(site):
    doc = site.page("/")
    hrefs = set(doc.xpath("//a/@href"))
    for archive, (_, cats) in ARCHIVES.items():
        assert f"/list/{archive}/new" in hrefs
        assert all(f"/list/{c}/recent" in hrefs for c in cats)


def test_redirects_and_errors(site, corpus):
    status, headers, _ = site.get("/list/math")
    assert status == 301 and headers["location"].endswith("/list/math/recent")
    p = next(p for p in corpus.papers if len(p.versions) == 2)
    status, headers, _ = site.get(f"/html/{p.id}")
    assert status == 302 and headers["location"].endswith(f"/html/{p.id}v2")
    for path in ("/abs/9999.99999", f"/abs/{p.id}v7", "/list/nonsense", "/nothing/here", "/list/cs/yearly"):
        status, headers, body = site.get(path)
        assert status == 404 and headers["content-type"].startswith("text/html") and b"404" in body


def test_listings_page_and_filter_by_category(site, corpus):
    doc = site.page("/list/cs.CL/recent?show=25")
    ids = doc.xpath("//dl[@class='listing']/dt/a[@title='Abstract']/text()")
    assert ids and all("cs.CL" in corpus.by_id[i].categories for i in ids)
    all_cs = [p for p in corpus.in_archive("cs")]
    doc = site.page("/list/cs/recent?show=25&skip=25")
    second = doc.xpath("//dl[@class='listing']/dt/a[@title='Abstract']/text()")
    assert second and not set(second) & set(site.page("/list/cs/recent?show=25").xpath(
        "//dl[@class='listing']/dt/a[@title='Abstract']/text()"))
    assert len(all_cs) > 50


def test_abstract_page(site, corpus):
    p = next(p for p in corpus.papers if len(p.versions) == 2 and p.doi)
    doc = site.page(f"/abs/{p.id}v1")
    assert doc.xpath("string(//h1[@class='title'])") == p.title
    assert doc.xpath("//div[@class='authors']/a/text()") == p.authors
    assert p.abstract in doc.xpath("string(//blockquote[@class='abstract'])")
    history = doc.xpath("//div[@class='submission-history']//li")
    assert len(history) == 2 and "[v2]" in history[1].text_content()
    meta = {tr.xpath("string(th)"): tr.xpath("string(td)") for tr in doc.xpath("//table[@class='metatable']//tr")}
    assert meta["DOI"] == p.doi and meta["Journal reference"] == p.journal_ref
    assert meta["Cite as"].endswith("(v1)")


def test_html_full_text(site, corpus):
    p = next(p for p in corpus.papers if len(p.figures) >= 2)
    doc = site.page(f"/html/{p.id}v1")
    sections = doc.xpath("//section[@class='ltx_section']/h2/text()")
    assert sections[0] == "1 Introduction" and sections[-1].startswith("5 ")
    assert doc.xpath("//section[@class='ltx_subsection']/h3/text()")[0].startswith(("3.1", "4.1"))
    figures = doc.xpath("//figure[@class='ltx_figure']")
    assert len(figures) == len(p.figures)
    caption = figures[0].xpath("string(figcaption)")
    assert caption.startswith("Figure 1: ") and p.figures[0][1] in caption
    img = figures[0].xpath("img")[0]
    assert "2x" in img.get("srcset")
    status, headers, body = site.get(img.get("src"))
    assert status == 200 and headers["content-type"] == "image/png" and body.startswith(b"\x89PNG")
    assert len(doc.xpath("//figure[@class='ltx_table']//tbody/tr")) == 3
    assert len(doc.xpath("//section[@class='ltx_bibliography']//li")) == len(p.references)


def test_simple_search(site, corpus):
    target = corpus.papers[10]
    word = target.title.split()[0]
    doc = site.page("/search?" + urlencode({"query": word, "searchtype": "title", "size": 200}))
    ids = doc.xpath("//dl[@class='listing']/dt/a[@title='Abstract']/text()")
    expected = [p.id for p in corpus.papers if word.lower() in p.title.lower()]
    assert ids == expected
    author = target.authors[0]
    doc = site.page("/search?" + urlencode({"query": author, "searchtype": "author", "size": 200}))
    assert target.id in doc.xpath("//dl[@class='listing']/dt/a[@title='Abstract']/text()")
    oldest = site.page("/search?" + urlencode({"query": word, "searchtype": "title", "size": 200,
                                                "order": "announced_date_first"}))
    assert oldest.xpath("//dl[@class='listing']/dt/a[@title='Abstract']/text()") == list(reversed(expected))
    none = site.page("/search?query=zzzqqq")
    assert "no results" in none.xpath("string(//p[@class='result-count'])")


def test_advanced_search_boolean_category_dates(site, corpus):
    def ids(params):
        doc = site.page("/search/advanced?" + urlencode({**params, "size": 200}))
        return doc.xpath("//dl[@class='listing']/dt/a[@title='Abstract']/text()")

    a = [p for p in corpus.papers if "graph" in p.title.lower()]
    assert ids({"terms-0-term": "graph", "terms-0-field": "title"}) == [p.id for p in a]
    not_cs = ids({"terms-0-term": "graph", "terms-0-field": "title", "terms-1-operator": "NOT",
                  "terms-1-term": "bayesian", "terms-1-field": "title"})
    assert not_cs == [p.id for p in a if "bayesian" not in p.title.lower()]
    either = ids({"terms-0-term": "graph", "terms-0-field": "title", "terms-1-operator": "OR",
                  "terms-1-term": "quantum", "terms-1-field": "title"})
    assert set(either) == {p.id for p in corpus.papers if "graph" in p.title.lower() or "quantum" in p.title.lower()}
    only_math = ids({"terms-0-term": "the", "terms-0-field": "abstract", "classification-math": "y"})
    assert only_math and all(any(c.startswith("math") for c in corpus.by_id[i].categories) for i in only_math)
    ranged = ids({"terms-0-term": "the", "terms-0-field": "all", "date-filter_by": "date_range",
                  "date-from_date": "2024-02-01", "date-to_date": "2024-02-29"})
    assert ranged and all("2024-02-01" <= str(corpus.by_id[i].first_submitted.date()) <= "2024-02-29" for i in ranged)
    form = site.page("/search/advanced")
    assert form.xpath("//form[@class='advanced']//select[@name='terms-1-operator']")


def test_encodings_cookies_post_and_xhr(site):
    status, headers, body = site.get("/about", {"Accept-Encoding": "gzip, deflate"})
    assert headers["content-encoding"] == "gzip" and b"About" in gzip.decompress(body)
    assert "scholar_session=" in headers["set-cookie"]
    _, headers, body = site.get("/static/app.js?v=20240315", {"Accept-Encoding": "gzip, br"})
    assert headers["content-encoding"] == "br"
    import brotli

    js = brotli.decompress(body).decode()
    assert "Date.now()" in js and "Math.random()" in js
    _, headers, body = site.get("/about")
    assert "content-encoding" not in headers and body.startswith(b"<!DOCTYPE html>")
    status, headers, _ = site.get("/prefs", {"Content-Type": "application/x-www-form-urlencoded"}, "POST",
                                  "theme=dark&next=/help")
    assert status == 303 and headers["location"].endswith("/help") and "theme=dark" in headers["set-cookie"]
    _, _, body = site.get("/help", {"Cookie": "theme=dark; scholar_session=s1"})
    assert b'class="theme-dark"' in body
    _, headers, body = site.get("/api/stats?_=1700000000000")
    data = json.loads(body)
    assert headers["cache-control"] == "no-store" and data["echo"] == "1700000000000" and data["served_at"] > 0


def test_serve_port_in_use_is_one_line(cli):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = cli("sites", "serve", "scholar", "--port", port, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip() == f"webfreeze: error: cannot listen on 127.0.0.1:{port}: port already in use"


# ---------------------------------------------------------------------------------------- shop
@pytest.fixture(scope="module")
def shop():
    server = serve("shop", seed=0)
    yield Client(server)
    server.stop()


def test_shop_catalogue_and_filters(shop):
    from webfreeze.simulator.sites.shop import CATEGORIES, build_catalogue

    products = build_catalogue(0)
    assert len(products) >= 500 and len({p.category for p in products}) == len(CATEGORIES)
    doc = shop.page("/c/shoes?" + urlencode({"brand": "Acme", "size": "42", "max_price": "150", "sort": "price_asc"}))
    skus = doc.xpath("//li[@class='product']/@data-sku")
    expected = sorted((p for p in products if p.category == "shoes" and p.brand == "Acme" and "42" in p.sizes
                       and p.price <= 150), key=lambda p: (p.price, p.sku))
    assert skus == [p.sku for p in expected][:24] and skus
    prices = [float(x.strip("$")) for x in doc.xpath("//li[@class='product']/span[@class='price']/text()")]
    assert prices == sorted(prices)
    found = shop.page("/search?q=" + products[3].brand.lower())
    assert found.xpath("string(//p[@class='count'])").split()[0] == str(
        sum(products[3].brand.lower() in f"{p.name} {p.brand} {p.category} {p.description}".lower() for p in products))


def test_shop_cart_and_checkout_by_post_and_cookie(shop):
    from webfreeze.simulator.sites.shop import build_catalogue

    p = next(p for p in build_catalogue(0) if len(p.sizes) > 1)
    status, headers, _ = shop.get("/")
    cookie = headers["set-cookie"].split(";")[0]
    form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
    status, headers, _ = shop.get("/cart/add", form, "POST", urlencode({"sku": p.sku, "size": p.sizes[1], "qty": 2}))
    assert status == 303 and headers["location"].endswith("/cart")
    _, _, body = shop.get("/cart", {"Cookie": cookie})
    cart = lxml.html.fromstring(body)
    assert cart.xpath("//table[@class='cart']//tr[@data-sku]/@data-sku") == [p.sku]
    assert f"{p.price * 2:.2f}" in cart.xpath("string(//p[@class='total'])")
    # another session sees its own, empty cart
    _, _, other = shop.get("/cart", {"Cookie": "shop_session=someone-else"})
    assert b"Your cart is empty" in other
    status, headers, _ = shop.get("/checkout", form, "POST", urlencode({"name": "Ada", "address": "1 Main St"}))
    assert status == 303 and "/order/" in headers["location"]
    _, _, body = shop.get(headers["location"].split(str(shop.server.port))[-1], {"Cookie": cookie})
    assert b"Thank you, Ada" in body
    _, _, body = shop.get("/cart", {"Cookie": cookie})
    assert b"Your cart is empty" in body


# ---------------------------------------------------------------------------------------- booking
def test_booking_search_and_reservation():
    from webfreeze.simulator.sites.booking import build_venues

    server = serve("booking", seed=0)
    try:
        site = Client(server)
        venues = build_venues(0)
        assert {v.kind for v in venues} == {"restaurant", "doctor", "hotel"}
        doc = site.page("/search?" + urlencode({"kind": "restaurant", "city": "Kyoto", "q": "italian", "sort": "price"}))
        ids = doc.xpath("//li[@class='venue']/@data-id")
        expected = sorted((v for v in venues if v.kind == "restaurant" and v.city == "Kyoto"
                           and "italian" in f"{v.category} {v.name}".lower()), key=lambda v: (v.tier, v.id))
        assert ids == [v.id for v in expected]
        v = next(v for v in venues if v.kind == "restaurant" and len(v.slots) > 2)
        page = site.page(f"/venue/{v.id}")
        assert page.xpath("//form[@class='reserve']//select[@name='slot']/option/@value") == v.slots
        _, headers, _ = site.get("/")
        cookie = headers["set-cookie"].split(";")[0]
        form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie}
        status, headers, _ = site.get("/reserve", form, "POST",
                                      urlencode({"venue": v.id, "slot": v.slots[0], "party": 4, "name": "Kai"}))
        assert status == 303 and "/reservation/" in headers["location"]
        path = "/reservation/" + headers["location"].rsplit("/", 1)[1]
        _, _, body = site.get(path, {"Cookie": cookie})
        assert b"Confirmed" in body and v.slots[0].encode() in body and b"4 guest(s)" in body
        # the slot is gone for everyone, and a second booking of it is refused
        assert v.slots[0] not in site.page(f"/venue/{v.id}").xpath("//select[@name='slot']/option/@value")
        status, _, body = site.get("/reserve", form, "POST",
                                   urlencode({"venue": v.id, "slot": v.slots[0], "party": 2, "name": "Ana"}))
        assert status == 200 and b"just taken" in body
        assert json.loads(site.get(f"/api/availability/{v.id}")[2])["free"] == v.slots[1:]
        # another session cannot see this reservation
        assert site.get(path, {"Cookie": "booking_session=other"})[0] == 404
    finally:
        server.stop()
