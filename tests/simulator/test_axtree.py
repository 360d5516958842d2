"""The observation tree: roles, names, properties, hiding, form requests, and agreement with Chromium."""

from __future__ import annotations

import email.parser
import email.policy
import http.server
import re
import threading
from urllib.parse import parse_qsl, urlsplit

import pytest

from webfreeze.simulator.axtree import MARK_JS, AXTreeError, build_tree, css_escape
from webfreeze.simulator.axtree import marked as read_marked
from webfreeze.simulator.forms import form_submission, is_submitter

BASE = "http://site.test/dir/page.html"


def tree_of(body: str, head: str = "<title>T</title>", **kw):
    return build_tree(f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>", BASE, **kw)


def lines(body: str, **kw) -> list[str]:
    return [line.strip() for line in tree_of(body, **kw).axtree_text.splitlines()]


# (HTML fragment, a line the flattened tree must hold, stripped of indentation, with bids removed)
ROLE_NAME_CASES = [
    ('<a href="/x">Next page</a>', "link 'Next page', url='http://site.test/x'"),
    ('<a href="rel?q=1">Rel</a>', "link 'Rel', url='http://site.test/dir/rel?q=1'"),
    ('<a name="anchor">No href</a>', "StaticText 'No href'"),
    ('<a href="/x" aria-label="Go on">&rarr;</a>', "link 'Go on', url='http://site.test/x'"),
    ('<a href="/x"><img src="i.png" alt="Logo"></a>', "link 'Logo', url='http://site.test/x'"),
    ('<a href="/x" title="Tip"></a>', "link 'Tip', url='http://site.test/x'"),
    ('<button>Save  \n changes</button>', "button 'Save changes'"),
    ('<button aria-labelledby="l1 l2">x</button><span id="l1">Buy</span><span id="l2">now</span>', "button 'Buy now'"),
    ('<input type="submit">', "button 'Submit'"),
    ('<input type="submit" value="Go">', "button 'Go'"),
    ('<input type="reset">', "button 'Reset'"),
    ('<input type="image" alt="Send" src="s.png">', "button 'Send'"),
    ('<input type="button" value="Press">', "button 'Press'"),
    ('<label for="e">Email</label><input id="e" type="email">', "textbox 'Email'"),
    ('<label>Name <input name="n"></label>', "textbox 'Name'"),
    ('<input placeholder="Search...">', "textbox 'Search...'"),
    ('<input title="Tooltip">', "textbox 'Tooltip'"),
    ('<input aria-label="Query" value="cats">', "textbox 'Query' value='cats'"),
    ('<input type="search" aria-label="Find">', "searchbox 'Find'"),
    ('<input type="number" aria-label="Qty" min="1" max="9" value="2">', "spinbutton 'Qty' value=2, valuemin=1, valuemax=9, valuetext='2'"),
    ('<input type="range" aria-label="Vol">',
     "slider 'Vol' value=50, orientation='horizontal', valuemin=0, valuemax=100, valuetext='50'"),
    ('<input aria-label="R" required>', "textbox 'R', required"),
    ('<input aria-label="D" disabled>', "textbox 'D', disabled=True"),
    ('<textarea aria-label="Msg">\nline one</textarea>', "textbox 'Msg' value='line one'"),
    ('<input type="checkbox" aria-label="Agree">', "checkbox 'Agree', checked='false'"),
    ('<input type="checkbox" aria-label="Agree" checked>', "checkbox 'Agree', checked='true'"),
    ('<input type="radio" name="r" aria-label="A" checked><input type="radio" name="r" aria-label="B" checked>',
     "radio 'B', checked='true'"),
    ('<input type="radio" name="r" aria-label="A" checked><input type="radio" name="r" aria-label="B" checked>',
     "radio 'A', checked='false'"),
    ('<select aria-label="Sort"><option>New</option><option>Old</option></select>',
     "combobox 'Sort' value='New', hasPopup='menu', expanded=False"),
    ('<select aria-label="Sort"><option>New</option><option>Old</option></select>', "option 'New', selected=True"),
    ('<select aria-label="Sort"><option disabled>-</option><option>Old</option></select>',
     "combobox 'Sort' value='Old', hasPopup='menu', expanded=False"),
    ('<select aria-label="M" multiple><option selected>a</option></select>', "listbox 'M', multiselectable=True, orientation='vertical'"),
    ('<select aria-label="G"><optgroup label="Grp"><option>x</option></optgroup></select>', "group 'Grp'"),
    ('<select aria-label="G"><option>x</option></select>', "MenuListPopup ''"),
    ('<input list="dl" aria-label="City"><datalist id="dl"><option>Paris</option></datalist>',
     "combobox 'City', autocomplete='list', hasPopup='listbox'"),
    ("<h1>Title</h1>", "heading 'Title'"),
    ("<h3>Sub <small>title</small></h3>", "heading 'Sub title'"),
    ('<div role="heading" aria-level="2">Fake</div>', "heading 'Fake'"),
    ('<img src="x.png" alt="A cat">', "image 'A cat', url='http://site.test/dir/x.png'"),
    ('<img src="x.png" title="T only">', "image 'T only', url='http://site.test/dir/x.png'"),
    ('<img src="x.png" alt="">', "image '', url='http://site.test/dir/x.png'"),
    ("<nav>n</nav>", "navigation ''"),
    ('<nav aria-label="Pages">n</nav>', "navigation 'Pages'"),
    ("<main>m</main>", "main ''"),
    ("<aside>a</aside>", "complementary ''"),
    ("<header>h</header>", "banner ''"),
    ("<footer>f</footer>", "contentinfo ''"),
    ("<article><header>h</header></article>", "article ''"),
    ("<section>s</section>", "StaticText 's'"),
    ('<section aria-label="Results">s</section>', "region 'Results'"),
    ("<form>f</form>", "form ''"),
    ("<ul><li>One</li></ul>", "list ''"),
    ("<ul><li>One</li></ul>", "listitem ''"),
    ("<ol><li>One</li></ol>", "StaticText 'One'"),
    ("<dl><dt>Term</dt><dd>Def</dd></dl>", "term 'Term'"),
    ("<table><tr><th>H</th></tr><tr><td>C</td></tr></table>", "columnheader 'H'"),
    ("<table><tr><th scope=row>H</th><td>C</td></tr></table>", "rowheader 'H'"),
    ("<table><tr><th>H</th><th>I</th></tr><tr><td>C1</td><td>C2</td></tr></table>", "row ''"),
    ("<table><tr><th>H</th><td>C</td></tr></table>", "rowheader 'H'"),
    ("<ul><li>One</li></ul>", "ListMarker '\u2022'"),
    ("<ol start=3><li>One</li></ol>", "ListMarker '3.'"),
    ('<input aria-label="Q" value="cats">', "StaticText 'cats'"),
    ("<dl><dt>Term</dt><dd>Def</dd></dl>", "DescriptionList ''"),
    ("<table><caption>Cap</caption><tr><td>C</td></tr></table>", "table 'Cap'"),
    ("<table><thead><tr><th>H</th></tr></thead></table>", "rowgroup ''"),
    ("<p>Para</p>", "paragraph ''"),
    ("<p>Para</p>", "StaticText 'Para'"),
    ("<hr>", "separator '', orientation='horizontal'"),
    ("<strong>S</strong>", "strong ''"),
    ("<fieldset><legend>Who</legend><input aria-label='x'></fieldset>", "group 'Who'"),
    ("<figure><img src=a alt=''><figcaption>Fig 1</figcaption></figure>", "figure ''"),
    ("<details><summary>More</summary>hidden body</details>", "DisclosureTriangle 'More', expanded=False"),
    ("<details open><summary>More</summary>shown body</details>", "StaticText 'shown body'"),
    ('<div role="button" tabindex="0">Fake btn</div>', "button 'Fake btn'"),
    ('<div role="checkbox" aria-checked="mixed">Some</div>', "checkbox 'Some', checked='mixed'"),
    ('<button aria-expanded="true" aria-haspopup="true">Menu</button>', "button 'Menu', hasPopup='menu', expanded=True"),
    ('<button aria-pressed="true">Bold</button>', "button 'Bold', pressed='true'"),
    ('<div role="tab" aria-selected="true">Tab 1</div>', "tab 'Tab 1', selected=True"),
    ("<div>It's \"quoted\"</div>", "StaticText 'It\\'s \"quoted\"'"),
    ("<div>It's here</div>", "StaticText \"It's here\""),
    ("<pre>a\n  b</pre>", "StaticText 'a\\n  b'"),
    ("<div>caf&eacute; &amp; cr&egrave;me</div>", "StaticText 'café & crème'"),
]


@pytest.mark.parametrize("html,expected", ROLE_NAME_CASES, ids=[c[0][:50] for c in ROLE_NAME_CASES])
def test_roles_names_and_properties(html, expected):
    got = [line.split("] ", 1)[1] if line.startswith("[") else line for line in lines(html)]
    assert expected in got, "\n".join(got)


HIDDEN_CASES = [
    '<div hidden>SECRET</div>',
    '<div aria-hidden="true"><a href="/">SECRET</a></div>',
    '<div style="display:none">SECRET</div>',
    '<div style="color: red; display : none">SECRET</div>'.replace(" : ", ":"),
    '<div style="visibility: hidden">SECRET</div>',
    '<input type="hidden" name="SECRET" value="SECRET">',
    '<details><summary>S</summary><p>SECRET</p></details>',
    '<dialog>SECRET</dialog>',
    '<script>document.write("SECRET")</script>',
    '<noscript>SECRET</noscript>',
    '<noframes><p>SECRET</p></noframes>',
    '<noembed>SECRET</noembed>',
    '<template><p>SECRET</p></template>',
    '<style>.SECRET{}</style>',
    '<div data-wf-hidden>SECRET</div>',
]


@pytest.mark.parametrize("html", HIDDEN_CASES)
def test_hidden_content_is_left_out(html):
    tree = tree_of("<p>Visible</p>" + html)
    assert "SECRET" not in tree.axtree_text
    assert "Visible" in tree.axtree_text
    assert all("SECRET" not in (e["name"] or "") for e in tree.descriptions)


def test_flattened_format():
    html = """<!DOCTYPE html><html><head><title>Page  one</title></head><body>
    <div><div><a href="/a">Alpha</a></div></div>
    <a href="/b"><span>Beta</span></a>
    <p>Text <b>bold</b> tail</p></body></html>"""
    text = build_tree(html, "http://s.test/").axtree_text
    assert text.splitlines() == [
        "RootWebArea 'Page one', focused, url='http://s.test/'",
        "\t[5] link 'Alpha', url='http://s.test/a'",  # generic divs skipped, the child moves up
        "\t[6] link 'Beta', url='http://s.test/b'",
        "\t\tStaticText 'Beta'",  # behind an ignored span the text is not seen as redundant (as in Chromium)
        "\t[8] paragraph ''",
        "\t\tStaticText 'Text'",
        "\t\tStaticText 'bold'",
        "\t\tStaticText 'tail'",
    ]


def test_bids_in_document_order_skip_head_and_scripts():
    html = "<html><head><title>x</title><meta charset=utf-8></head><body><script>x</script><p id=a>1</p><p id=b>2</p></body></html>"
    tree = build_tree(html, BASE)
    # html=1, body=2 (head, script skipped), then the paragraphs
    assert tree.get("3")["css"] == "#a" and tree.get("4")["css"] == "#b"


def test_stamped_bids_are_used_as_given():
    html = '<html data-wf-bid="1"><body data-wf-bid="2"><a data-wf-bid="77" href="/x">X</a></body></html>'
    tree = build_tree(html, BASE)
    assert "[77] link 'X'" in tree.axtree_text
    assert tree["77"]["href"] == "http://site.test/x"


def test_deterministic_and_encoding_independent():
    html = open(__file__, encoding="utf-8").read()  # any text: a big page of odd HTML
    page = f"<html><head><meta charset='utf-8'><title>ö</title></head><body><pre>{html[:5000]}</pre><p>naïve</p></body></html>"
    a = build_tree(page, BASE)
    b = build_tree(page.encode("utf-8"), BASE)
    c = build_tree(page.replace("utf-8", "latin-1").encode("latin-1", "replace"), BASE)
    assert a.axtree_text == b.axtree_text
    assert "naïve" in c.axtree_text and c.title == "ö"
    assert build_tree(page, BASE).axtree_text == a.axtree_text
    assert build_tree(page, BASE).descriptions == a.descriptions


def test_garbage_and_empty_input_give_a_tree():
    for junk in ["", "   ", "<<<>>>", b"\x00\xff\xfe garbage", "<?xml version='1.0' encoding='utf-8'?><html><body>x</body></html>",
                 "<p>unclosed <b>tags <i>everywhere", "<ol start=nan><li>a</ol><ol start=inf><li value=1_0>b</ol>",
                 "<input type=range min=nan value=nan step=1e-320><input type=number value=inf>"]:
        tree = build_tree(junk, BASE)
        assert tree.axtree_text.startswith("RootWebArea ")


def test_elements_carry_paths_and_lookup():
    tree = tree_of('<div id="main"><ul><li><a href="/1">One</a></li><li><a href="/2">Two</a></li></ul></div>'
                   '<div><span>x</span></div>')
    two = next(e for e in tree.descriptions if e["name"] == "Two")
    assert two["role"] == "link" and two["tag"] == "a" and two["clickable"] and two["bbox"] is None
    assert two["css"] == "#main > ul:nth-of-type(1) > li:nth-of-type(2) > a:nth-of-type(1)"
    assert two["xpath"] == "/html/body/div[1]/ul/li[2]/a"
    assert tree[two["bid"]] is two and two["bid"] in tree
    with pytest.raises(AXTreeError, match="no element with bid 999"):
        tree["999"]
    assert tree.get("999") is None


def test_css_escape():
    assert css_escape("main") == "main"
    assert css_escape("1a") == "\\31 a"
    assert css_escape("-1") == "-\\31 "
    assert css_escape("-") == "\\-"
    assert css_escape("a.b:c") == "a\\.b\\:c"
    assert css_escape("é") == "é"


def test_geometry_gives_bbox_visibility_and_filters():
    html = '<html><body><a href="/a">A</a><a href="/b">B</a></body></html>'
    tree = build_tree(html, BASE, geometry={"3": [10, 20, 30, 40, 1], "4": [0, 2000, 30, 40, 0]})
    assert tree["3"]["bbox"] == [10, 20, 30, 40] and tree["3"]["visible"] is True
    assert tree["4"]["visible"] is False
    text = tree.text(with_visible=True, with_clickable=True, with_bbox=True)
    assert "[3] link 'A', box='(10,20,40,60)', clickable, visible, url='http://site.test/a'" in text
    assert "[4] link 'B'" in tree.text(filter_visible_only=False)
    assert "[4] link 'B'" not in tree.text(filter_visible_only=True)


def test_ignored_properties_can_be_shown():
    tree = tree_of("<h2>Level two</h2>")
    assert "heading 'Level two'" in tree.axtree_text and "level" not in tree.axtree_text
    assert "heading 'Level two', level=2" in tree.text(ignored_properties=())


def test_state_and_focus():
    body = ('<form><input name="q" aria-label="Q" value="old"><select name="s" aria-label="S"><option value="1">One</option>'
            '<option value="2">Two</option></select><input type="radio" name="r" value="a" aria-label="A" checked>'
            '<input type="radio" name="r" value="b" aria-label="B"><input type="checkbox" aria-label="C" checked></form>')
    t0 = tree_of(body)
    bid = {e["name"]: e["bid"] for e in t0.descriptions if e["name"]}
    t1 = tree_of(body, state={bid["Q"]: "new text", bid["S"]: "Two", bid["B"]: True, bid["C"]: False},
                 focused=bid["Q"])
    assert "textbox 'Q' value='old'" in t0.axtree_text and "RootWebArea 'T', focused" in t0.axtree_text
    assert f"[{bid['Q']}] textbox 'Q', focused value='new text'" not in t1.axtree_text
    assert f"[{bid['Q']}] textbox 'Q' value='new text', focused" in t1.axtree_text
    assert "RootWebArea 'T', focused, url=" in t1.axtree_text  # (the page has focus: Chromium's tree says so)
    assert "combobox 'S' value='Two'" in t1.axtree_text
    assert "radio 'A', checked='false'" in t1.axtree_text and "radio 'B', checked='true'" in t1.axtree_text
    assert "checkbox 'C', checked='false'" in t1.axtree_text
    assert tree_of('<input aria-label="F" autofocus>').axtree_text.count("focused") == 2  # (the page's and the field's)
    assert "textbox 'F', focused" in tree_of('<input aria-label="F" autofocus>').axtree_text


def test_link_target():
    tree = build_tree('<html><head><base href="http://other.test/base/"></head><body>'
                      '<a href="p?x=1#f"><span>inner</span></a><a href="javascript:void(0)">js</a><p>plain</p>'
                      '<a href="//cdn.test/x">proto</a></body></html>', BASE)
    by_tag = [e for e in tree.descriptions]
    link, span, js, p, proto = by_tag[0], by_tag[1], by_tag[2], by_tag[3], by_tag[4]
    assert tree.link_target(link["bid"]) == "http://other.test/base/p?x=1#f"
    assert tree.link_target(span["bid"]) == "http://other.test/base/p?x=1#f"  # inside the link
    assert tree.link_target(js["bid"]) is None
    assert tree.link_target(p["bid"]) is None
    assert tree.link_target(proto["bid"]) == "http://cdn.test/x"


FORM = """<form id="f" action="/submit" method="{method}" enctype="{enctype}">
<input name="q" aria-label="Query" value="default text">
<input name="empty" aria-label="Empty">
<input type="hidden" name="token" value="t&1">
<input type="checkbox" name="new" aria-label="New only" checked>
<input type="checkbox" name="old" value="yes" aria-label="Old too">
<input type="radio" name="order" value="asc" aria-label="Asc" checked>
<input type="radio" name="order" value="desc" aria-label="Desc">
<select name="cat" aria-label="Category"><option value="">Any</option><option value="cs.AI">AI</option>
<option value="cs.CL" disabled>CL</option></select>
<select name="tags" multiple aria-label="Tags"><option selected>a</option><option>b</option><option selected>c</option></select>
<textarea name="note" aria-label="Note">line1
line2</textarea>
<input name="off" aria-label="Off" value="x" disabled>
<fieldset disabled><input name="fs" aria-label="In fieldset" value="x"></fieldset>
<input type="file" name="upload" aria-label="File">
<input type="submit" name="go" value="Search" aria-label="Go">
<button name="alt" value="2" formaction="/other" formmethod="post">Other</button>
<button type="button" name="nope">Nope</button>
</form>
<input form="f" name="outside" value="o" aria-label="Outside">
<input name="unrelated" value="u" aria-label="Unrelated">"""


def form_tree(method="get", enctype="application/x-www-form-urlencoded"):
    tree = tree_of(FORM.format(method=method, enctype=enctype))
    return tree, {e["name"]: e["bid"] for e in tree.descriptions if e["name"]}


def test_get_form_submission():
    tree, bid = form_tree()
    method, url, body, ctype = form_submission(tree, bid["Go"])
    assert (method, body, ctype) == ("GET", b"", None)
    parts = urlsplit(url)
    assert parts.scheme + "://" + parts.netloc + parts.path == "http://site.test/submit"
    assert parse_qsl(parts.query, keep_blank_values=True) == [
        ("q", "default text"), ("empty", ""), ("token", "t&1"), ("new", "on"), ("order", "asc"), ("cat", ""),
        ("tags", "a"), ("tags", "c"), ("note", "line1\r\nline2"), ("upload", ""), ("go", "Search"), ("outside", "o")]
    assert "q=default+text" in parts.query and "token=t%261" in parts.query


def test_filled_values_and_implicit_submission():
    tree, bid = form_tree()
    filled = {bid["Query"]: "quantum  error*~", bid["Old too"]: True, bid["New only"]: False, bid["Desc"]: True,
              bid["Category"]: "AI", bid["Tags"]: ["b"], bid["Note"]: "x\ny"}
    method, url, body, _ = form_submission(tree, bid["Query"], filled)  # Enter in the text field
    query = urlsplit(url).query
    assert query.startswith("q=quantum++error*%7E&empty=&token=t%261&old=yes&order=desc&cat=cs.AI&tags=b&note=x%0D%0Ay")
    assert "go=Search" in query  # the default button is the submitter
    # the tree itself is unchanged: filled values are per call
    assert form_submission(tree, bid["Go"])[1] != url


def test_submitter_overrides_and_post_bodies():
    tree, bid = form_tree(method="post")
    method, url, body, ctype = form_submission(tree, bid["Go"])
    assert (method, url, ctype) == ("POST", "http://site.test/submit", "application/x-www-form-urlencoded")
    assert body.startswith(b"q=default+text&empty=&token=t%261&new=on&order=asc&cat=&tags=a&tags=c&note=line1%0D%0Aline2")
    method, url, body, _ = form_submission(tree, bid["Other"])
    assert (method, url) == ("POST", "http://site.test/other")
    assert b"alt=2" in body and b"go=" not in body


def test_multipart_and_text_plain_bodies():
    tree, bid = form_tree(method="post", enctype="multipart/form-data")
    method, url, body, ctype = form_submission(tree, bid["Go"], {bid["Query"]: 'say "hi"'})
    assert ctype.startswith("multipart/form-data; boundary=")
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    fields = [(p.get_param("name", header="content-disposition"), p.get_content()) for p in msg.iter_parts()]
    assert fields[0] == ("q", 'say "hi"')
    assert ("upload", b"") in [(n, v if isinstance(v, bytes) else v) for n, v in fields] or ("upload", "") in fields
    assert form_submission(tree, bid["Go"], {bid["Query"]: 'say "hi"'}) == (method, url, body, ctype)  # deterministic
    tree, bid = form_tree(method="post", enctype="text/plain")
    assert form_submission(tree, bid["Go"])[2].startswith(b"q=default text\r\nempty=\r\ntoken=t&1\r\n")


def test_form_errors():
    tree, bid = form_tree()
    with pytest.raises(AXTreeError, match="not in a form"):
        form_submission(tree, bid["Unrelated"])
    with pytest.raises(AXTreeError, match="disabled"):
        form_submission(tree, bid["Off"])
    with pytest.raises(AXTreeError, match="no element with bid"):
        form_submission(tree, "4242")
    assert is_submitter(tree, bid["Go"]) and not is_submitter(tree, bid["Nope"]) and not is_submitter(tree, bid["Query"])


def test_get_form_without_submit_button_and_empty_action():
    tree = tree_of('<form><input name="q" aria-label="Q" value="a b"><input type="checkbox" name="c" aria-label="C"></form>')
    bid = tree.descriptions[1]["bid"]
    assert form_submission(tree, bid)[1] == "http://site.test/dir/page.html?q=a+b"
    # two text fields and no button: Enter submits nothing (HTML's implicit submission rule)
    tree = tree_of('<form><input name="a" aria-label="A"><input name="b" aria-label="B"></form>')
    with pytest.raises(AXTreeError, match="Enter does not submit"):
        form_submission(tree, tree.descriptions[1]["bid"])


# ---------------------------------------------------------------------------------- real Chromium
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Server page &amp; more</title>
<style>body { font-family: sans-serif; } .pad { padding: 12px; }</style></head>
<body>
<header><nav aria-label="Main"><a href="/">Home</a> | <a href="/help">Help</a> | <a href="/about"><span>About</span> us</a></nav></header>
<main id="content">
<h1>Listing for <em>cs.AI</em></h1>
<p class="pad">Showing 3 of 3 entries. See the <a href="/policy?x=1&amp;y=2">policy</a>.</p>
<form action="/search" method="get" role="search">
  <label for="q">Search</label> <input id="q" name="query" placeholder="Search..." value="llm">
  <select name="searchtype" aria-label="Field"><option value="all">All fields</option><option value="title" selected>Title</option></select>
  <label><input type="checkbox" name="new" checked> New only</label>
  <input type="radio" name="o" value="a" aria-label="Ascending" checked><input type="radio" name="o" value="d" aria-label="Descending">
  <textarea name="note" aria-label="Note">first line
second line</textarea>
  <button type="submit" name="go" value="1">Search</button>
</form>
<table><tr><th>Id</th><th>Title</th></tr>
<tr><td>2401.00001</td><td><a href="/abs/2401.00001">Attention, again</a></td></tr>
<tr><td>2401.00002</td><td><a href="/abs/2401.00002">It's "quoted"</a></td></tr></table>
<ul><li>One <b>bold</b> item</li><li><img src="/fig.png" alt="Figure 1" width="40" height="20"></li></ul>
<dl><dt>Comments</dt><dd>12 pages</dd></dl>
<details><summary>More</summary><p>Hidden until opened</p></details>
<div hidden>Never shown</div><div style="display:none">Inline hidden</div>
<p>A <code>snippet</code> and <strong>strong</strong> text.</p>
<section aria-label="Footer links"><a href="/a#frag">Fragment</a></section>
<hr>
<pre>pre  formatted
  text</pre>
</main>
<footer><p>&copy; 2026 Scholar</p></footer>
</body></html>
"""

FORM_PAGE = """<!DOCTYPE html><html><head><title>Forms</title></head><body>
<form id="f" action="/echo" method="{method}" enctype="{enctype}">
<input name="q" aria-label="Query" value="default"><input type="hidden" name="tok" value="a&b c">
<input type="checkbox" name="c1" aria-label="C1" checked><input type="checkbox" name="c2" value="yes" aria-label="C2">
<input type="radio" name="r" value="x" aria-label="RX" checked><input type="radio" name="r" value="y" aria-label="RY">
<select name="s" aria-label="S"><option value="">Any</option><option value="v2">Two</option></select>
<select name="m" multiple aria-label="M"><option selected>a</option><option>b</option><option selected>c</option></select>
<textarea name="t" aria-label="T">l1
l2</textarea>
<input name="dis" aria-label="Dis" value="z" disabled>
<input type="submit" name="go" aria-label="Go">
<button name="b2" value="two" aria-label="B2">Two</button>
</form><input form="f" name="outside" value="o" aria-label="Outside"></body></html>"""

# Table parts outside any table, as Roundup's templates write them (<main><td class="content">): the
# browser's HTML5 parser drops those tags and keeps their content; libxml2 made elements of them.
STRAY_PAGE = """<!DOCTYPE html><html><head><title>Stray</title></head><body>
<main>Lead <td class="content"><div><form action="/echo"><table class="form">
<tr><th>Priority</th><td><select name="priority"><option>bug</option><option>wish</option></select></td></tr>
</table><input type="submit" value="Go"></form></div> trail</td> after
<tr><th>Loose</th><td><a href="/x">loose link</a></td></tr><caption>cap</caption><col>
</main><template><td>kept in the template</td></template></body></html>"""

# Roundup's help pages: a frameset, then a noframes text that a browser (which shows frames) never
# renders; and noframes/noembed in a body, hidden by the browser's own style sheet as well.
NOFRAMES_PAGES = {
    "/frameset": """<!DOCTYPE html><html><head><title>Help</title></head>
<frameset rows="123,*"><frame src="/echo" name="search"><frame src="/echo" name="list"></frameset>
<noframes><body><p>Your browser is not capable of using frames.</p></body></noframes></html>""",
    "/noframes": """<!DOCTYPE html><html><head><title>Body</title></head><body><p>Before</p>
<noframes><p>Your browser is not capable of using frames.</p></noframes><noembed>No plug-in.</noembed>
<p>After</p></body></html>""",
}


# a canvas's fallback content: glide-data-grid (Streamlit's st.dataframe) draws its cells on the
# canvas and keeps a table of them inside it, which Chromium's accessibility tree shows
CANVAS_PAGE = """<!DOCTYPE html><html><head><title>Grid</title></head><body><p>Before</p>
<canvas width="300" height="100"><table role="grid"><tr role="row"><td role="gridcell">Mercury</td>
<td role="gridcell">95</td></tr></table><p style="display:none">GONE</p><p style="visibility:hidden">AWAY</p>
</canvas><p>After</p></body></html>"""


class _Handler(http.server.BaseHTTPRequestHandler):
    pages: dict = {}
    seen: list = []

    def _respond(self, body: bytes, ctype="text/html; charset=utf-8"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urlsplit(self.path).path
        if path == "/echo":
            self.seen.append(("GET", self.path, b"", None))
            return self._respond(b"<html><body>ok</body></html>")
        if path == "/fig.png":
            return self._respond(b"", "image/png")
        self._respond(self.pages.get(path, "<html><body>nothing</body></html>").encode("utf-8"))

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append(("POST", self.path, self.rfile.read(length), self.headers.get("Content-Type")))
        self._respond(b"<html><body>ok</body></html>")

    def log_message(self, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the browser dropping a connection (a cancelled image load) is not a test failure


@pytest.fixture(scope="module")
def server():
    srv = _QuietServer(("127.0.0.1", 0), _Handler)
    _Handler.pages = {"/page": PAGE, "/stray": STRAY_PAGE, "/canvas": CANVAS_PAGE, **NOFRAMES_PAGES}
    for method in ("get", "post"):
        for enc in ("application/x-www-form-urlencoded", "multipart/form-data"):
            _Handler.pages[f"/form-{method}-{enc.split('/')[1]}"] = FORM_PAGE.format(method=method, enctype=enc)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    from webfreeze.simulator.browser import BrowserUnavailable, launch_chromium
    try:
        with sync_api.sync_playwright() as p:
            b = launch_chromium(p)
            yield b
            b.close()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


def rendered_tree(page):
    marked = read_marked(page.evaluate(MARK_JS))
    return build_tree(marked["html"], page.url, marked["geometry"]), marked


def test_chromium_tree_matches_raw_html(server, browser):
    from webfreeze.simulator.browser import new_context
    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(server + "/page")
        live, marked = rendered_tree(page)
        raw = build_tree(PAGE, server + "/page")
        assert live.axtree_text == raw.axtree_text
        assert "[" in live.axtree_text and "Never shown" not in live.axtree_text
        assert [(e["bid"], e["role"], e["name"], e["css"], e["xpath"], e["href"]) for e in live.descriptions] == \
            [(e["bid"], e["role"], e["name"], e["css"], e["xpath"], e["href"]) for e in raw.descriptions]
        # bids and boxes line up with what Playwright itself finds
        checks = [("link", "Help"), ("textbox", "Search"), ("button", "Search"), ("image", "Figure 1"),
                  ("heading", "Listing for cs.AI"), ("link", "It's \"quoted\"")]
        for role, name in checks:
            el = next(e for e in live.descriptions if (e["role"], e["name"]) == (role, name))
            locator = page.locator(f'[data-wf-bid="{el["bid"]}"]')
            assert locator.count() == 1
            box = locator.bounding_box()
            assert box is not None and el["visible"] is True
            assert el["bbox"] == pytest.approx([box["x"], box["y"], box["width"], box["height"]], abs=0.01)
            pw_role = {"image": "img"}.get(role, role)
            assert page.get_by_role(pw_role, name=name, exact=True).first.get_attribute("data-wf-bid") == el["bid"]
        # the closed details' body is not rendered and not in the tree, in both backends
        assert "Hidden until opened" not in live.axtree_text
        # marking twice gives the same bytes (deterministic ids)
        assert rendered_tree(page)[0].axtree_text == live.axtree_text
        # live state: typing, choosing and focusing show up like the text backend's state does
        q = next(e for e in live.descriptions if e["role"] == "textbox" and e["name"] == "Search")
        sel = next(e for e in live.descriptions if e["role"] == "combobox")
        desc = next(e for e in live.descriptions if e["name"] == "Descending")
        page.locator(f'[data-wf-bid="{q["bid"]}"]').fill("new words")
        page.locator(f'[data-wf-bid="{sel["bid"]}"]').select_option("all")
        page.locator(f'[data-wf-bid="{desc["bid"]}"]').check()
        page.locator(f'[data-wf-bid="{q["bid"]}"]').focus()
        after, _ = rendered_tree(page)
        expected = build_tree(PAGE, server + "/page", state={q["bid"]: "new words", sel["bid"]: "all", desc["bid"]: True},
                              focused=q["bid"])
        assert after.axtree_text == expected.axtree_text
        assert "value='new words', focused" in after.axtree_text
    finally:
        context.close()


def test_table_parts_outside_a_table_are_dropped_as_chromium_drops_them(server, browser):
    """Roundup's pages open their content with a stray <td>: the text backend's paths (which the
    reference agent finds a nameless select by) must be the browser's."""
    from webfreeze.simulator.browser import new_context
    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(server + "/stray")
        live, _ = rendered_tree(page)
        raw = build_tree(STRAY_PAGE, server + "/stray")
        assert raw.axtree_text == live.axtree_text
        assert [(e["role"], e["name"], e["css"], e["xpath"]) for e in raw.descriptions] == \
            [(e["role"], e["name"], e["css"], e["xpath"]) for e in live.descriptions]
        (select,) = [e for e in raw.descriptions if e["role"] == "combobox"]
        assert select["css"].startswith("body:nth-of-type(1) > main:nth-of-type(1) > div:nth-of-type(1) > form")
        assert "Lead" in raw.axtree_text and "loose link" in raw.axtree_text and "after" in raw.axtree_text
    finally:
        context.close()


def test_a_canvas_s_fallback_content_is_shown_as_chromium_s_tree_shows_it(server, browser):
    """Streamlit's dataframe: the cells are drawn on a canvas, and the table inside it (no box of its
    own) is in Chromium's accessibility tree, so in the observation too (it used to be marked hidden:
    the agent saw no row of the table a person sees); its own display:none / visibility:hidden hide
    it still."""
    from webfreeze.simulator.browser import new_context
    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(server + "/canvas")
        live, _ = rendered_tree(page)
        cdp = context.new_cdp_session(page)
        chromium = [(n.get("role", {}).get("value"), n.get("name", {}).get("value"))
                    for n in cdp.send("Accessibility.getFullAXTree")["nodes"] if not n.get("ignored")]
        assert ("gridcell", "Mercury") in chromium and not any("GONE" in str(n) or "AWAY" in str(n) for n in chromium)
        assert "gridcell 'Mercury'" in live.axtree_text and "gridcell '95'" in live.axtree_text, live.axtree_text
        assert "GONE" not in live.axtree_text and "AWAY" not in live.axtree_text
        assert "After" in live.axtree_text
    finally:
        context.close()


@pytest.mark.parametrize("path", sorted(NOFRAMES_PAGES))
def test_noframes_and_noembed_are_hidden_as_chromium_hides_them(server, browser, path):
    from webfreeze.simulator.browser import new_context
    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(server + path)
        live, _ = rendered_tree(page)
        raw = build_tree(NOFRAMES_PAGES[path], server + path)
        assert raw.axtree_text == live.axtree_text
        assert [(e["role"], e["name"], e["css"]) for e in raw.descriptions] == \
            [(e["role"], e["name"], e["css"]) for e in live.descriptions]
        assert "capable" not in raw.axtree_text and "plug-in" not in raw.axtree_text
    finally:
        context.close()


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("enctype", ["x-www-form-urlencoded", "multipart/form-data"])
@pytest.mark.parametrize("submit_with", ["Go", "B2", "enter"])
def test_form_submission_matches_chromium(server, browser, method, enctype, submit_with):
    """The request built for the text backend is the one Chromium sends for the same form and input."""
    from webfreeze.simulator.browser import new_context
    path = f"/form-{method}-{enctype.split('/')[-1]}"
    context = new_context(browser)
    page = context.new_page()
    try:
        page.goto(server + path)
        tree, _ = rendered_tree(page)
        bid = {e["name"]: e["bid"] for e in tree.descriptions if e["name"]}
        filled = {bid["Query"]: "hello wörld & more", bid["C2"]: True, bid["RY"]: True, bid["S"]: "Two",
                  bid["M"]: ["b", "c"], bid["T"]: "x\ny"}
        page.locator(f'[data-wf-bid="{bid["Query"]}"]').fill("hello wörld & more")
        page.locator(f'[data-wf-bid="{bid["C2"]}"]').check()
        page.locator(f'[data-wf-bid="{bid["RY"]}"]').check()
        page.locator(f'[data-wf-bid="{bid["S"]}"]').select_option(label="Two")
        page.locator(f'[data-wf-bid="{bid["M"]}"]').select_option(["b", "c"])
        page.locator(f'[data-wf-bid="{bid["T"]}"]').fill("x\ny")
        _Handler.seen.clear()
        with page.expect_navigation():
            if submit_with == "enter":
                page.locator(f'[data-wf-bid="{bid["Query"]}"]').press("Enter")
            else:
                page.locator(f'[data-wf-bid="{bid[submit_with]}"]').click()
        target = bid["Query"] if submit_with == "enter" else bid[submit_with]
        want_method, want_url, want_body, want_ctype = form_submission(build_tree(
            FORM_PAGE.format(method=method, enctype=enctype if "/" in enctype else "application/" + enctype),
            server + path), target, filled)
        got_method, got_path, got_body, got_ctype = _Handler.seen[-1]
        assert got_method == want_method
        assert server + got_path == want_url
        if want_ctype and want_ctype.startswith("multipart/"):
            assert got_ctype.startswith("multipart/form-data; boundary=")
            assert _multipart_fields(got_body, got_ctype) == _multipart_fields(want_body, want_ctype)
        else:
            assert got_body == want_body
            assert (got_ctype or None) == want_ctype
    finally:
        context.close()


def _multipart_fields(body: bytes, ctype: str) -> list:
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    out = []
    for part in msg.iter_parts():
        payload = part.get_payload(decode=True)
        out.append((part.get_param("name", header="content-disposition"),
                    part.get_param("filename", header="content-disposition"), payload))
    return out


def test_paths_made_during_the_build_equal_the_per_element_functions():
    from webfreeze.simulator.axtree import css_path, xpath
    tree = build_tree(PAGE.replace('<main id="content">', "<main>") + FORM_PAGE, BASE)
    assert len(tree.descriptions) > 20
    for e in tree.descriptions:
        el = tree._b.by_bid[e["bid"]]
        assert e["css"] == css_path(el)
        assert e["xpath"] == xpath(el)


@pytest.mark.parametrize("html, role, url", [
    ('<a role="button">x</a>', "button", False), ("<a aria-expanded=false>x</a>", "generic", False),
    ('<a role="tab">x</a>', "tab", False), ("<a disabled>x</a>", "generic", False),
    ("<a aria-haspopup=true>x</a>", "generic", False), ("<a>x</a>", "generic", False),
    ('<a href="/y">x</a>', "link", True), ('<a href="/y" role="button">x</a>', "button", False),
    ('<a href="/y" id="k" class="c">x</a>', "link", True)])
def test_links_with_few_attributes(html, role, url):
    """The plain-link shortcut of the builder must take only an <a> whose one property is its href."""
    tree = build_tree(f"<body><p>{html}</p></body>", BASE)
    (el,) = [e for e in tree.descriptions if e["tag"] == "a"]
    assert el["role"] == role
    assert el["href"] == ("http://site.test/y" if 'href="/y"' in html else None)
    assert ("url='http://site.test/y'" in tree.axtree_text) == url


def test_a_password_is_bullets_in_the_tree_as_in_chromium_s(browser):
    """A password field's value is one bullet a character, as Chromium's accessibility tree (and
    so BrowserGym's observation) gives it: the password itself is in no observation, no
    trajectory's target and no prompt."""
    from webfreeze.simulator.browser import new_context

    html = '<label>Password <input type="password" value="hunter2"></label><label>Name <input value="Ann"></label>'
    tree = build_tree(html, "http://x.test/")
    assert "textbox 'Password' value='\u2022\u2022\u2022\u2022\u2022\u2022\u2022'" in tree.axtree_text
    assert "hunter2" not in tree.axtree_text and "textbox 'Name' value='Ann'" in tree.axtree_text
    assert "hunter2" not in repr(tree.descriptions)
    context = new_context(browser)
    try:
        page = context.new_page()
        page.set_content(html)
        nodes = context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
    finally:
        context.close()
    chromium = {n["name"]["value"]: n.get("value", {}).get("value") for n in nodes
                if n.get("role", {}).get("value") == "textbox"}
    assert chromium == {"Password": "\u2022" * 7, "Name": "Ann"}, chromium


def test_a_snapshot_s_shadow_root_controls_do_not_shift_the_page_s_own():
    """A crawl's DOM snapshot holds a web component's open shadow root as a ``<template
    shadowrootmode>``; its controls are not in the page's own HTML, so they must not count when
    the snapshot's disabled state is matched to the page's controls (by their order among controls
    of one tag, name and id): the field a script disabled at load stays left out, no other."""
    page = """<!doctype html><html><body><form action="/send"><x-stars></x-stars>
<input aria-label="A" name="v" value="a"><input aria-label="B" name="v" value="b">
<input type="submit" aria-label="Go" value="Go"></form></body></html>"""
    loaded = page.replace("<x-stars></x-stars>", '<x-stars><template shadowrootmode="open"><input name="v" value="*">'
                          "</template></x-stars>").replace('value="a"', 'value="a" disabled')
    tree = tree_of(page)
    bid = {e["name"]: e["bid"] for e in tree.descriptions if e["name"]}
    _, url, _, _ = form_submission(tree, bid["Go"], loaded_html=loaded)
    assert parse_qsl(urlsplit(url).query) == [("v", "b")]


def test_declarative_shadow_roots_follow_the_parsers_rules():
    """A page as served, read by the text backend: a ``<template shadowrootmode>`` is a shadow root
    only on an element that may host one (a custom element, ``div``, ``span``, ...; not ``a``), and
    only the host's first, its mode matched in any case but not trimmed; the default slot takes the
    host's text, whitespace too, so its fallback
    is not drawn then (as ``assignedNodes()`` has it); the browser's rules, whose tree the browser
    backend reads (tests/simulator/test_env_shadow_dom.py compares the two)."""
    tree = tree_of("""<x-a><template shadowrootmode="open"><p>root one</p><slot>fallback one</slot></template>
<template shadowrootmode="open"><p>second template</p></template></x-a>
<a href="/x"><template shadowrootmode="open"><p>not a host</p></template>link text</a>
<x-b><template shadowrootmode="open"><slot>fallback two</slot></template></x-b>
<x-c><template shadowrootmode=" open"><p>mode not trimmed</p></template></x-c>
<x-d><template shadowrootmode="OPEN"><p>mode in capitals</p></template></x-d>
<font-face><template shadowrootmode="open"><p>reserved name</p></template></font-face>
<fieldset disabled><x-e><template shadowrootmode="open"><input aria-label="Free" name="f"></template></x-e></fieldset>""")
    text = tree.text()
    assert "root one" in text and "link text" in text and "fallback two" in text, text
    assert "mode in capitals" in text, text
    free = next(line for line in text.splitlines() if "textbox 'Free'" in line)
    assert "disabled" not in free, free  # (a fieldset of the document does not disable a shadow root's field)
    for hidden in ("fallback one", "second template", "not a host", "mode not trimmed", "reserved name"):
        assert hidden not in text, (hidden, text)


def test_a_frames_fields_are_not_its_parents_form():
    """A button in a frame's document has no form there: the form around the frame element is its
    parent's (the browser submits nothing). The walk to a form stops at the frame's document."""
    from webfreeze.simulator.forms import form_of

    tree = build_tree('<html><body><form action="/outer"><input name="q" value="1"><iframe src="/f"></iframe>'
                      "</form></body></html>", "http://x.test/",
                      frames={"a": {"html": "<html><body><button>Go</button></body></html>", "url": "http://x.test/f"}})
    go = next(e["bid"] for e in tree.summaries() if e["name"] == "Go")
    assert go.startswith("a") and form_of(tree, go) is None


ROLE_WORDS = ["img", "IMG", "Button", "foo button", "foo  img", "widget", "landmark", "directory", "doc-toc",
              "graphics-symbol", "foo", "text", "image", "switch", "   tab   "]
ROLES_PAGE = ("<!doctype html><html><body><h1>Role words</h1>"
              + "".join(f'<div role="{w}" aria-label="R{i}">w{i}</div>' for i, w in enumerate(ROLE_WORDS))
              + '<p>Chart: <svg width="40" height="20"><title>Sparkline</title><path d="M0 0L40 20"/></svg></p>'
              + "</body></html>")


def test_role_attributes_give_the_roles_chromium_gives(browser):
    """The first word of a role attribute that is an ARIA role (in any case) is the role, under
    Chromium's name (``img`` is ``image``, ``directory`` a ``list``); an abstract role or an unknown
    word is skipped. Both backends and the recorder's namer agree with Chromium's own tree; and an
    SVG's ``<title>`` names the image, not the document (which has no title here)."""
    from webfreeze.recorder.accname import ROLE_NAME_JS
    from webfreeze.simulator.browser import new_context

    context = new_context(browser)
    page = context.new_page()
    try:
        page.set_content(ROLES_PAGE)
        nodes = context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
        chromium = {n["name"]["value"]: n["role"]["value"] for n in nodes
                    if re.fullmatch(r"R[0-9]+", str((n.get("name") or {}).get("value") or ""))}
        namer = page.evaluate("""(js) => { const f = eval(js)(); const out = {};
            for (const el of document.querySelectorAll('[aria-label]')) out[el.getAttribute('aria-label')] = f.role(el);
            return out; }""", ROLE_NAME_JS)
        live, _ = rendered_tree(page)
    finally:
        context.close()
    assert chromium["R0"] == "image" and chromium["R3"] == "button" and chromium["R5"] == "generic", chromium
    for tree in (live, build_tree(ROLES_PAGE, "http://roles.test/")):
        shown = {e["name"]: e["role"] for e in tree.descriptions}
        ours = {name: shown.get(name, "generic") for name in chromium}  # (a generic is not shown)
        assert len(chromium) == len(ROLE_WORDS) and ours == chromium, tree.axtree_text
        assert tree.axtree_text.startswith("RootWebArea '',") and "image 'Sparkline'" in tree.axtree_text
    assert {name: namer[name] for name in chromium} == chromium


def bgym_marked(page):
    """Put BrowserGym's marks on the page (after the observation's bids), as BrowserEnv reads
    Chromium's tree with them; returns a function that takes them off."""
    from webfreeze.simulator.bgym_obs import ARIA_MARK_JS

    page.evaluate(MARK_JS)
    page.evaluate(ARIA_MARK_JS, True)
    return lambda: page.evaluate(ARIA_MARK_JS, False)


def chromium_roles(context, page, selectors: list[str]) -> list[str]:
    """The role Chromium's own accessibility tree gives the first element of each selector (``none``
    where it leaves the element out of the tree), read as BrowserGym reads it: with its marks."""
    unmark = bgym_marked(page)
    cdp = context.new_cdp_session(page)
    root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    roles = []
    for selector in selectors:
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        assert node, selector
        ax = cdp.send("Accessibility.getPartialAXTree", {"nodeId": node, "fetchRelatives": False})["nodes"][0]
        roles.append("none" if ax.get("ignored") else ax["role"]["value"])
    unmark()
    return roles


PRESENTATION_CASES = [
    '<a href="/x" role="presentation">a link</a>', '<a role="none">no link</a>', '<button role="none">go</button>',
    '<button disabled role="none">off</button>', '<fieldset disabled><button role="none">off</button></fieldset>',
    '<h2 role="presentation">plain</h2>', '<h2 role="none" aria-describedby="d">described</h2>',
    '<h2 role="none" aria-current="page">current</h2>', '<h2 role="none" aria-label="">labelled</h2>',
    '<h2 role="none" aria-hidden="false">shown</h2>', '<h2 role="none" aria-disabled="true">disabled</h2>',
    '<h2 role="none" aria-haspopup="true">popup</h2>', '<h2 role="none" aria-invalid="true">invalid</h2>',
    '<div role="none" tabindex="-1">focusable</div>', '<span role="none" tabindex="x">not focusable</span>',
    '<h2 role="none" contenteditable>editable</h2>', '<div role="none" onclick="1">clicked</div>',
    '<details><summary role="none">more</summary>text</details>', '<summary role="none">loose</summary>',
    '<input role="none" value="kept">', '<input type="hidden" role="none" value="hidden">',
    '<fieldset disabled><legend><button role="none">in legend</button></legend></fieldset>',
    '<fieldset disabled><legend>a</legend><legend><button role="none">second legend</button></legend></fieldset>',
    '<span role="none" tabindex=" +1">signed</span>', '<button role="NONE">upper</button>',
    '<details open><summary>first</summary><summary role="none">second</summary></details>',
    '<h2 role="none" contenteditable=" true">spaced</h2>', '<h2 role="none" contenteditable="false">not editable</h2>',
    '<h2 role="none button">fallback</h2>', '<a href="/y" role="presentation" tabindex="-1">still a link</a>',
    '<x-item role="none">custom</x-item>', '<x-item role="none" tabindex="0">focusable custom</x-item>',
    '<x-item role="presentation" aria-label="L">labelled custom</x-item>',
]


def test_a_presentational_role_yields_where_chromium_makes_it_yield(browser):
    """A role of none or presentation is not taken by an element that can take focus or has a global
    ARIA attribute (WAI-ARIA 1.2's conflict resolution, with Chromium's list of global attributes):
    a link with role="presentation" stays a link the agent can click. BrowserGym's marks are global
    ARIA attributes on every element of a standard HTML tag, so in its observation only an element
    it does not mark (a custom element) takes the role. Each element's role, in both backends and
    the recorder's namer, is what Chromium's tree read with BrowserGym's marks gives it (its node
    ignored: none)."""
    from webfreeze.recorder.accname import ROLE_NAME_JS
    from webfreeze.simulator.browser import new_context

    html = ("<!doctype html><html><head><title>P</title></head><body>"
            + "".join(f'<div id="c{i}">{c}</div>' for i, c in enumerate(PRESENTATION_CASES))
            + '<span id="d">about</span></body></html>')
    context = new_context(browser)
    page = context.new_page()
    try:
        page.set_content(html)
        chromium = chromium_roles(context, page, [
            f"#c{i} [role]" if case.startswith(("<fieldset", "<details")) else f"#c{i} > *"
            for i, case in enumerate(PRESENTATION_CASES)])
        namer = page.evaluate("""(js) => { const f = eval(js)();
            return [...document.querySelectorAll('[id^=c] [role]')].map((el) => f.role(el)); }""", ROLE_NAME_JS)
        live, _ = rendered_tree(page)
    finally:
        context.close()
    assert chromium[0] == "link" and chromium[5] == "heading" and chromium[19] == "textbox", chromium
    assert chromium[-3:] == ["none", "generic", "generic"], chromium
    expected = chromium
    for tree in (live, build_tree(html, "http://roles.test/")):
        b = tree.builder
        ours = [b.role(el) for el in b.doc.iter() if isinstance(el.tag, str) and el.get("role") is not None]
        assert ours == expected, list(zip(PRESENTATION_CASES, ours, expected))
    assert namer == expected, list(zip(PRESENTATION_CASES, namer, expected))
    # the link with role="presentation" is an element the agent can act on: it has a bid
    assert any(e["role"] == "link" and e["name"] == "a link" and e["bid"] for e in live.descriptions)


SVG_NAME_CASES = [
    '<a href="/a"><svg width="10" height="10"><title>Close</title><path d="M0 0L9 9"/></svg></a>',
    '<button><svg width="10" height="10" aria-label="Menu"><path d="M0 0L9 9"/></svg></button>',
    '<a href="/b"><svg width="10" height="10"><path d="M0 0L9 9"/></svg> Home</a>',
    '<a href="/c"><svg width="30" height="10"><g><text x="0" y="9">Go <tspan>on</tspan></text></g></svg></a>',
    '<button><svg width="10" height="10" role="img" aria-labelledby="l1"><path d="M0 0L9 9"/></svg></button>',
    '<a href="/d"><svg width="30" height="10"><desc>Long words</desc><text x="0" y="9">Next</text></svg></a>',
    '<a href="/e"><svg width="30" height="10"><text x="0" y="9" style="display:none">Gone</text></svg>Kept</a>',
]


def test_a_link_or_button_is_named_by_the_svg_it_holds_as_chromium_names_it(browser):
    """An icon link's name from its content takes an SVG's name (aria-labelledby, its ``<title>``) or
    else the text it draws (``<text>``, not ``<desc>`` nor hidden text), as Chromium's tree does
    (``link 'Close'``, where the link was nameless to the agent); both backends and the recorder's
    namer agree with Chromium."""
    from webfreeze.recorder.accname import ROLE_NAME_JS
    from webfreeze.simulator.browser import new_context

    html = ("<!doctype html><html><head><title>S</title></head><body>" + "".join(SVG_NAME_CASES)
            + '<span id="l1" hidden>Search</span></body></html>')
    context = new_context(browser)
    page = context.new_page()
    try:
        page.set_content(html)
        nodes = context.new_cdp_session(page).send("Accessibility.getFullAXTree")["nodes"]
        chromium = [(n["role"]["value"], n["name"]["value"].strip()) for n in nodes
                    if not n.get("ignored") and n["role"]["value"] in ("link", "button")]
        namer = page.evaluate("""(js) => { const f = eval(js)();
            return [...document.querySelectorAll('body > a, body > button')].map((el) => [f.role(el), f.name(el)]); }""",
                              ROLE_NAME_JS)
        live, _ = rendered_tree(page)
    finally:
        context.close()
    assert chromium[0] == ("link", "Close") and chromium[3] == ("link", "Go on"), chromium
    for tree in (live, build_tree(html, "http://svg.test/")):
        ours = [(e["role"], e["name"]) for e in tree.descriptions if e["role"] in ("link", "button")]
        assert ours == chromium, tree.axtree_text
    assert [tuple(x) for x in namer] == chromium


# aria-labelledby targets (and the element named by itself): each case's first element is the one named.
LABELLEDBY_CASES = [
    # react-aria's slider (Streamlit's): its own id first, then a group with an aria-label
    '<input type="range" id="s1" aria-label="Quantity" aria-labelledby="s1 g1" min="1" max="20" value="5">'
    '<div id="g1" role="group" aria-label="Quantity"><p>5</p><p>1</p><p>20</p></div>',
    '<button aria-labelledby="x2">b</button><span id="x2" aria-label="Label">Content</span>',
    '<button aria-labelledby="x3">b</button><div id="x3" aria-label="  ">Content</div>',
    '<button aria-labelledby="x4">b</button><input id="x4" value="typed">',
    '<input type="range" id="s5" aria-labelledby="s5 l5" min="0" max="9" value="3"><span id="l5">Level</span>',
    '<input type="text" id="s6" aria-label="Own" aria-labelledby="s6 l6" value="v"><span id="l6">Field</span>',
    '<button aria-labelledby="x7">b</button><div id="x7" aria-label="Outer">In <span aria-label="inner">x</span></div>',
    '<a href="#" aria-labelledby="x8">b</a><img id="x8" alt="Alt text" aria-label="Aria img" src="data:,">',
    '<button aria-labelledby="x9">b</button><div id="x9" title="Tip">Content9</div>',
    '<button aria-labelledby="x10">b</button><select id="x10"><option>One</option><option selected>Two</option></select>',
    '<button id="x11" aria-labelledby="x11 l11">Own text</button><span id="l11" hidden>and hidden</span>',
]


def test_an_aria_labelledby_target_gives_its_name_as_chromium_takes_it(browser):
    """A target of aria-labelledby gives what it would inside a name from content (its aria-label, a
    field's value, a select's choice, an image's aria-label), and the element named by itself its
    aria-label, else its text: Streamlit's slider is ``slider 'Quantity Quantity'`` in Chromium's
    tree (it was 'Quantity 5 1 20' here: the group's text, not its aria-label). Both backends and the
    recorder's namer agree with Chromium."""
    from webfreeze.recorder.accname import ROLE_NAME_JS
    from webfreeze.simulator.browser import new_context

    html = ("<!doctype html><html><head><title>L</title></head><body>"
            + "".join(f'<div class="case">{c}</div>' for c in LABELLEDBY_CASES) + "</body></html>")
    context = new_context(browser)
    page = context.new_page()
    try:
        page.set_content(html)
        cdp = context.new_cdp_session(page)
        chromium = []
        for i in range(len(LABELLEDBY_CASES)):
            handle = cdp.send("Runtime.evaluate", {"expression": f"document.querySelectorAll('.case')[{i}].firstElementChild"})
            node = cdp.send("DOM.describeNode", {"objectId": handle["result"]["objectId"]})["node"]
            (ax, *_) = cdp.send("Accessibility.getPartialAXTree", {"backendNodeId": node["backendNodeId"],
                                                                    "fetchRelatives": False})["nodes"]
            chromium.append((ax["role"]["value"], ax["name"]["value"]))
        namer = page.evaluate("""(js) => { const f = eval(js)();
            return [...document.querySelectorAll('.case > :first-child')].map((el) => [f.role(el), f.name(el)]); }""",
                              ROLE_NAME_JS)
        live, _ = rendered_tree(page)
    finally:
        context.close()
    assert chromium[0] == ("slider", "Quantity Quantity") and chromium[3] == ("button", "typed"), chromium
    for tree in (live, build_tree(html, "http://labelledby.test/")):
        # (every named slider, button, link and textbox of the page is a case's first element)
        ours = [(e["role"], e["name"]) for e in tree.descriptions
                if e["role"] in ("slider", "button", "link", "textbox") and e["name"]]
        assert ours == [c for c in chromium if c[1]], tree.axtree_text
    assert [tuple(x) for x in namer] == chromium


CONTEXT_CASES = [
    '<div class="t" role="listitem">alone</div>', '<div role="list"><div class="t" role="listitem">in a list</div></div>',
    '<div role="list"><div><div class="t" role="listitem">through a div</div></div></div>',
    '<div role="list"><section><div class="t" role="listitem">through a section</div></section></div>',
    '<div role="list"><span role="none"><div class="t" role="listitem">through none</div></span></div>',
    '<div role="group"><div class="t" role="listitem">in a group</div></div>',
    '<ul><div class="t" role="listitem">in a ul</div></ul>', '<ol><li><div class="t" role="listitem">in an li</div></li></ol>',
    '<div role="directory"><div class="t" role="listitem">in a directory</div></div>',
    '<div class="t" role="option">loose option</div>', '<div role="listbox"><div class="t" role="option">in a listbox</div></div>',
    '<div role="combobox"><div class="t" role="option">in a combobox</div></div>',
    '<div role="group"><div class="t" role="option">option in a group</div></div>',
    '<div class="t" role="treeitem">loose treeitem</div>', '<div role="tree"><div class="t" role="treeitem">in a tree</div></div>',
    '<div role="listbox"><div class="t" role="treeitem">treeitem in a listbox</div></div>',
    '<a class="t" href="#" role="listitem">a link</a>', '<div><li class="t">a loose li</li></div>',
    '<div class="t" role="menuitem">loose menuitem</div>',
]


def test_a_listitem_option_or_treeitem_needs_its_container_as_in_chromium(browser):
    """Chromium takes role=listitem, option and treeitem only inside their container (the nearest
    ancestor neither generic nor none: a list, a listbox, a tree, or a group); elsewhere the element
    keeps its own role. Both backends and the recorder's namer agree with Chromium's tree."""
    from webfreeze.recorder.accname import ROLE_NAME_JS
    from webfreeze.simulator.browser import new_context

    html = ("<!doctype html><html><head><title>C</title></head><body>"
            + "".join(f'<div id="c{i}">{c}</div>' for i, c in enumerate(CONTEXT_CASES)) + "</body></html>")
    context = new_context(browser)
    page = context.new_page()
    try:
        page.set_content(html)
        chromium = chromium_roles(context, page, [f"#c{i} .t" for i in range(len(CONTEXT_CASES))])
        namer = page.evaluate("""(js) => { const f = eval(js)();
            return [...document.querySelectorAll('.t')].map((el) => f.role(el)); }""", ROLE_NAME_JS)
        live, _ = rendered_tree(page)
    finally:
        context.close()
    assert chromium[0] == "generic" and chromium[1] == "listitem" and chromium[3] == "generic", chromium
    for tree in (live, build_tree(html, "http://context.test/")):
        b = tree.builder
        ours = [b.role(el) for el in b.doc.iter() if isinstance(el.tag, str) and el.get("class") == "t"]
        assert ours == chromium, list(zip(CONTEXT_CASES, ours, chromium))
    assert namer == chromium, list(zip(CONTEXT_CASES, namer, chromium))


# SVG content as Chromium's tree shows it (measured on Chromium 156): what an <svg> draws is in the
# tree, and an <svg> that draws nothing accessible is an image with nothing inside.
SVG_TREE_CASES = [
    '<svg width="90" height="40"><rect width="10" height="10"/></svg>',  # an icon: image
    '<svg width="90" height="40"><title>Sales</title><path d="M0 0L9 9"/></svg>',  # named by its title
    '<svg width="90" height="40"><title>Rain</title><g class="xtick"><text x="0" y="20">Jan</text></g>'
    '<g class="xtick"><text x="30" y="20">Feb <tspan>mid</tspan> end</text></g></svg>',  # axis ticks
    '<svg width="90" height="40" aria-label="Legend"><g><title>Series A</title><rect width="5" height="5"/></g>'
    '<g><desc>d</desc><rect width="5" height="5"/></g><g aria-label=""><text y="9">in g</text></g></svg>',
    '<svg width="90" height="40"><a href="/x"><text x="0" y="20">linked</text></a>'
    '<a xlink:href="/xl"><title>T</title><rect width="9" height="9"/></a><a><text y="9">no href</text></a></svg>',
    '<svg width="90" height="40"><text y="9">x<a href="/q">in text</a>y</text></svg>',
    '<svg width="90" height="40"><rect width="9" height="9"><title>Bar A</title></rect>'
    '<rect width="9" height="9" aria-label="Bar B"/><circle r="3" tabindex="0"/><rect width="9" height="9" onclick="1"/>'
    '<rect width="9" height="9" role="button" aria-label="Go"/><rect width="9" height="9" role="none" aria-label="X"/>'
    '<image href="x.png" width="9" height="9"><title>Pic</title></image><image href="y.png" width="9" height="9"/></svg>',
    '<svg width="90" height="40"><foreignObject width="90" height="30"><div>FO text <button>Btn</button></div>'
    '</foreignObject></svg>',
    '<svg width="90" height="40"><foreignObject width="90" height="30"><div></div></foreignObject></svg>',
    '<svg width="90" height="40" role="img" aria-label="Pic"><text x="0" y="20">inside img</text></svg>',
    '<svg width="90" height="40" role="presentation"><text x="0" y="20">pres</text></svg>',
    '<svg width="90" height="40"><text y="20">   </text><desc>d</desc>loose text</svg>',
    '<svg width="90" height="40"><text y="9" display="none">a</text><text y="9" visibility="hidden">b</text>'
    '<text y="9" aria-hidden="true">c</text><text y="9" style="display:none">d</text></svg>',
    '<svg width="90" height="40"><g role="list"><g role="listitem"><text y="9">one</text></g></g>'
    '<svg><text y="20">nested</text></svg><clipPath id="c"><text y="9">clip</text></clipPath></svg>',
    '<p>Before <svg width="40" height="10"><text y="9">mid</text></svg> after</p>',
    '<button><svg width="10" height="10"><text y="9">X</text></svg></button>',
]


def unnumbered(text: str) -> str:
    """A flattened tree without its ids and Chromium's InlineTextBox lines."""
    return "\n".join(re.sub(r"^(\s*)\[[^\]]*\] ", r"\1", line) for line in text.splitlines()
                     if "InlineTextBox" not in line)


def against_chromium(browser, cases: list[str], *, both: bool = True) -> tuple[str, object, dict]:
    """One page holding ``cases`` (each in a div), served at an http URL: BrowserGym's observation
    of it (Chromium's own tree read with BrowserGym's marks, as BrowserEnv reads it, flattened by
    BrowserGym; unnumbered), our browser backend's tree, and the recorder's namer's (role, name) by
    bid. ``both``: the text backend's tree of the page as served is the browser backend's (not for
    what only the page's style sheet says, which the text backend does not run)."""
    obs_utils = pytest.importorskip("browsergym.utils.obs", reason="browsergym-core is not installed")
    from webfreeze.recorder.accname import ROLE_NAME_JS
    from webfreeze.simulator.bgym_obs import _unmark
    from webfreeze.simulator.browser import new_context

    html = ("<!doctype html><html><head><meta charset=utf-8><title>S</title></head><body>"
            + "".join(f"<div>{c}</div>" for c in cases) + "</body></html>")
    context = new_context(browser)
    page = context.new_page()
    try:
        page.route(CHROMIUM_URL, lambda route, _request: route.fulfill(body=html, content_type="text/html"))
        page.goto(CHROMIUM_URL)
        unmark = bgym_marked(page)
        nodes = context.new_cdp_session(page).send("Accessibility.getFullAXTree")
        unmark()
        for node in nodes["nodes"]:
            _unmark(node)
        chromium = obs_utils.flatten_axtree_to_str(nodes)
        live, _ = rendered_tree(page)
        namer = page.evaluate("""(js) => { const f = eval(js)(); const out = {};
            for (const el of document.querySelectorAll('[data-wf-bid]')) out[el.getAttribute('data-wf-bid')] = [f.role(el), f.name(el)];
            return out; }""", ROLE_NAME_JS)
    finally:
        context.close()
    if both:
        assert unnumbered(live.axtree_text) == unnumbered(build_tree(html, CHROMIUM_URL).axtree_text)  # (both backends)
    return unnumbered(chromium), live, namer


CHROMIUM_URL = "http://chromium.test/page"


def test_an_svg_shows_what_chromium_s_tree_shows(browser):
    """A chart's axis labels, legend and title are in Chromium's tree, so in BrowserGym's observation:
    an ``<svg>`` that draws text, a link, a titled, labelled or focusable shape or group, or a
    foreignObject's content is an ``SvgRoot`` holding them (each text node of a ``<text>`` one
    StaticText), and one that draws nothing of the kind an ``image`` with nothing inside. Both
    backends' trees are BrowserGym's observation (Chromium's tree read with its marks, flattened),
    but for the ids; the recorder's namer names every element shown as the tree does."""
    theirs, live, namer = against_chromium(browser, SVG_TREE_CASES)
    assert "SvgRoot 'Rain'" in theirs and "graphics-symbol 'Bar A'" in theirs and "group 'Series A'" in theirs, theirs
    assert unnumbered(live.axtree_text) == theirs
    shown = [(e["role"], e["name"]) for e in live.summaries()]
    assert [tuple(namer[e["bid"]]) for e in live.summaries()] == shown
    assert ("SvgRoot", "Rain") in shown and ("link", "in text") in shown and ("image", "") in shown


# Widgets and regions whose state Chromium's tree gives whatever the markup says (measured on
# Chromium 156): checked and selected states, a range widget's value, bounds and valuetext, a
# container's orientation and multiselectable, a dialog's modal, a live region's politeness.
WIDGET_CASES = [
    '<div role="tablist"><div role="tab">t1</div><div role="tab" aria-selected="true">t2</div></div>',
    '<div role="tablist" aria-orientation="vertical" aria-multiselectable="true"><div role="tab">t</div></div>',
    '<div role="listbox" aria-orientation="horizontal"><div role="option">o1</div>'
    '<div role="option" aria-selected="true">o2</div></div>',
    '<div role="tree"><div role="treeitem">ti</div><div role="group"><div role="treeitem" aria-selected="true">'
    'tj</div></div></div>',
    '<div role="grid" aria-multiselectable="true"><div role="row" aria-selected="true"><div role="gridcell">g</div>'
    '</div></div><div role="treegrid"><div role="row"><div role="gridcell">h</div></div></div>',
    '<div role="menubar"><div role="menuitem">m</div></div><div role="menu"><div role="menuitemcheckbox">mc</div>'
    '<div role="menuitemradio" aria-checked="true">mr</div></div><div role="toolbar"><button>a</button></div>',
    '<div role="radiogroup"><div role="radio">r1</div><div role="radio" aria-checked="mixed">r2</div></div>',
    '<div role="checkbox">c1</div><div role="checkbox" aria-checked="mixed">c2</div>'
    '<div role="checkbox" aria-checked="foo">c3</div><div role="switch" aria-checked="true">sw</div>',
    '<div role="slider">s0</div><div role="slider" aria-valuenow="3" aria-valuemin="1" aria-valuemax="5">s1</div>'
    '<div role="slider" aria-valuemin="10" aria-valuemax="20">s2</div><div role="slider" aria-valuenow="150">s3</div>'
    '<div role="slider" aria-valuenow="x">s4</div><div role="slider" aria-valuenow="2" aria-valuetext="Two">s5</div>',
    '<div role="scrollbar">sb</div><div role="scrollbar" aria-orientation="horizontal">sh</div>'
    '<div role="separator">sep</div><div role="separator" tabindex="0" aria-valuenow="20">fsep</div><hr>',
    '<div role="spinbutton">sp</div><div role="spinbutton" aria-valuenow="4">sp4</div><div role="progressbar">pb</div>'
    '<div role="progressbar" aria-valuenow="0.3">pb3</div><div role="meter">m0</div><div role="meter" aria-valuenow="30">m3</div>',
    '<input type="range" aria-label="r1"><input type="range" min="2" max="8" value="3"><input type="range" min="0" '
    'max="10" step="3"><input type="range" value="200"><input type="range" min="10" max="0">',
    '<progress></progress><progress value="0.3"></progress><progress value="3" max="10"></progress>'
    '<progress max="0" value="0"></progress><meter value="0.6"></meter><meter min="5" max="1" value="3"></meter>',
    '<select size="3" aria-label="L"><option>a</option><option>b</option></select>'
    '<select multiple aria-label="M"><option selected>a</option></select>',
    '<div role="combobox">cb</div><div role="combobox" aria-haspopup="dialog">cd</div>'
    '<input list="dl" aria-label="City"><datalist id="dl"><option>Paris</option></datalist>'
    '<input aria-autocomplete="list" aria-label="Auto">',
    '<div role="textbox">typed</div><div role="searchbox">sought</div>',
    '<dialog open>dd</dialog><div role="dialog" aria-modal="true">md</div><div role="alertdialog">ad</div>',
    '<div role="alert"><p>in alert</p></div><div role="status">st</div><div role="log">lg</div>'
    '<div aria-live="polite"><p>inner</p></div><div aria-live="assertive" aria-atomic="true" aria-relevant="all">x</div>'
    '<div aria-live="off">off</div><div aria-busy="true">busy</div><div role="timer">tm</div>',
    '<details><summary>closed</summary>body text</details><details open><summary>open</summary>shown</details>',
    # a range input's valuetext as HTML's decimal steps write it, an aria-valuenow its value; an ARIA
    # progress bar held between its bounds; the page's document focused beside an autofocused field
    '<input type="range" min="0" max="1" step="0.1" value="0.3" aria-label="r"><input type="range" aria-valuenow="7" '
    'value="3" aria-label="r2"><div role="progressbar" aria-valuenow="150" aria-valuemax="100" aria-label="p"></div>'
    '<div role="progressbar" aria-valuenow="-5" aria-label="p2"></div><input aria-label="af" autofocus>',
]


def test_widget_states_are_given_as_chromium_gives_them(browser):
    """A slider's value, a tab list's orientation, an unchecked ARIA checkbox, a live region: what
    Chromium's tree gives for widgets whatever their markup says (defaults included) is in both
    backends' trees, as BrowserGym's observation shows it, ids apart."""
    theirs, live, _ = against_chromium(browser, WIDGET_CASES)
    assert "slider '' value=50, orientation='horizontal', valuemin=0, valuemax=100, valuetext=''" in theirs, theirs
    for line in ("slider 'r' value=0.30000001192092896, orientation='horizontal', valuemin=0, valuemax=1, valuetext='0.3'",
                 "slider 'r2' value=7,", "progressbar 'p' value=100,", "progressbar 'p2' value=0,",
                 "RootWebArea 'S', focused,", "textbox 'af', focused"):
        assert line in theirs, (line, theirs)
    assert unnumbered(live.axtree_text) == theirs


def test_browsergym_marks_only_standard_html_tags(browser):
    """BrowserEnv marks the elements of standard HTML tags (its default tags_to_mark), not an SVG's
    shapes nor a custom element, and the marks change Chromium's tree (a marked rect would be a
    graphics-symbol): the browser backend's BrowserGym observation marks the same ones, and takes
    the marks off after."""
    from webfreeze.simulator.bgym_obs import ARIA_MARK_JS
    from webfreeze.simulator.browser import new_context

    context = new_context(browser)
    page = context.new_page()
    try:
        page.set_content('<span id="s" aria-description="own">a</span><svg id="v"><rect id="r" width="4" height="4"/>'
                         '<a id="l" href="/x"><text>t</text></a></svg><x-item id="x">c</x-item>')
        page.evaluate(MARK_JS)
        page.evaluate(ARIA_MARK_JS, True)
        marks = page.evaluate("[...'svrlx'].map((i) => document.getElementById(i).getAttribute('aria-roledescription'))")
        described = page.evaluate("document.getElementById('s').getAttribute('aria-description')")
        page.evaluate(ARIA_MARK_JS, False)
        after = page.evaluate("[...'svrlx'].map((i) => document.getElementById(i).getAttribute('aria-roledescription'))")
        restored = page.evaluate("document.getElementById('s').getAttribute('aria-description')")
    finally:
        context.close()
    assert [m is not None and m.startswith("browsergym_id_") for m in marks] == [True, True, False, True, False], marks
    assert described.startswith("browsergym_id_") and described.endswith(" own")
    assert after == [None] * 5 and restored == "own"


# Text, lists, tables and fields as BrowserGym's observation shows them (Chromium 156, its marks)
PAGE_CASES = [
    '<p><a href="/1">x</a> <a href="/2">y</a> <img src="/i.png" alt=""> <span>s</span></p>',  # drawn spaces
    '<p><span>v </span> <span>w</span></p><p><br> <span>after a break</span></p><p>&nbsp;</p>',
    '<p><label><input type="radio" name="r"> One</label>\n<label><input type="radio" name="r"> Two</label></p>',
    '<a href="/a"><span>Home</span> <span>page</span></a><h2><b>Bold</b> <x-tag>custom</x-tag></h2>',
    '<span aria-label="4.4 out of 5">4.4</span>',  # a generic's aria-label
    '<ul><li>a<ul><li>b<ul><li>c</li></ul></li></ul></li></ul><ol start="5" type="a"><li>x</li><li value="10">y</li></ol>'
    '<ol reversed><li>r1</li><li>r2</li></ol><ul style="list-style:none"><li>n</li></ul>',
    '<table><tr><td>layout</td><td>cells</td></tr></table><table><tr><th>H</th><td>C</td></tr></table>'
    '<table summary="S"><tr><td>a</td><td>b</td></tr></table><table><tr><th>alone</th></tr></table>',
    '<table><thead><tr><th>A</th><th>B</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>',
    '<input aria-label="Q" value="cats"><input type="number" min="1" max="9" value="5" aria-label="N">'
    '<input type="date" aria-label="From"><input type="date" value="2024-03-05" aria-label="On">',
    '<select aria-label="S"><optgroup label="G"><option>o</option></optgroup></select>'
    '<fieldset><legend>Legend</legend><dl><dt>T</dt><dd>D</dd></dl></fieldset>',
    '<section>plain section</section><img src="/logo.png" alt=""><a href="/p#">frag</a><a href="/k" accesskey="k">key</a>'
    '<abbr title="x">ab</abbr><code>c</code>',
    '<x-item role="none">custom none</x-item><x-item role="none" tabindex="0">focusable custom</x-item>',
    '<table><tr><td></td><th>Q1</th><th>Q2</th></tr><tr><td>x</td><td>1</td><td>2</td></tr></table>',  # corner cell
    '<details>closed text</details><input type="date" value="2024-13-45" aria-label="Bad">'
    '<ol><li aria-hidden="true">a</li><li>b</li></ol><p><span>A</span> <x-el>custom inline</x-el></p>',
    # spaces beside inline elements that draw nothing are not drawn; a no-break space is text
    '<p><a href="/a">A</a> <span></span></p><p><a href="/b">B</a> <span></span> <a href="/c">C</a></p>'
    '<p><img alt="x" src="/i.png"> <span></span> <img alt="" src="/j.png"> b</p><p>t <span>&nbsp;</span> <a href="/q">q</a></p>',
    '<pre><span>a</span><span>,</span> <span>b</span>\n</pre><pre><span> </span><span>x</span></pre>',  # (kept in pre)
    '<p><a href="https://pypi.test">P</a> <a href="http://x.test?q=/1">Q</a></p>',  # (a URL with no path: "/")
    # a title does not name the roles that prohibit a name (unless focusable); a titled section
    # is a region; a figcaption is a node of its own and does not name its figure; dfn is a term
    '<p title="pt">para</p><strong title="st">s</strong> <code title="ct">c</code> <em title="et">e</em> '
    '<mark title="mt">m</mark> <time title="tt">t</time> <sub title="sb">2</sub> <p title="pf" tabindex="0">fp</p>',
    '<table><caption title="ct">cap</caption><tr><td>1</td><td>2</td></tr></table><section title="se">x</section>'
    '<figure><img alt="i" src="/x.png"><figcaption>cap text</figcaption></figure><figure title="ft"><p>b</p></figure>'
    '<p><dfn>term1</dfn> is <dfn title="tt">x</dfn></p>',
    # aria-selected is a state of the roles that take it (a row's, a header's in a grid only)
    '<span role="option" aria-selected="true">Lisbon</span> <div aria-selected="true">plain</div> '
    '<div role="button" aria-selected="true">btn</div> <div role="tab" aria-selected="true">tab</div> '
    '<div role="row" aria-selected="true"><span role="cell">c</span></div><div role="grid"><div role="row" '
    'aria-selected="true"><div role="columnheader" aria-selected="false">h</div><div role="gridcell">g</div></div></div>',
]

# What the page's style sheet draws (Chromium 156, its marks): text in another case, a table's
# parts drawn by other elements, inline blocks (no space is drawn beside one). The browser backend
# reads them (MARK_JS); the text backend, which runs no style sheet, cannot.
STYLE_CASES = [
    '<style>.u{text-transform:uppercase}</style><ul><li><a class="u" href="/w">Wiki page</a></li></ul>'
    '<p class="u">para <b>bold</b></p><button class="u">save it</button><input class="u" value="typed" aria-label="f">'
    '<label class="u" for="z">lab</label><input id="z">',
    '<style>.c{text-transform:capitalize}.l{text-transform:lowercase}.n{text-transform:none}</style>'
    '<p class="c">hello world-wide o\'neil <span class="n">as written</span></p><p class="l">LOUD Text</p>',
    '<div style="display:table" title="T"><div style="display:table-row"><div style="display:table-cell">c1</div>'
    '<div style="display:table-cell">c2</div></div></div><span style="display:inline-table">it</span>'
    '<ul style="display:table"><li>x</li></ul><div style="display:table"><span style="display:table-cell">lone</span></div>',
    '<style>.ib{display:inline-block}</style><ul style="list-style:none"><li class="ib">a</li> <li class="ib">b</li></ul>'
    '<p><span class="ib">a</span> <b>x</b> <span>y</span> <u>z</u></p>',
    # what ::before and ::after draw: a StaticText of its own, in names from content too
    '<style>.a::after{content:"\u25be"}.b::before{content:"\u2192 "}.n::after{content:"(req)"}.h::before{content:"*";'
    'display:none}.e::after{content:""}.o::before{content:"\u00bb"}.t::before{content:attr(title) ": "}'
    '.k::before{content:"\\201C"}.k::after{content:"\\201D"}.x::after{content:" more"}</style>'
    '<div class="a"><select aria-label="s"><option>x</option></select></div><p><a class="b" href="/x">Wiki</a> and</p>'
    '<label class="n" for="t">Name</label><input id="t"><p class="h">no star</p><p class="e">empty</p>'
    '<span class="o"></span> <span>x</span><p class="t" title="Note">body</p><blockquote class="k">quoted</blockquote>'
    '<q>plain <q>inner</q></q><button><span class="x">A</span></button><h2 class="b">Head</h2>',
    # how the page writes its rules: one class alone (an icon font's), a list with commas inside
    # :is(), nesting, a reset that sets no content, escapes, an import; and a hidden ::after
    '<style>*, ::before, ::after {box-sizing: border-box} .ic:before{content:"\\2605"} :is(.p1, .p2)::after{content:"!"}'
    '.nest{&::before{content:"[n]"}} .esc::before{content:"a\\A b"} .hid::after{content:"*"}</style>'
    '<p><i class="ic"></i> starred</p><p class="p2">bang</p><p class="nest">nested</p><p class="esc">esc</p>'
    '<div hidden id="hl"><span class="hid">hidden label</span></div><input aria-labelledby="hl">',
    # a hidden ::after that only holds room for a bold label (Streamlit's page links): not drawn text
    '<style>.sl::after{content:attr(label);visibility:hidden;display:block;height:0;overflow:hidden}</style>'
    '<a href="/about"><span class="sl" label="About"><p>About</p></span></a>',
]


def test_the_stamps_mark_js_leaves_are_read_without_a_browser():
    """MARK_JS's stamps on its copy of a live page, read as they are: a case that a frame's document
    does not inherit from its page, a ::before's text (shown and naming its link), no space beside
    an element that draws nothing (a script's text, a ::after of white space alone), a wf-p
    paragraph's blocks kept in it."""
    page = ('<html><head><title>T</title></head><body data-wf-bid="1" data-wf-transform="uppercase">'
            '<p data-wf-bid="2">hello <a href="/x" data-wf-bid="3" data-wf-before="\u2192 ">link</a></p>'
            '<p data-wf-bid="4"><a href="/a" data-wf-bid="5">A</a> <span data-wf-bid="6"><script>x=1</script></span> '
            '<a href="/b" data-wf-bid="7">B</a> <span data-wf-bid="8" data-wf-after=" "></span> <b data-wf-bid="9">C</b></p>'
            '<wf-p data-wf-bid="10">before<div data-wf-bid="11">in div</div> after</wf-p>'
            '<iframe data-wf-bid="a" src="/f" title="F"></iframe></body></html>')
    geometry = {str(i): [0, 0, 10, 10, 1] for i in range(1, 12)} | {"a": [0, 0, 100, 100, 1]}
    frames = {"a": {"html": "<html><body><p data-wf-bid='a1'>inner text</p></body></html>", "url": "http://s.test/f"}}
    text = unnumbered(build_tree(page, "http://s.test/", geometry, frames=frames).axtree_text)
    assert "\tparagraph ''\n\t\tStaticText 'HELLO'\n\t\tlink '\u2192 LINK', url='http://s.test/x'\n" \
           "\t\t\tStaticText '\u2192'\n" in text, text
    assert "link 'A', url='http://s.test/a'\n\t\tlink 'B', url='http://s.test/b'\n\t\tStaticText 'C'" in text, text
    assert "\tparagraph ''\n\t\tStaticText 'BEFORE'\n\t\tStaticText 'IN DIV'\n\t\tStaticText 'AFTER'" in text, text
    assert "StaticText 'inner text'" in text, text  # (the frame's own case)


def test_a_paragraph_a_script_filled_with_blocks_keeps_them(browser):
    """A script may put blocks in a <p> (CodeMirror's editor in Datasette's SQL form), which HTML's
    parser would move out of it: the browser backend's tree keeps them in the paragraph, as
    Chromium's tree does."""
    case = ('<p id="pp">before</p><script>const p = document.getElementById("pp"); const d = document.createElement("div");'
            ' d.innerHTML = "<span>in div</span><textarea aria-label=ed>code</textarea><p>inner</p>"; p.appendChild(d);'
            ' p.appendChild(document.createTextNode(" after"));</script><p>next</p>')
    theirs, live, namer = against_chromium(browser, [case], both=False)
    assert "\tparagraph ''\n\t\tStaticText 'before'\n\t\tStaticText 'in div'\n\t\ttextbox 'ed'" in theirs, theirs
    assert unnumbered(live.axtree_text) == theirs
    assert [tuple(namer[e["bid"]]) for e in live.summaries()] == [(e["role"], e["name"]) for e in live.summaries()]


def test_what_the_page_s_style_draws_as_browsergym_shows_it(browser):
    """The browser backend's tree follows what the page's style sheet changes in Chromium's tree,
    as MARK_JS reads it: CSS text-transform (a link's name and its text in capitals), a table's
    parts drawn by divs (LayoutTable, LayoutTableRow, LayoutTableCell), no space drawn beside an
    inline block, the text a ::before or ::after draws (strings, attr(), quotation marks: a q's
    own); the recorder's namer agrees. The text backend keeps the markup's reading."""
    theirs, live, namer = against_chromium(browser, STYLE_CASES, both=False)
    for line in ("link 'WIKI PAGE', url='http://chromium.test/w'", "button 'SAVE IT'", "textbox 'LAB'",
                 "StaticText \"Hello World-Wide O'neil\"", "StaticText 'as written'", "StaticText 'loud text'",
                 "LayoutTable 'T'", "LayoutTableRow ''", "LayoutTableCell 'c1'", "StaticText 'lone'",
                 "link '\u2192 Wiki', url='http://chromium.test/x'", "textbox 'Name(req)'", "StaticText 'Note:'",
                 "StaticText '\u201c'", "StaticText '\u2018'", "button 'A more'", "heading '\u2192 Head'",
                 "StaticText '\u2605'", "StaticText '!'", "StaticText '[n]'", "textbox 'hidden label'",
                 "link 'About', url='http://chromium.test/about'"):
        assert line in theirs, (line, theirs)
    assert unnumbered(live.axtree_text) == theirs
    assert [tuple(namer[e["bid"]]) for e in live.summaries()] == [(e["role"], e["name"]) for e in live.summaries()]
    served = unnumbered(build_tree("<!doctype html><html><head><title>S</title></head><body>"
                                   + "".join(f"<div>{c}</div>" for c in STYLE_CASES) + "</body></html>",
                                   CHROMIUM_URL).axtree_text)
    assert "link 'Wiki page'" in served and "LayoutTable 'T'" not in served


def test_text_lists_tables_and_fields_as_browsergym_shows_them(browser):
    """What BrowserGym's observation shows around the elements: the spaces a page draws between
    inline elements, list markers, layout tables, a text field's value as text, a date input's
    fields, an image's url, the roles BrowserGym's marks keep (an <img alt=""> is an image). Both
    backends' trees are that observation, ids apart; the recorder's namer agrees with the tree."""
    theirs, live, namer = against_chromium(browser, PAGE_CASES)
    for line in ("ListMarker '\u25e6'", "LayoutTableCell 'layout'", "StaticText ''", "Date 'From'", "table 'S'",
                 "paragraph 'pf'", "region 'se'", "Figcaption ''", "term 'term1'", "link 'P', url='https://pypi.test/'",
                 "StaticText 'Lisbon'", "button 'btn'\n", "row 'h g', selected=True", "columnheader 'h', selected=False",
                 "image '', url='http://chromium.test/logo.png'", "spinbutton 'Month Month' value=3"):
        assert line in theirs, (line, theirs)
    assert unnumbered(live.axtree_text) == theirs
    assert [tuple(namer[e["bid"]]) for e in live.summaries()] == [(e["role"], e["name"]) for e in live.summaries()]
