"""Webhook URLs parsed and normalized (``coordinator.core.urls``): the scheme, host and port
compared exactly, the path segment by segment; what a receiver's server might read otherwise
is refused with the reason; the normalized URL is the one called (``docs/coordinator.md``,
"Completion webhook"). The submission and delivery through a real coordinator app are in
``test_coord_automation.py``."""

from __future__ import annotations

import re

import pytest

from coordinator.core.urls import allowed_url, check_prefix, parse_webhook_url

PREFIXES = [check_prefix("https://receiver/fedstats/"), check_prefix("http://10.0.0.5:8080/h/")]


@pytest.mark.parametrize(("url", "called"), [
    ("https://receiver/fedstats/x", "https://receiver/fedstats/x"),
    ("https://receiver/fedstats/", "https://receiver/fedstats/"),
    ("HTTPS://ReCeIvEr:443/fedstats/x?y=%2F..", "https://receiver/fedstats/x?y=%2F.."),
    ("https://receiver/fedstats/%7Eteam/%41b%3a", "https://receiver/fedstats/~team/Ab%3A"),
    ("https://receiver/fedstats/a.b/c..d/...", "https://receiver/fedstats/a.b/c..d/..."),
    ("http://10.0.0.5:8080/h/done", "http://10.0.0.5:8080/h/done"),
])
def test_an_url_below_a_prefix_is_called_normalized(url: str, called: str) -> None:
    assert allowed_url(url, PREFIXES) == called
    assert allowed_url(called, PREFIXES) == called  # normalizing is idempotent


@pytest.mark.parametrize(("url", "why"), [
    # The example: a string prefix accepted it, and the client POSTed to /admin/x.
    ("https://receiver/fedstats/../admin/x", "dot segment"),
    ("https://receiver/fedstats/./x", "dot segment"),
    ("https://receiver/fedstats/..;x=1/admin", "dot segment"),
    ("https://receiver/fedstats/..%3B/admin", "dot segment"),
    ("https://receiver/fedstats/..%00/admin", "control character"),
    ("https://receiver/fedstats/%2e%2e/admin/x", "percent-encoded dot"),
    ("https://receiver/fedstats/%2E./admin/x", "percent-encoded dot"),
    ("https://receiver/fedstats/a%2fb", "percent-encoded dot"),
    ("https://receiver/fedstats/a%5Cb", "percent-encoded dot"),
    ("https://receiver/fedstats/%252e%252e/admin", "percent-encoded dot"),
    ("https://receiver/fedstats\\..\\admin", "backslash"),
    ("https://receiver/fedstats//admin", "empty path segment"),
    ("https://receiver/fedstats/x#y", "fragment"),
    ("https://receiver/fedstats/%g0", "%XX"),
    ("https://receiver/fedstats/a\tb", "blank"),
    ("https://receiver/fedstats/\u0430", "non-ASCII"),
    ("https://user@receiver/fedstats/x", "user information"),
    ("https://receiver@attacker.example/fedstats/x", "user information"),
    ("https://receiver:pw@attacker.example/fedstats/x", "user information"),
    ("https://rec%65iver/fedstats/x", "percent-encoded host"),
    ("https://receiver:99999/fedstats/x", "port from 1 to 65535"),
    ("https://receiver:0/fedstats/x", "port from 1 to 65535"),
    ("https://rec_eiver/fedstats/x", "host of letters"),
    ("https://[::1/fedstats/x", "IPv6"),
    ("ftp://receiver/fedstats/x", "not an http(s) URL"),
    # Well formed, but not below a prefix: scheme, host and port exactly, then the segments.
    ("http://receiver/fedstats/x", "below one of"),
    ("https://receiver:8443/fedstats/x", "below one of"),
    ("https://receiver.attacker.example/fedstats/x", "below one of"),
    ("https://receiver/fedstats", "below one of"),
    ("https://receiver/fedstatsx/y", "below one of"),
    ("https://receiver/Fedstats/x", "below one of"),
    ("http://10.0.0.5/h/x", "below one of"),
    ("http://[::ffff:10.0.0.5]:8080/h/x", "below one of"),
])
def test_every_trick_is_refused_with_its_reason(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        allowed_url(url, PREFIXES)


@pytest.mark.parametrize(("prefix", "why"), [
    ("https://hooks.example.org", "must end with /"),
    ("https://hooks.example.org/a", "must end with /"),
    ("https://hooks.example.org/a/?q=1", "no query"),
    ("https://hooks.example.org/a/../", "dot segment"),
    ("https://u:p@hooks.example.org/", "user information"),
    ("ftp://hooks.example.org/", "not an http(s) URL"),
])
def test_a_prefix_is_parsed_as_strictly(prefix: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        check_prefix(prefix)


def test_the_parts_compared() -> None:
    url = parse_webhook_url("https://[0:0::1]:8443/a/b/?x")
    assert (url.scheme, url.host, url.port, url.segments, url.query) == (
        "https", "::1", 8443, ("a", "b", ""), "x")
    assert str(url) == "https://[::1]:8443/a/b/?x"
