import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratacrawl.errors import InvalidURL
from stratacrawl.urls import canonical as urls_module
from stratacrawl.urls import (
    canonical_fingerprint,
    canonicalize,
    check_target,
    fingerprint,
    is_private_host,
    resolve,
)
from tests.support.examples import examples

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("raw, canonical", [
    ("HTTP://Example.COM:80/a/./b/../c//d?b=2&a=1#frag", "http://example.com/a/c/d?a=1&b=2"),
    ("https://ex.com:443/", "https://ex.com/"),
    ("http://ex.com", "http://ex.com/"),
    ("http://ex.com:8080/x", "http://ex.com:8080/x"),
    ("http://ex.com/%7euser/a%2fb", "http://ex.com/~user/a%2Fb"),          # unreserved decoded, %2F kept
    ("http://ex.com/?q=%e4%b8%ad", "http://ex.com/?q=%E4%B8%AD"),
    ("http://bücher.de/Path", "http://xn--bcher-kva.de/Path"),             # IDNA, path case kept
    ("http://ex.com/a?utm_source=x&utm_medium=y&fbclid=1&gclid=2&id=3", "http://ex.com/a?id=3"),
    ("http://ex.com/a;jsessionid=ABC?x=1&PHPSESSID=9&sid=4", "http://ex.com/a?x=1"),
    ("http://ex.com/(S(abcdef))/page.aspx", "http://ex.com/page.aspx"),
    ("http://ex.com/news/index.html", "http://ex.com/news/"),
    ("  http://ex.com/a b  ", "http://ex.com/a%20b"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),
    # as browsers read URLs in HTML (the WHATWG URL standard)
    ("http://ex.com/a\tb\nc\r", "http://ex.com/abc"),                  # tabs, newlines dropped
    ("http://ex.com/a\\b\\..\\c", "http://ex.com/a/c"),               # backslash = slash
    ("http://ex.com/\\/x", "http://ex.com/x"),                          # and no empty segment
    ("http://ex.com/a?b\\c", "http://ex.com/a?b%5Cc="),                  # not in the query
    ("http:ex.com/p", "http://ex.com/p"),
    ("http:/ex.com/p", "http://ex.com/p"),
    ("http:\\\\ex.com\\p", "http://ex.com/p"),
    ("HTTPS:///ex.com//x", "https://ex.com/x"),
])
def test_canonical_forms(raw: str, canonical: str) -> None:
    assert canonicalize(raw) == canonical


@pytest.mark.parametrize("raw, reason", [
    ("javascript:void(0)", "scheme-javascript"),
    ("mailto:a@b.c", "scheme-mailto"),
    ("data:text/html,hi", "scheme-data"),
    ("/relative/path", "relative"),
    ("page.html", "relative"),
    ("", "empty"),
    ("http://", "no-host"),
    ("http://ex.com/" + "a" * 100_000, "too-long"),
    (b"http://ex.com/\xff\xfe", "not-utf8"),
    ("http://ex.com:99999/", "malformed"),
    ("http://ex.com/\x00", "control-characters"),
])
def test_garbage_is_invalid_url_with_a_reason(raw: str | bytes, reason: str) -> None:
    with pytest.raises(InvalidURL) as info:
        canonicalize(raw)
    assert info.value.reason == reason


def test_fingerprint_is_of_the_canonical_form() -> None:
    a = fingerprint("http://EX.com:80/a?b=1&utm_source=z")
    assert a == fingerprint("http://ex.com/a?b=1") and len(a) == 32
    assert a != fingerprint("http://ex.com/A?b=1")


def test_resolve_links() -> None:
    assert resolve("http://ex.com/a/b", "../c") == "http://ex.com/c"
    # as a browser on an http(s) page: backslashes are slashes, tabs and newlines go
    assert resolve("http://ex.com/a/b", "\\\\other\\x") == "http://other/x"
    assert resolve("http://ex.com/a/b", "c\td\ne") == "http://ex.com/a/cde"
    assert resolve("http://ex.com/a/b", "http:c") == "http://ex.com/a/c"   # same scheme: relative
    assert resolve("http://ex.com/a/b", "http:/c") == "http://ex.com/c"
    with pytest.raises(InvalidURL):
        resolve("http://ex.com/", "javascript:alert(1)")


def test_private_networks() -> None:
    assert is_private_host("127.0.0.1") and is_private_host("10.1.2.3")
    assert is_private_host("169.254.1.1") and is_private_host("localhost")
    assert is_private_host("[::1]") and not is_private_host("93.184.216.34")
    with pytest.raises(InvalidURL, match="private-network"):
        check_target("http://192.168.1.1/", allow_private=False)
    check_target("http://192.168.1.1/", allow_private=True)


def test_a_host_name_is_resolved_once_per_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def getaddrinfo(host: str, *_: object, **__: object) -> list[tuple]:
        asked.append(host)
        return [(2, 1, 6, "", ("10.0.0.7" if host == "intranet.test" else "93.184.216.34", 0))]

    monkeypatch.setattr(urls_module.socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(urls_module, "_hosts", {})
    for i in range(50):  # a sitemap's links: one host
        check_target(f"http://public.test/item/{i}", allow_private=False)
        with pytest.raises(InvalidURL, match="private-network"):
            check_target(f"http://intranet.test/item/{i}", allow_private=False)
    assert asked == ["public.test", "intranet.test"]
    clock = urls_module.time.monotonic() + urls_module.HOST_TTL_S + 1
    monkeypatch.setattr(urls_module.time, "monotonic", lambda: clock)
    check_target("http://public.test/again", allow_private=False)
    assert asked == ["public.test", "intranet.test", "public.test"]  # asked again after the TTL


# Path pieces real pages produce: empty segments, dot segments (plain and encoded),
# backslashes, stray tabs and newlines, index files, encoded slashes.
SEGMENTS = st.lists(st.one_of(
    st.sampled_from(["", ".", "..", "%2e", "%2E%2e", "\\", "a\\b", "\t", "\n", "index.html",
                     "%2F", "a b", "~u", "%7e"]),
    st.text(max_size=8)), max_size=6)
urls = st.builds(
    lambda scheme, sep, host, port, path, query, frag:
        f"{scheme}{sep}{host}{port}{path}{query}{frag}",
    st.sampled_from(["http", "HTTP", "https", "ftp", "javascript", ""]),
    st.sampled_from(["://", ":", ":/", ":\\\\", ":///", ":\t//"]),
    st.one_of(st.from_regex(r"[A-Za-z0-9\-]{1,12}(\.[A-Za-z]{2,5}){1,2}", fullmatch=True),
              st.text(max_size=12)),
    st.sampled_from(["", ":80", ":443", ":8080", ":0", ":x"]),
    st.one_of(st.text(max_size=40).map(lambda t: "/" + t),
              SEGMENTS.map(lambda parts: "/" + "/".join(parts)),
              SEGMENTS.map(lambda parts: "\\" + "\\".join(parts))),
    st.one_of(st.just(""), st.text(max_size=30).map(lambda t: "?" + t)),
    st.one_of(st.just(""), st.text(max_size=10).map(lambda t: "#" + t)),
)


@settings(max_examples=examples(300), deadline=None)
@given(urls, st.lists(st.tuples(st.integers(0, 80), st.sampled_from(["\t", "\n", "\r"])),
                      max_size=4))
def test_tabs_and_newlines_anywhere_change_nothing(raw: str, inserts: list[tuple[int, str]]) -> None:
    noisy = raw
    for at, ch in inserts:
        noisy = noisy[:at] + ch + noisy[at:]
    try:
        clean = canonicalize(raw)
    except InvalidURL:
        with pytest.raises(InvalidURL):
            canonicalize(noisy)
        return
    assert canonicalize(noisy) == clean


@settings(max_examples=examples(1500), deadline=None)
@given(st.one_of(urls, st.text(max_size=60), st.binary(max_size=60)))
def test_canonicalize_is_idempotent_and_raises_only_invalid_url(raw: str | bytes) -> None:
    try:
        once = canonicalize(raw)
    except InvalidURL:
        return
    assert canonicalize(once) == once
    assert once.startswith(("http://", "https://"))
    assert canonical_fingerprint(once) == fingerprint(raw)  # discovery's shortcut


# The shortcut for URLs already canonical (``urls._is_canonical``) must agree with the
# full path on every URL it takes; these strategies produce mostly such URLs.
LABELS = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
SHORTCUT_CANDIDATES = st.builds(
    lambda scheme, host, port, segments, slash, params:
        f"{scheme}://{host}{port}/{'/'.join(segments)}{slash if segments else ''}"
        + ("?" + "&".join(f"{k}={v}" for k, v in params) if params else ""),
    st.sampled_from(["http", "https"]),
    st.one_of(st.lists(LABELS, min_size=1, max_size=3).map(".".join),
              st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", fullmatch=True)),
    st.sampled_from(["", ":80", ":443", ":8080", ":65535", ":65536", ":0", ":00", ":08"]),
    st.lists(st.one_of(st.from_regex(r"[A-Za-z0-9._~-]{1,10}", fullmatch=True),
                       st.sampled_from(["index.html", "Default.aspx", ".", "..", ".x"])),
             max_size=4),
    st.sampled_from(["", "/"]),
    st.lists(st.tuples(st.sampled_from(["id", "page", "q", "utm_source", "s", "sort", "a_b"]),
                       st.from_regex(r"[A-Za-z0-9._~-]{0,6}", fullmatch=True)), max_size=3),
)


@settings(max_examples=examples(1500), deadline=None)
@given(st.one_of(SHORTCUT_CANDIDATES, st.from_regex(urls_module._CANONICAL, fullmatch=True)))
def test_the_canonical_shortcut_agrees_with_the_full_path(raw: str) -> None:
    try:
        full = urls_module._canonicalize(raw)
    except InvalidURL:
        assert not urls_module._is_canonical(raw)
        return
    if urls_module._is_canonical(raw):
        assert full == raw
    assert canonicalize(raw) == full


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/article/12", "https://ex.com/", "https://www.ex-ample.co.uk/a/b/",
    "http://ex.com/p/Item_42~v1.html?id=3&page=2", "http://localhost:9/x?q="])
def test_urls_in_canonical_form_take_the_shortcut(url: str) -> None:
    assert urls_module._is_canonical(url)


_BASES = ["http://ex.com/a/b", "https://ex.com:8443/dir/", "http://user@127.0.0.60:8081/list/3?p=2",
          "HTTP://Ex.COM", "http://ex.com/a/b;p?q#f"]
_HREF_PARTS = st.text(alphabet="/.?#;:@[]%~ab1-_=&\\é ", max_size=24)


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(_BASES),
       st.one_of(_HREF_PARTS,
                 st.builds(lambda p: "/" + p, _HREF_PARTS),
                 st.builds(lambda s, h, p: f"{s}://{h}{p}",
                           st.sampled_from(["http", "https", "HTTP", "ftp"]),
                           st.text(alphabet="ab1.:@[]%-é", max_size=12), _HREF_PARTS)))
def test_resolve_answers_as_urljoin_does(base: str, href: str) -> None:
    """The shortcut for the common shapes of links gives what ``urljoin`` gives (after the
    browser's reading of backslashes, tabs and newlines), or the same error."""
    from urllib.parse import urljoin

    text = href.strip().translate(urls_module._TAB_NEWLINE)
    if base[:5].lower() in ("http:", "https"):
        text = urls_module._slashes(text)
    try:
        want: str | None = urljoin(base, text)
    except ValueError:
        want = None
    try:
        got: str | None = resolve(base, href)
    except InvalidURL as e:
        if e.reason != "malformed":
            return   # a scheme refused before joining (javascript:, …)
        got = None
    assert got == want


def test_the_common_shapes_of_links_skip_urljoin() -> None:
    page = "http://ex.com/list/3"
    assert urls_module._joined_as_is(page, "/item/7?c=1#top") == "http://ex.com/item/7?c=1#top"
    assert urls_module._joined_as_is(page, "https://other.test/x") == "https://other.test/x"
    for other in ("item/7", "/a/../b", "/a/./b", "//cdn.test/x", "/a?", "/a#", "/a;p",
                  "HTTP://ex.com/a", "http://[::1/x"):
        assert urls_module._joined_as_is(page, other) is None, other
