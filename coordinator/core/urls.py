"""Webhook URLs parsed and normalized, never compared as strings (``docs/coordinator.md``,
"Completion webhook").

An operator allows receivers by prefix (``webhook_allowed_prefixes``); a study's ``webhook_url``
is allowed when, parsed and normalized, it has a prefix's scheme, host and port exactly and its
path lies below the prefix's path, segment by segment (:meth:`WebhookURL.under`). A string
prefix let ``https://receiver/fedstats/../admin/x`` through, and the client then POSTed to
``/admin/x``.

What a receiver's server, proxy or framework might read otherwise than this parser does is
refused, never repaired: user information (``https://receiver@elsewhere/``), dot segments
(``/fedstats/../admin``, and ``..;`` or ``..%3B``, which some servers read as ``..``),
percent-encoded dots, slashes, backslashes and percent signs (``%2e``, ``%2f``, ``%5c``,
``%25``, which a server may decode before routing, once or twice) and control characters,
backslashes, empty segments (``//``), fragments, a percent-encoded host, blanks, control and
non-ASCII characters. What is left has one reading,
and the URL called is its normalized form (:meth:`WebhookURL.__str__`: scheme and host in lower
case, the default port left out, encoded unreserved characters decoded, other encodings in
upper case; RFC 3986, §6.2.2), so what was checked is what is sent.

    >>> url = parse_webhook_url("HTTPS://Receiver:443/fedstats/%7Eteam/done?x=1")
    >>> str(url), url.under(parse_webhook_url("https://receiver/fedstats/"))
    ('https://receiver/fedstats/~team/done?x=1', True)
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~")
_ENCODED = re.compile(r"%([0-9A-Fa-f]{2})")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODED_SEPARATOR = re.compile(r"%(2e|2f|5c|25)", re.IGNORECASE)
_HOST_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")


@dataclass(frozen=True)
class WebhookURL:
    """A parsed, normalized http(s) URL: ``segments`` are the path's segments after its first
    ``/`` (a final ``""`` for a path ending in ``/``)."""

    scheme: str
    host: str
    port: int
    segments: tuple[str, ...]
    query: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == DEFAULT_PORTS[self.scheme] else f":{self.port}"
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{host}{port}/{'/'.join(self.segments)}{query}"

    def under(self, prefix: WebhookURL) -> bool:
        """Same scheme, host and port, and a path strictly below ``prefix``'s (whose path ends
        in ``/``): ``/hooks/`` and ``/hooks/done`` are below ``/hooks/``, ``/hooks`` and
        ``/hooksmith/`` are not."""
        directory = prefix.segments[:-1]
        n = len(directory)
        return ((self.scheme, self.host, self.port) == (prefix.scheme, prefix.host, prefix.port)
                and len(self.segments) > n and self.segments[:n] == directory)


def _normalized_segment(segment: str) -> str:
    """Encoded unreserved characters decoded, other encodings in upper case."""
    def one(found: re.Match[str]) -> str:
        char = chr(int(found.group(1), 16))
        return char if char in _UNRESERVED else f"%{found.group(1).upper()}"
    return _ENCODED.sub(one, segment)


def _host(hostname: str, netloc: str) -> str:
    if netloc.startswith("["):
        try:
            return str(ipaddress.IPv6Address(hostname))
        except ValueError:
            raise ValueError("must have a valid IPv6 address between [ and ]") from None
    if not _HOST_NAME.fullmatch(hostname):
        raise ValueError("must have a host of letters, digits, '-' and '.', or an IP address")
    return hostname


def parse_webhook_url(url: str) -> WebhookURL:
    """``url`` parsed and normalized, or ``ValueError`` saying what it must not hold (a
    phrase to follow the URL's name: ``"must have no dot segment (. or ..)"``)."""
    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        raise ValueError("must have no blank, control or non-ASCII character")
    if "\\" in url:
        raise ValueError("must have no backslash")
    if "#" in url:
        raise ValueError("must have no fragment (#...)")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError("is not an http(s) URL with a host")
    if "@" in parts.netloc:
        raise ValueError("must have no user information (user@ or user:password@)")
    if "%" in parts.netloc:
        raise ValueError("must have no percent-encoded host")
    host = _host(parts.hostname, parts.netloc)
    try:
        port = parts.port
    except ValueError:
        raise ValueError("must have a port from 1 to 65535") from None
    if port == 0:
        raise ValueError("must have a port from 1 to 65535")
    if _BAD_PERCENT.search(url):
        raise ValueError("must write % only as %XX, with two hex digits")
    if _ENCODED_SEPARATOR.search(parts.path):
        raise ValueError("must have no percent-encoded dot, slash, backslash or percent sign "
                         "in its path (%2e, %2f, %5c, %25)")
    segments = tuple(_normalized_segment(s) for s in parts.path.split("/")[1:])
    if not segments:
        segments = ("",)
    for i, segment in enumerate(segments):
        decoded = unquote(segment)  # as a server that decodes before routing reads it
        if any(not c.isprintable() for c in decoded):
            raise ValueError("must have no percent-encoded control character in its path")
        if segment.split(";", 1)[0] in (".", "..") or decoded.split(";", 1)[0] in (".", ".."):
            raise ValueError("must have no dot segment (. or .. in its path)")
        if segment == "" and i < len(segments) - 1:
            raise ValueError("must have no empty path segment (//)")
    return WebhookURL(scheme, host, port if port is not None else DEFAULT_PORTS[scheme],
                      segments, parts.query)


def check_prefix(prefix: str) -> WebhookURL:
    """A ``webhook_allowed_prefixes`` entry: a webhook URL without query whose path ends in
    ``/``, so that a URL below it is on that host and port and below that path
    (``https://hooks.example.org`` would also begin ``https://hooks.example.org.attacker.net/``
    as a string)."""
    try:
        parsed = parse_webhook_url(prefix)
    except ValueError as exc:
        raise ValueError(f"{prefix!r} {exc}") from None
    if parsed.query or "?" in prefix:
        raise ValueError(f"{prefix!r} must have no query")
    if not urlsplit(prefix).path.endswith("/"):  # written out, as the operator means it
        raise ValueError(f"{prefix!r} must end with / (e.g. https://hooks.example.org/fedstats/)")
    return parsed


def allowed_url(url: str, prefixes: list[WebhookURL]) -> str:
    """The normalized ``url`` to call when it lies below one of ``prefixes``; ``ValueError``
    saying why not (a phrase to follow the URL's name)."""
    parsed = parse_webhook_url(url)
    if not any(parsed.under(prefix) for prefix in prefixes):
        raise ValueError(f"must be below one of {[str(p) for p in prefixes]} (the "
                         "coordinator's webhook_allowed_prefixes: same scheme, host and port, "
                         "a path under the prefix's)")
    return str(parsed)
