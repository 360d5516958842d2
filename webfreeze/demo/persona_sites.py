"""The persona sites' pages in the demo archive: what personalised tasks navigate through.

Personalised tasks (``webfreeze personas tasks``) start at ``start.test`` or a site's home and
reach an item by following links: the start page, each site's home, its category or city pages
(every page of a paged listing) and every item page, on the two shops (``shop.test``,
``shop2.test``), the restaurant sites (``booking.test``: its search result pages for every city
and cuisine, the form's GET URLs; ``dine.test``), ``hotels.test`` and ``clinic.test``.

They are visited in Chromium through the recording proxy (every sub-request recorded: styles,
scripts, images, the XHR), without the crawl's full-page screenshots (~160 KB each, which would
make the archive ~40x larger) or DOM snapshots: a page record keeps the URL, title and status.

:func:`add_records` copies such a recording into an archive stamped with that archive's last
capture time, so that the replay clock of the pages already there (the archive's last capture)
stays what it was; it adds no capture of a request already in the archive, and on the hosts the
demo tasks use (``shop.test``, ``booking.test``) only the pages and product images, never another
capture of their scripts, styles or XHRs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from webfreeze.simulator.sites.catalogue import DOMAINS, HOSTS, START_URL, items

NEW_HOSTS = ("start.test", "shop2.test", "dine.test", "hotels.test", "clinic.test")
TASK_HOSTS = ("shop.test", "booking.test")  # hosts of the demo's own tasks: pages only are added there
PER_PAGE = 24  # the shops' listing page size


def page_urls(seed: int = 0) -> dict[str, list[str]]:
    """host -> the URLs to visit, in visiting order (deterministic)."""
    from webfreeze.simulator.sites.booking import CITIES as BOOKING_CITIES
    from webfreeze.simulator.sites.booking import KINDS
    from webfreeze.simulator.sites.places import slug
    from webfreeze.simulator.sites.shop import CATEGORIES

    out: dict[str, list[str]] = {"start.test": [START_URL]}
    for host in DOMAINS["shopping"]:
        products = items(host, seed)
        urls = [f"http://{host}/"]
        for cat in CATEGORIES:
            count = sum(1 for p in products if p["category"] == cat)
            urls.append(f"http://{host}/c/{cat}")
            if count > PER_PAGE:  # the pagination links, page 1 included (the link back from page 2)
                urls += [f"http://{host}/c/{cat}?page={n}" for n in range(1, math.ceil(count / PER_PAGE) + 1)]
        out[host] = urls + [f"http://{host}{p['path']}" for p in products]
    for host in DOMAINS["restaurant"] + DOMAINS["hotel"] + DOMAINS["clinic"]:
        venues = items(host, seed)
        if host == HOSTS["booking"]:  # no city pages there: its search form's GET URLs
            cuisines = KINDS["restaurant"][1]
            urls = [f"http://{host}/search?" + urlencode({"kind": "restaurant", "city": city, "q": q})
                    for city in [""] + BOOKING_CITIES for q in [""] + cuisines]
        else:
            cities = sorted({v["city"] for v in venues}, key=[v["city"] for v in venues].index)
            urls = [f"http://{host}/"] + [f"http://{host}/city/{slug(c)}" for c in cities]
        out[host] = urls + [f"http://{host}{v['path']}" for v in venues]
    return out


def record_pages(archive_path, urls: list[str], *, resolve: dict[str, tuple[str, int]],
                 progress: Callable[[int, int, str], None] | None = None) -> int:
    """Visit ``urls`` in Chromium through the recording proxy into ``archive_path`` (page records
    without screenshots); returns the number of pages. A page that does not load is an error."""
    from playwright.sync_api import sync_playwright

    from webfreeze.archives.timeutil import now
    from webfreeze.recorder.proxy import RecordingProxy, recording_into
    from webfreeze.simulator.browser import launch_chromium, new_context, track_inflight, wait_network_quiet

    with recording_into(archive_path) as arc:
        proxy = RecordingProxy(arc, port=0, session_kind="pages", resolve=resolve).start()
        try:
            with sync_playwright() as pw:
                browser = launch_chromium(pw, proxy=proxy.url)
                page = new_context(browser).new_page()
                inflight = track_inflight(page)
                for i, url in enumerate(urls, start=1):
                    inflight.clear()
                    response = page.goto(url, wait_until="load", timeout=30_000)
                    wait_network_quiet(page, inflight)
                    status = response.status if response else None
                    if status != 200:
                        raise RuntimeError(f"{url}: status {status} while recording the persona sites")
                    arc.add_page(session_id=proxy.session_id, url=url, captured_at=now(), title=page.title(),
                                 extra={"final_url": page.url, "status": status})
                    if progress:
                        progress(i, len(urls), url)
                browser.close()
        finally:
            proxy.stop()
    return len(urls)


def _wanted(url: str, pages: set[str]) -> bool:
    """On the demo tasks' hosts, only the visited pages and product images are added."""
    parts = urlsplit(url)
    if parts.hostname not in TASK_HOSTS:
        return True
    return url in pages or (parts.path.startswith("/p/") and parts.path.endswith("/image.png"))


def add_records(source, dest, *, pages: set[str]) -> dict:
    """Copy ``source``'s exchanges and page records into ``dest`` as one new session stamped with
    ``dest``'s last capture time, skipping requests ``dest`` already has and, on the demo tasks'
    hosts, everything but ``pages`` and product images. Returns counts."""
    from webfreeze.archives import Archive

    added = {"exchanges": 0, "skipped_existing": 0, "skipped_task_hosts": 0, "pages": 0}
    with Archive.open(source) as src, Archive.open(dest, write=True) as dst:
        last = dst.capture_range()
        if last is None:
            raise RuntimeError(f"{dest}: an empty archive has no capture time to join")
        stamp = last[1]
        with dst.transaction():
            sid = dst.new_session("pages", source="webfreeze demo build: persona sites",
                                  tool="webfreeze.demo.persona_sites",
                                  info={"stamped_at": stamp, "hosts": sorted({urlsplit(u).hostname for u in pages})})
            for ex in src.exchanges():
                url = ex.url
                if not _wanted(url, pages):
                    added["skipped_task_hosts"] += 1
                    continue
                if dst.lookup_exact(ex.method, url, ex.body_key):
                    added["skipped_existing"] += 1
                    continue
                dst.add_exchange(ex.to_exchange(captured_at=stamp, session_id=sid))
                added["exchanges"] += 1
            for page in src.pages():
                dst.add_page(session_id=sid, url=page.url, captured_at=stamp, title=page.title,
                             extra=page.extra or None)
                added["pages"] += 1
            dst.end_session(sid)
    return added


def record_persona_sites(dest, *, resolve: dict[str, tuple[str, int]], work: Path, seed: int = 0,
                         progress: Callable[[str], None] = print) -> dict:
    """Record every persona site's pages (:func:`page_urls`) into a scratch archive in ``work``
    and add them to ``dest`` (:func:`add_records`). Pages ``dest`` already has are not visited."""
    from webfreeze.archives import Archive

    by_host = page_urls(seed)
    with Archive.open(dest) as arc:
        urls = [u for hosts in by_host.values() for u in hosts if not arc.lookup_exact("GET", u)]
    if not urls:
        progress("the persona sites: the archive already has every page")
        return {"exchanges": 0, "skipped_existing": 0, "skipped_task_hosts": 0, "pages": 0}
    scratch = Path(work) / "persona-sites.wfz"
    step = max(1, len(urls) // 20)

    def report(i: int, n: int, url: str) -> None:
        if i % step == 0 or i == n:
            progress(f"  persona sites: {i}/{n} pages ({url})")

    progress(f"record the persona sites: {len(urls)} pages on {len(by_host)} hosts (no screenshots)")
    record_pages(scratch, urls, resolve=resolve, progress=report)
    counts = add_records(scratch, dest, pages=set(urls))
    progress(f"  added {counts['exchanges']} exchanges and {counts['pages']} page records "
             f"({counts['skipped_existing']} requests already archived, "
             f"{counts['skipped_task_hosts']} repeat assets on the demo tasks' hosts left out)")
    return counts


__all__ = ["NEW_HOSTS", "add_records", "page_urls", "record_pages", "record_persona_sites"]
