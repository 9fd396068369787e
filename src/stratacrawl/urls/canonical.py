"""URL canonicalization and fingerprints: the dedup key, kept apart from the wire URL.

``canonicalize`` builds on w3lib's ``canonicalize_url`` (WHATWG-style parsing, IDNA,
dot segments, percent-encoding normalization, sorted query) and adds the crawler
rules: http(s) only, lower-case host, no default port, no duplicate slashes, no
tracking parameters or session ids, ``index.html`` folded into its folder.
It is idempotent and raises only :class:`InvalidURL`.

URLs in HTML are read as browsers read them (the WHATWG URL standard): tabs and newlines
anywhere are dropped, and for http(s) a backslash before the query is a slash and any
number of slashes after the scheme introduces the host (``http:host/p``, ``http:/host/p``
and ``http:\\host\p`` are all ``http://host/p``).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import socket
import time
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from stratacrawl.errors import InvalidURL

MAX_URL_LENGTH = 8192
TRACKING = re.compile(
    r"^(utm_[a-z_]+|fbclid|gclid|gclsrc|dclid|msclkid|yclid|mc_cid|mc_eid|_ga|_gl|igshid"
    r"|twclid|li_fat_id|wickedid|oly_anon_id|oly_enc_id|vero_id|rb_clickid|s_cid|_hsenc|_hsmi"
    r"|mkt_tok|trk|spm)$", re.IGNORECASE)
SESSION_PARAMS = re.compile(
    r"^(jsessionid|phpsessid|sid|sessionid|session_id|aspsessionid[a-z]*|cfid|cftoken"
    r"|zenid|oscsid|s)$", re.IGNORECASE)
_PATH_SESSION = re.compile(r";(jsessionid|phpsessid|sid|sessionid)=[^/?#;]*", re.IGNORECASE)
_ASPNET_SESSION = re.compile(r"/\((?:[A-Za-z]\([^)]*\))+\)(?=/)")  # /(S(abc))/
_INDEX = re.compile(r"/(index|default)\.(html?|php|aspx?)$", re.IGNORECASE)
_DUP_SLASHES = re.compile(r"/{2,}")
DEFAULT_PORTS = {"http": 80, "https": 443}
HOST_TTL_S = 300.0
MAX_HOSTS = 10_000
_hosts: dict[str, tuple[float, bool]] = {}  # host -> (expiry, private)
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


def _before_query(text: str) -> int:
    """Where the query or fragment of ``text`` starts (its length if neither)."""
    cuts = [i for i in (text.find("?"), text.find("#")) if i >= 0]
    return min(cuts) if cuts else len(text)


def _slashes(text: str) -> str:
    """Backslashes before the query read as slashes, as browsers do for http(s)."""
    cut = _before_query(text)
    return text[:cut].replace("\\", "/") + text[cut:]


def _browser_form(text: str, scheme: str) -> str:
    """An absolute http(s) URL as a browser reads it: ``scheme:`` and then any run of
    slashes or backslashes before the host."""
    rest = _slashes(text[len(scheme) + 1:])
    return f"{scheme}://{rest.lstrip('/')}"


# URLs already in canonical form, in the shapes most links and pages have: lower-case
# scheme and host name (or a dotted quad), a port only if not the default, path segments
# of unreserved characters (none empty, none starting with a dot), no index file, and a
# query of plain, sorted parameters that are neither tracking nor session ids. Such a URL
# is its own canonical form (a property test checks the full path agrees), and is
# returned as it is: the full path costs ~0.2 ms, and discovery, the fetch worker and
# the cleaner each canonicalize every URL they handle.
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_SEGMENT = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*"
_PARAM = r"[a-z0-9_]+=[A-Za-z0-9._~-]*"
_CANONICAL = re.compile(
    rf"(?P<scheme>https?)://(?P<host>(?:{_LABEL}\.)*[a-z](?:[a-z0-9-]{{0,61}}[a-z0-9])?"
    rf"|{_OCTET}(?:\.{_OCTET}){{3}})(?::(?P<port>0|[1-9][0-9]{{0,4}}))?"
    rf"(?P<path>/(?:{_SEGMENT}/)*(?:{_SEGMENT})?)(?:\?(?P<query>{_PARAM}(?:&{_PARAM})*))?")


def _is_canonical(text: str) -> bool:
    """Whether ``text`` is, by its shape alone, a canonical URL (see ``_CANONICAL``)."""
    m = _CANONICAL.fullmatch(text)
    if m is None or len(text) > MAX_URL_LENGTH or "--" in m["host"] or _INDEX.search(m["path"]):
        return False
    if m["port"] is not None and (int(m["port"]) > 65535
                                  or int(m["port"]) == DEFAULT_PORTS[m["scheme"]]):
        return False
    if m["query"] is None:
        return True
    pairs = [tuple(p.split("=", 1)) for p in m["query"].split("&")]
    return pairs == sorted(pairs) and not any(
        TRACKING.match(k) or SESSION_PARAMS.match(k) for k, _ in pairs)


def canonicalize(url: str | bytes) -> str:
    """The canonical form of an absolute http(s) URL."""
    if isinstance(url, str) and _is_canonical(url):
        return url
    return _canonicalize(url)


def _canonicalize(url: str | bytes) -> str:
    if isinstance(url, bytes):
        try:
            url = url.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidURL(repr(url[:200]), "not-utf8") from None
    text = url.strip().translate(_TAB_NEWLINE)
    if not text:
        raise InvalidURL(url, "empty")
    if len(text) > MAX_URL_LENGTH:
        raise InvalidURL(text, "too-long")
    if any(ord(c) < 0x20 for c in text):
        raise InvalidURL(text, "control-characters")
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme not in DEFAULT_PORTS:
        if scheme in {"javascript", "mailto", "data", "tel", "ftp", "file", "about", "blob"}:
            raise InvalidURL(text, f"scheme-{scheme}")
        if not scheme or text.startswith(("/", ".", "?", "#")) or "//" not in text:
            raise InvalidURL(text, "relative")
        raise InvalidURL(text, "scheme")
    text = _browser_form(text, scheme)
    try:
        parts = urlsplit(text)
        host = parts.hostname
        port = parts.port
    except ValueError:
        raise InvalidURL(text, "malformed") from None
    if not host:
        raise InvalidURL(text, "no-host")
    path = _ASPNET_SESSION.sub("", _PATH_SESSION.sub("", parts.path))
    path = _DUP_SLASHES.sub("/", path) or "/"
    path = _INDEX.sub("/", path)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if not TRACKING.match(k) and not SESSION_PARAMS.match(k)]
    netloc = host.lower()
    if ":" in netloc:  # IPv6 literal
        netloc = f"[{netloc}]"
    if port is not None and port != DEFAULT_PORTS[parts.scheme.lower()]:
        netloc += f":{port}"
    rebuilt = urlunsplit((parts.scheme.lower(), netloc, path, urlencode(query), ""))
    try:
        canonical = canonicalize_url(rebuilt)
    except (ValueError, UnicodeError):
        raise InvalidURL(text, "malformed") from None
    # canonicalize_url may re-expose a default port it was given explicitly; we never give one.
    return canonical


def fingerprint(url: str | bytes) -> str:
    """Hex digest (128 bits) of the canonical URL: the dedup key everywhere."""
    return canonical_fingerprint(canonicalize(url))


def canonical_fingerprint(canonical: str) -> str:
    """``fingerprint`` of a URL ``canonicalize`` returned (canonicalizing it again, which
    changes nothing, was half of what discovery spent on a link)."""
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


def resolve(base: str, href: str) -> str:
    """An absolute URL for a link found on ``base`` (read as a browser reads it: tabs and
    newlines dropped, backslashes as slashes on an http(s) page); raises
    :class:`InvalidURL`."""
    href = href.strip()
    if "\t" in href or "\n" in href or "\r" in href:
        href = href.translate(_TAB_NEWLINE)
    if "\\" in href and base[:5].lower() in ("http:", "https"):
        href = _slashes(href)
    lowered = href[:12].lower()
    if lowered.startswith(("javascript:", "mailto:", "data:", "tel:")):
        raise InvalidURL(href, f"scheme-{lowered.split(':', 1)[0]}")
    if len(href) > MAX_URL_LENGTH:
        raise InvalidURL(href, "too-long")
    joined = _joined_as_is(base, href)
    if joined is not None:
        return joined
    try:
        return urljoin(base, href)
    except ValueError:
        raise InvalidURL(href, "malformed") from None


# A link of one of the two shapes most pages' links have, which ``urljoin`` would only
# take apart and put back together: an absolute http(s) URL (lower-case scheme, a plain
# ASCII host) or a path from the root, with no ``.``/``..`` segment, no ``;`` and no
# empty query or fragment (which ``urljoin`` drops). ``urljoin`` costs ~8 us a link,
# most of what discovery spends on it; the shapes' answers are checked against it by a
# property test.
_AS_IS = re.compile(r"(?:(?P<scheme>https?)://[A-Za-z0-9.:@_~%!$&'()*+,=-]+(?:/[^?#;]*)?"
                    r"|(?P<path>/(?:[^/?#;][^?#;]*)?))(?:\?[^#;]+)?(?:#.+)?")
_DOT_SEGMENT = re.compile(r"/\.\.?(?:/|$)")


@functools.lru_cache(maxsize=256)
def _origin(base: str) -> str | None:
    """``scheme://host`` of an http(s) ``base`` as ``urljoin`` reads it, or None."""
    try:
        parts = urlsplit(base)
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


def _joined_as_is(base: str, href: str) -> str | None:
    """``urljoin(base, href)`` for a link of the shapes of ``_AS_IS`` on an http(s)
    page, or None for any other (``urljoin`` answers those)."""
    m = _AS_IS.fullmatch(href)
    if m is None:
        return None
    origin = _origin(base)
    if origin is None:
        return None
    if m["scheme"] is not None:
        return href   # absolute: urljoin would give it back as it is
    return None if _DOT_SEGMENT.search(m["path"]) else origin + href


def is_private_host(host: str) -> bool:
    """True for loopback, private, link-local, reserved or unspecified addresses (resolving
    names; a name's answer is kept ``HOST_TTL_S``: discovery asks for every link, and a
    sitemap's 50,000 links are on one host)."""
    now = time.monotonic()
    known = _hosts.get(host)
    if known is not None and known[0] > now:
        return known[1]
    private = _is_private_host(host)
    if len(_hosts) >= MAX_HOSTS:
        _hosts.clear()
    _hosts[host] = (now + HOST_TTL_S, private)
    return private


def _is_private_host(host: str) -> bool:
    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        if host.lower() in {"localhost", "localhost.localdomain"} or host.lower().endswith(
                ".localhost"):
            return True
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False  # unresolvable: the fetch fails on its own, with its own reason
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    return any(a.is_private or a.is_loopback or a.is_link_local or a.is_reserved
               or a.is_unspecified or a.is_multicast for a in addresses)


def check_target(url: str, *, allow_private: bool) -> None:
    """Refuse targets on private networks unless the source allows them."""
    if allow_private:
        return
    host = urlsplit(url).hostname or ""
    if is_private_host(host):
        raise InvalidURL(url, "private-network")
