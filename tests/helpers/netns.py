"""Several network hosts on one machine: Linux network namespaces joined by veth pairs to a
bridge that lives in a namespace of its own, so every packet stays inside namespaces this helper
made (the machine's own interfaces and routes are never touched).

    with Network("fsx", "10.231.7.0/24") as net:
        a = net.add_host("hospital-a", "hospital-a.fedstats.test")
        a.run(["ip", "addr"])                  # a command on that host
        a.cut(); a.heal()                      # its link down, then up again
        a.shape("200kbit")                     # its outgoing traffic slowed (token bucket)

Each host resolves the others by name: ``ip netns exec`` mounts ``/etc/netns/<ns>/hosts`` over
``/etc/hosts`` for the commands it runs, and this helper writes that file. Needs root and
iproute2; :func:`unavailable` tells why not, for a skip. Everything is removed on exit, also after
a failure; names carry the process id, so a run left over by a killed test never collides.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.helpers.timing import scaled

NETNS_ETC = Path("/etc/netns")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=scaled(30))


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"fsprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One namespace with one interface (``eth0``) on the network's bridge."""

    network: Network
    name: str
    hostname: str
    address: str
    ns: str
    switch_port: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run on this host."""
        return ["ip", "netns", "exec", self.ns, *argv]

    def run(self, argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv), capture_output=True, text=True,
                              **kwargs)  # type: ignore[call-overload, no-any-return]

    def cut(self) -> None:
        """Take the host's link down (its switch port and its own interface)."""
        _ip("-n", self.network.switch, "link", "set", self.switch_port, "down")
        _ip("-n", self.ns, "link", "set", "eth0", "down")

    def heal(self) -> None:
        """Bring the link up again (the address and route come back with it)."""
        _ip("-n", self.ns, "link", "set", "eth0", "up")
        _ip("-n", self.network.switch, "link", "set", self.switch_port, "up")
        _ip("-n", self.ns, "route", "replace", str(self.network.subnet), "dev", "eth0")

    def shape(self, rate: str) -> None:
        """Slow what the host sends to ``rate`` (a token bucket on its interface)."""
        _ip("-n", self.ns, "link", "show", "eth0")
        subprocess.run(["tc", "-n", self.ns, "qdisc", "replace", "dev", "eth0", "root", "tbf",
                        "rate", rate, "burst", "4kb", "latency", "2s"],
                       check=True, capture_output=True, text=True, timeout=scaled(30))


@dataclass
class Network:
    """A bridge in its own namespace and the hosts on it; a context manager that removes
    everything it made."""

    prefix: str
    cidr: str
    hosts: list[Host] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.subnet = ipaddress.ip_network(self.cidr)
        self._addresses = iter(self.subnet.hosts())
        next(self._addresses)  # .1 is left for a gateway nobody uses
        tag = uuid.uuid4().hex[:4]
        self._tag = f"{self.prefix}{tag}"
        self.switch = f"{self._tag}-sw"
        self._made_ns: list[str] = []

    def __enter__(self) -> Network:
        _ip("netns", "add", self.switch)
        self._made_ns.append(self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def add_host(self, name: str, hostname: str) -> Host:
        """A new host on the bridge, with the next free address."""
        index = len(self.hosts)
        ns = f"{self._tag}-h{index}"
        port = f"{self._tag}p{index}"[:15]
        peer = f"{self._tag}e{index}"[:15]
        address = str(next(self._addresses))
        _ip("netns", "add", ns)
        self._made_ns.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        # Made in this namespace's view, then both ends moved away: the root namespace keeps
        # nothing.
        _ip("link", "add", port, "type", "veth", "peer", "name", peer)
        _ip("link", "set", port, "netns", self.switch)
        _ip("link", "set", peer, "netns", ns)
        _ip("-n", self.switch, "link", "set", port, "master", "br0")
        _ip("-n", self.switch, "link", "set", port, "up")
        _ip("-n", ns, "link", "set", peer, "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        host = Host(self, name, hostname, address, ns, port)
        self.hosts.append(host)
        self._write_hosts_files()
        return host

    def _write_hosts_files(self) -> None:
        lines = ["127.0.0.1 localhost"] + [f"{h.address} {h.hostname} {h.name}"
                                             for h in self.hosts]
        for host in self.hosts:
            folder = NETNS_ETC / host.ns
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        """Remove the namespaces (their interfaces go with them) and the hosts files."""
        for ns in reversed(self._made_ns):
            _ip("netns", "del", ns, check=False)
            shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
        self._made_ns.clear()
