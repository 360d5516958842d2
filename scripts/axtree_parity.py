"""How far the default observation's tree is from Chromium's own, on an archive's pages.

For a sample of the archive's HTML pages (up to ``--per-host`` of each host, spread over its
pages), replayed in the headless shell through the replay server: BrowserGym's observation of the
page (Chromium's accessibility tree, ``Accessibility.getFullAXTree``, read with BrowserGym's marks
on the page's elements, as ``BrowserEnv`` reads it, flattened by BrowserGym) against our browser
backend's ``axtree_text`` (``simulator/axtree.py``), ids and Chromium's InlineTextBox lines left out. Prints
each page's count of differing lines, then the differing lines by kind (names and values masked),
most frequent first; ``--show URL`` prints one page's diff whole.

    .venv/bin/python scripts/axtree_parity.py webfreeze/demo/data/demo.wfz
    .venv/bin/python scripts/axtree_parity.py ARCHIVE --show http://scholar.test/abs/2402.00911

A developer's measurement (it needs the test extras: browsergym-core): nothing runs it in
``make test``. The observation with ``observation="browsergym"`` takes Chromium's tree itself and
is held to BrowserGym's ``BrowserEnv`` by tests/simulator/test_browsergym_obs.py.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import re
import sys


def unnumbered(text: str) -> list[str]:
    return [line for line in re.sub(r"\[[^\]]*\] ", "", text).splitlines() if "InlineTextBox" not in line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive")
    parser.add_argument("--per-host", type=int, default=3, help="pages per host (default 3)")
    parser.add_argument("--show", help="print this page's whole diff")
    args = parser.parse_args(argv)

    from browsergym.utils.obs import flatten_axtree_to_str
    from playwright.sync_api import sync_playwright

    from webfreeze.archives import Archive
    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.axtree import MARK_JS, build_tree, marked
    from webfreeze.simulator.bgym_obs import ARIA_MARK_JS, _unmark
    from webfreeze.simulator.browser import launch_chromium, new_context

    if args.show:
        picked = [args.show]
    else:
        by_host: dict[str, list[str]] = {}
        with Archive.open(args.archive) as archive:
            for r in archive.exchanges():
                if r.mime and "html" in r.mime and r.status == 200:
                    by_host.setdefault(r.url.split("/")[2], []).append(r.url)
        picked = []
        for urls in (by_host[h] for h in sorted(by_host)):
            step = max(1, len(urls) // args.per_host)
            picked += urls[::step][:args.per_host]
    kinds: collections.Counter = collections.Counter()
    differing = total = 0
    server = ReplayServer(args.archive, mode="proxy", inject=True, timers=False, seed=0).start()
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p, shell=True, proxy=server.url)
            context = new_context(browser)
            page = context.new_page()
            for url in picked:
                page.goto(url)
                page.wait_for_load_state("networkidle")  # (what a page's scripts load after it)
                m = marked(page.evaluate(MARK_JS))
                page.evaluate(ARIA_MARK_JS, True)
                tree = context.new_cdp_session(page).send("Accessibility.getFullAXTree")
                page.evaluate(ARIA_MARK_JS, False)
                for node in tree["nodes"]:
                    _unmark(node)
                chromium = unnumbered(flatten_axtree_to_str(tree))
                ours = unnumbered(build_tree(m["html"], page.url, m["geometry"]).axtree_text)
                diff = list(difflib.unified_diff(ours, chromium, "ours", "chromium", lineterm="", n=0 if not args.show else 2))
                changed = [d for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---")]
                total += len(chromium)
                differing += len(changed)
                print(f"{url}: {len(chromium)} lines in Chromium's tree, {len(changed)} differ")
                if args.show:
                    print("\n".join(diff))
                for line in changed:
                    kinds[line[0] + " " + re.sub(r"'[^']*'", "'…'", line[1:].strip())[:80]] += 1
            browser.close()
    finally:
        server.stop()
    print(f"\n{len(picked)} pages, {total} lines in Chromium's trees, {differing} lines differ "
          "(- ours only, + Chromium's only):")
    for kind, n in kinds.most_common(40):
        print(f"{n:6d}  {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
