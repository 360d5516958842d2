"""The persona sites (second shop, restaurant, hotel and clinic sites, start page), their catalogue
API, and their pages in the demo archive: navigable offline, carts and reservations through the
site models in replay."""

from __future__ import annotations

import gzip
import json
from collections import deque
from urllib.parse import urlencode, urlsplit

import lxml.html
import pytest
from werkzeug.test import Client

from webfreeze.simulator.sites import SITES
from webfreeze.simulator.sites.catalogue import (
    DOMAINS,
    HOSTS,
    LOCATION_AWARE,
    SITE_KINDS,
    SITE_MODELS,
    START_URL,
    domain_of,
    item_url,
    items,
    site_name,
)

NEW = ["shop2", "dine", "hotels", "clinic", "start"]


def fetch(app, path, *, headers=(), method="GET", data=None):
    client = Client(app, use_cookies=False)
    resp = client.open(path, method=method, headers=list(headers), data=data,
                       content_type="application/x-www-form-urlencoded" if data else None)
    return resp.status_code, resp.headers, resp.get_data()


def page(app, path):
    status, _, body = fetch(app, path)
    assert status == 200, (path, status)
    return lxml.html.fromstring(body)


@pytest.fixture(scope="module")
def apps():
    return {name: SITES[name](0) for name in SITES if name != "scholar"}


# ------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("name", NEW)
def test_same_seed_same_bytes_other_seed_other_pages(name):
    a, b, other = SITES[name](0), SITES[name](0), SITES[name](1)
    host = HOSTS[name]
    paths = ["/", "/static/style.css", "/nothing-here"]
    if name != "start":
        sample = items(host)[:5] + items(host)[-3:]
        paths += [it["path"] for it in sample]
        paths += [f"/c/{sample[0]['category']}?page=2"] if name == "shop2" else [f"/city/{_slug(sample[0]['city'])}"]
    for app in (a, b):
        app.clock = lambda: 1700000000.0  # the XHR's timestamp
    for path in paths + ["/api/stats?_=1"]:
        for enc in ("", "gzip", "gzip, br"):
            ra = fetch(a, path, headers=[("Accept-Encoding", enc), ("Cookie", "x=1")])
            rb = fetch(b, path, headers=[("Accept-Encoding", enc), ("Cookie", "x=1")])
            assert ra[0] == rb[0] and ra[2] == rb[2], (name, path, enc)
    if name != "start":
        assert fetch(a, "/")[2] != fetch(other, "/")[2] or fetch(a, paths[3])[2] != fetch(other, paths[3])[2]


def _slug(text):
    from webfreeze.simulator.sites.places import slug

    return slug(text)


# ------------------------------------------------------------------------------ catalogue API
def test_domains_hosts_and_competition():
    assert set(DOMAINS) == {"shopping", "restaurant", "hotel", "clinic"}
    assert DOMAINS["shopping"] == ["shop.test", "shop2.test"] and DOMAINS["restaurant"] == ["booking.test", "dine.test"]
    assert LOCATION_AWARE == set(DOMAINS["restaurant"] + DOMAINS["hotel"] + DOMAINS["clinic"])
    for domain, hosts in DOMAINS.items():
        for host in hosts:
            assert domain_of(host) == domain and SITE_KINDS[host] in SITES and SITE_MODELS[host] == SITE_KINDS[host]
    names = {h: site_name(h) for h in SITE_KINDS}
    assert len(set(names.values())) == len(names)  # every site has a name of its own
    with pytest.raises(KeyError, match="nowhere.test"):
        items("nowhere.test")
    with pytest.raises(KeyError, match="start.test: not a site of any domain"):
        items("start.test")


def test_items_have_the_contract_keys():
    common = {"host", "domain", "id", "name", "path", "site", "category", "price_tier", "rating"}
    shop_keys = common | {"brand", "color", "sizes", "price", "department", "product_type", "reviews"}
    venue_keys = common | {"city", "neighbourhood", "zip", "state", "slots", "tier", "address", "reviews"}
    for domain, hosts in DOMAINS.items():
        for host in hosts:
            its = items(host)
            assert its and {it["domain"] for it in its} == {domain} and {it["host"] for it in its} == {host}
            assert len({it["id"] for it in its}) == len(its)
            assert all(set(it) == (shop_keys if domain == "shopping" else venue_keys) for it in its), host
            assert {it["price_tier"] for it in its} == {"budget", "mid", "premium"}, host
            json.dumps(its)  # plain data
    its = items("shop2.test")
    its[0]["name"] = "changed"
    assert items("shop2.test")[0]["name"] != "changed"  # fresh dicts each call
    booking = items("booking.test")
    assert all(it["neighbourhood"] is None and it["zip"] is None and it["state"] for it in booking)
    for host in ("dine.test", "hotels.test", "clinic.test"):
        assert all(it["neighbourhood"] and it["zip"] and it["state"] for it in items(host))


def test_competing_sites_differ():
    shop, shop2 = items("shop.test"), items("shop2.test")
    assert {p["brand"] for p in shop} & {p["brand"] for p in shop2}  # some brands both sell
    assert {p["brand"] for p in shop2} - {p["brand"] for p in shop}  # and some only one
    assert not {p["id"] for p in shop} & {p["id"] for p in shop2}
    mean = lambda ps: sum(p["price"] for p in ps) / len(ps)  # noqa: E731
    assert mean(shop2) < mean(shop) * 0.95  # the second shop is cheaper on average
    booking, dine = items("booking.test"), items("dine.test")
    assert {v["city"] for v in booking} & {v["city"] for v in dine} and {v["city"] for v in dine} - {
        v["city"] for v in booking}
    assert {v["category"] for v in dine} - {v["category"] for v in booking}
    assert not {v["name"] for v in booking} & {v["name"] for v in dine}
    hotels = items("hotels.test")
    assert {v["category"] for v in hotels} == {"2-star", "3-star", "4-star", "5-star"}
    assert all(v["tier"] == int(v["category"][0]) - 1 for v in hotels)  # the class sets the price tier


def test_item_pages_show_what_the_catalogue_says(apps):
    for domain, hosts in DOMAINS.items():
        for host in hosts:
            app = apps[SITE_KINDS[host]]
            its = items(host)
            for it in its[:: max(1, len(its) // 12)]:
                assert item_url(it) == f"http://{host}{it['path']}"
                doc = page(app, it["path"])
                assert doc.xpath("string(//h1)") == it["name"]
                text = doc.text_content()
                if domain == "shopping":
                    assert f"${it['price']:.2f}" in text and it["brand"] in text and it["color"] in text
                    assert doc.xpath("//select[@name='size']/option/@value") == it["sizes"]
                else:
                    assert it["city"] in text and it["category"] in text and "$" * it["tier"] in text
                    assert doc.xpath("//select[@name='slot']/option/@value") == it["slots"]
                    if it["neighbourhood"]:
                        assert doc.xpath("string(//dd[@class='neighbourhood'])") == it["neighbourhood"]
                        assert doc.xpath("string(//dd[@class='zip'])") == it["zip"]
                        assert doc.xpath("string(//dd[@class='state'])") == it["state"]


# ------------------------------------------------------------------------------ navigation
def test_start_page_links_every_site(apps):
    doc = page(apps["start"], "/")
    hrefs = doc.xpath("//li[@class='bookmark']/a/@href")
    assert sorted(hrefs) == sorted(f"http://{h}/" for h in SITE_KINDS if h != "start.test")
    assert START_URL == "http://start.test/"
    for h in SITE_KINDS:
        if h != "start.test":
            assert site_name(h) in doc.text_content()


@pytest.mark.parametrize("host", ["shop2.test", "dine.test", "hotels.test", "clinic.test", "shop.test"])
def test_every_item_is_reachable_by_links_from_the_home_page(apps, host):
    """What personalised tasks need: home -> category or city page (-> its pages) -> item."""
    from webfreeze.demo.persona_sites import page_urls

    app = apps[SITE_KINDS[host]]
    listed = {urlsplit(u)._replace(scheme="", netloc="").geturl() for u in page_urls()[host]}
    seen, queue, depth = {"/"}, deque([("/", 0)]), {}
    while queue:
        path, d = queue.popleft()
        depth[path] = d
        if path.startswith(("/p/", "/venue/")):
            continue
        for href in page(app, path).xpath("//a/@href"):
            parts = urlsplit(href)
            if parts.netloc or not parts.path.startswith(("/c/", "/p/", "/city/", "/venue/")):
                continue
            if href not in seen and (parts.path.startswith(("/p/", "/venue/")) or href in listed):
                seen.add(href)
                queue.append((href, d + 1))
    for it in items(host):
        assert it["path"] in depth, it
        assert depth[it["path"]] <= 3
    assert listed <= set(depth)  # every page the demo records is on the way to an item


def test_city_pages_and_their_redirect(apps):
    app = apps["dine"]
    doc = page(app, "/city/lisbon")
    hoods = doc.xpath("//section[@class='neighbourhood']/h2/text()")
    assert [h.strip() for h in hoods] == ["Alfama", "Baixa", "Bel\u00e9m", "Pr\u00edncipe Real"][:len(hoods)]
    ids = doc.xpath("//li[@class='venue']/@data-id")
    assert sorted(ids) == sorted(v["id"] for v in items("dine.test") if v["city"] == "Lisbon")
    status, headers, _ = fetch(app, "/city/Lisbon")
    assert status == 301 and headers["Location"].endswith("/city/lisbon")
    assert fetch(app, "/city/atlantis")[0] == 404
    status, headers, body = fetch(app, "/city/lisbon", headers=[("Accept-Encoding", "gzip")])
    assert headers["Content-Encoding"] == "gzip" and b"Alfama" in gzip.decompress(body)


def test_located_site_reservation_by_post_and_cookie(apps):
    app = SITES["clinic"](0)
    doctor = next(v for v in items("clinic.test") if len(v["slots"]) > 1)
    status, headers, _ = fetch(app, "/")
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith("care_sid=")
    form = urlencode({"venue": doctor["id"], "slot": doctor["slots"][1], "party": 1, "name": "Ines"})
    status, headers, _ = fetch(app, "/reserve", method="POST", data=form, headers=[("Cookie", cookie)])
    assert status == 303 and "/reservation/60001" in headers["Location"]
    _, _, body = fetch(app, "/reservation/60001", headers=[("Cookie", cookie)])
    assert b"Confirmed" in body and doctor["slots"][1].encode() in body
    assert fetch(app, "/reservation/60001", headers=[("Cookie", "care_sid=someone")])[0] == 404
    free = json.loads(fetch(app, f"/api/availability/{doctor['id']}")[2])["free"]
    assert doctor["slots"][1] not in free and len(free) == len(doctor["slots"]) - 1


def test_second_shop_cart_and_order(apps):
    app = SITES["shop2"](0)
    p = next(p for p in items("shop2.test") if len(p["sizes"]) > 1)
    status, headers, _ = fetch(app, "/shop")
    assert status == 301
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith("lark_sid=")
    add = urlencode({"sku": p["id"], "size": p["sizes"][-1], "qty": 2})
    assert fetch(app, "/cart/add", method="POST", data=add, headers=[("Cookie", cookie)])[0] == 303
    order = urlencode({"name": "Ada", "address": "1 Main St"})
    status, headers, _ = fetch(app, "/checkout", method="POST", data=order, headers=[("Cookie", cookie)])
    assert status == 303 and headers["Location"].endswith("/order/70001")
    assert b"Thank you, Ada" in fetch(app, "/order/70001", headers=[("Cookie", cookie)])[2]


# ------------------------------------------------------------------------------ the demo archive
def test_demo_archive_holds_the_persona_sites_pages():
    from webfreeze.archives import Archive, archive_digest
    from webfreeze.demo import ARCHIVE, SUITE
    from webfreeze.demo.persona_sites import page_urls

    with Archive.open(ARCHIVE) as arc:
        missing = [u for urls in page_urls().values() for u in urls if not arc.lookup_exact("GET", u)]
        assert not missing, missing[:5]
        for host in ("shop2.test", "dine.test", "hotels.test", "clinic.test", "start.test"):
            assert arc.lookup_exact("GET", f"http://{host}/static/style.css?v=20240315"), host
        # the added session is stamped with the last capture before it: the replay clock is unchanged
        (start,) = arc.lookup_exact("GET", START_URL)
        added = start.session_id
        before = max(r.captured_at for r in arc.exchanges() if r.session_id != added)
        assert {r.captured_at for r in arc.exchanges(session=added)} == {before}
        assert arc.capture_range()[1] == before
        # no request the archive had was captured again, nor one twice
        rows = list(arc.exchanges(session=added))
        assert len(rows) > 2000
        assert all(len(arc.lookup_exact(r.method, r.url, r.body_key)) == 1 for r in rows)
    assert json.loads((SUITE / "manifest.json").read_text())["archive_digest"] == archive_digest(ARCHIVE)


def test_add_records_stamps_skips_known_requests_and_task_host_assets(tmp_path):
    from webfreeze.archives import Archive, Exchange
    from webfreeze.demo.persona_sites import add_records

    def exchange(url, when, sid, body=b"x"):
        return Exchange(url=url, captured_at=when, status=200, resp_headers=[("Content-Type", "text/html")],
                        payload=body, session_id=sid)

    dest, src = tmp_path / "dest.wfz", tmp_path / "src.wfz"
    with Archive.create(dest) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(exchange("http://shop.test/", "2024-03-15T10:00:00Z", sid))
        arc.add_exchange(exchange("http://shop.test/static/app.js?v=1", "2024-03-15T11:00:00Z", sid))
        arc.add_exchange(exchange("http://dine.test/static/style.css?v=1", "2024-03-15T10:30:00Z", sid))
    with Archive.create(src) as arc:
        sid = arc.new_session("crawl")
        for url in ("http://shop.test/", "http://shop.test/p/SH00001", "http://shop.test/p/SH00001/image.png",
                    "http://shop.test/static/style.css?v=1", "http://shop.test/api/cart?_=17",
                    "http://dine.test/", "http://dine.test/static/style.css?v=1"):
            arc.add_exchange(exchange(url, "2026-01-01T00:00:00Z", sid, url.encode()))
        arc.add_page(session_id=sid, url="http://shop.test/p/SH00001", captured_at="2026-01-01T00:00:00Z", title="P")
    counts = add_records(src, dest, pages={"http://shop.test/p/SH00001", "http://dine.test/"})
    assert counts == {"exchanges": 3, "skipped_existing": 1, "skipped_task_hosts": 3, "pages": 1}
    with Archive.open(dest) as arc:
        original = {"http://shop.test/", "http://shop.test/static/app.js?v=1", "http://dine.test/static/style.css?v=1"}
        added = {r.url: r.captured_at for r in arc.exchanges() if r.url not in original}
        assert sorted(added) == ["http://dine.test/", "http://shop.test/p/SH00001",
                                 "http://shop.test/p/SH00001/image.png"]
        assert set(added.values()) == {arc.capture_range()[1]} and arc.capture_range()[1].startswith("2024-03-15T11")
        assert [p.title for p in arc.pages()] == ["P"]


def test_shop_task_pages_in_the_archive_are_what_the_site_serves():
    """shop.test must not change: its recorded pages (the demo's sessions and the added ones)
    are byte for byte what the site serves today."""
    from webfreeze.archives import Archive
    from webfreeze.demo import ARCHIVE

    app = SITES["shop"](0)
    checked = 0
    with Archive.open(ARCHIVE) as arc:
        for row in arc.exchanges(host="shop.test", method="GET", status=200, mime="text/html*"):
            if not row.url.startswith("http://shop.test/"):
                continue
            path = row.url[len("http://shop.test"):]
            if path.startswith(("/cart", "/checkout", "/order")) or checked >= 150 and not path.startswith("/c/"):
                continue
            stored = row.body()
            assert fetch(app, path)[2] == stored, path
            checked += 1
    assert checked >= 150


def test_cart_and_reservation_offline_through_the_site_models():
    """From the start page to a cart on shop2.test and a table on dine.test, by links, in the
    text backend over the demo archive (the sites are not running): the site models keep the state."""
    from webfreeze.demo import ARCHIVE
    from webfreeze.simulator.env import EnvConfig, WebEnv
    from webfreeze.simulator.site_models import SimulatedSiteModel

    def find(env, role, name):  # a product link's name repeats its image's alt text
        found = [e for e in env.tree.descriptions if e["role"] == role and name in e["name"]]
        return next((e for e in found if e["name"] == name), found[0] if found else None)

    def click(env, role, name):
        bid = find(env, role, name)["bid"]
        obs, *_ = env.step(f"click('{bid}')")
        assert not obs["last_action_error"], obs["last_action_error"]
        return obs

    product = next(p for p in items("shop2.test") if p["category"] == "home" and len(p["sizes"]) == 1)
    venue = next(v for v in items("dine.test") if v["city"] == "Porto" and len(v["slots"]) > 1)
    models = [SimulatedSiteModel(SITE_MODELS[h], h) for h in ("shop2.test", "dine.test")]
    env = WebEnv(EnvConfig(ARCHIVE, backend="text", site_models=models))
    try:
        env.reset(options={"task": {"id": "t", "start_url": START_URL, "instruction": "shop and book"}})
        click(env, "link", "Larkspur Supply Co.")
        click(env, "link", "Home & Kitchen")
        pages = 0
        while find(env, "link", product["name"]) is None:
            pages += 1
            obs = click(env, "link", str(pages + 1))  # the listing's next page
        click(env, "link", product["name"])
        obs = click(env, "button", "Add to cart")
        assert obs["url"] == "http://shop2.test/cart" and product["name"] in obs["axtree_text"]
        obs, *_ = env.step(f"goto('{START_URL}')")
        click(env, "link", "Dine Around")
        click(env, "link", "Porto")
        obs = click(env, "link", venue["name"])
        assert venue["neighbourhood"] in obs["axtree_text"] and venue["zip"] in obs["axtree_text"]
        name_box = next(e["bid"] for e in env.tree.descriptions if e["role"] == "textbox" and e["name"] == "Name")
        env.step(f"fill('{name_box}', 'Rui')")
        obs = click(env, "button", "Reserve")
        assert "Confirmed" in obs["axtree_text"], obs["axtree_text"][:500]
        env.step("send_msg_to_user('done')")
        state = env.trajectory()["final_state"]
        assert state["shop2.test"]["cart"]["items"] == [{"sku": product["id"], "size": product["sizes"][0], "qty": 1}]
        (reservation,) = state["dine.test"]["reservations"]
        assert reservation["venue"] == venue["id"] and reservation["slot"] == venue["slots"][0]
        assert reservation["name"] == "Rui" and reservation["number"] == 30001
    finally:
        env.close()
