"""Small network helpers: is a host this machine, and which address do others reach us at."""

import fcntl
import socket
import struct

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "::1"}


def _this_machine_names():
    names = set(_LOOPBACK_NAMES)
    for fn in (socket.gethostname, socket.getfqdn):
        try:
            names.add(fn().lower())
        except OSError:
            pass
    return names


def _this_machine_addresses():
    addrs = set()
    try:
        _, _, ips = socket.gethostbyname_ex(socket.gethostname())
        addrs.update(ips)
    except OSError:
        pass
    return addrs


def is_local_host(name):
    """True when ``name`` (a host from -H/--hostfile) denotes the machine we run on."""
    name = name.split("@", 1)[-1].lower()
    if name in _this_machine_names() or name.startswith("127."):
        return True
    try:
        resolved = socket.gethostbyname(name)
    except OSError:
        return False
    return resolved.startswith("127.") or resolved in _this_machine_addresses()


def interface_address(iface):
    """IPv4 address of network interface ``iface`` (e.g. 'eth0'); OSError if it has none."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        SIOCGIFADDR = 0x8915
        req = struct.pack("256s", iface.encode()[:15])
        res = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, req)
        return socket.inet_ntoa(res[20:24])
    finally:
        sock.close()


def address_towards(host):
    """The local IPv4 address the kernel would use to reach ``host``.

    Connecting a UDP socket sends nothing; it only picks a route. Falls back to the
    address our own host name resolves to.
    """
    try:
        target = socket.gethostbyname(host.split("@", 1)[-1])
    except OSError:
        return _own_name_address()
    return _route_source(target) or _own_name_address()


def _route_source(target):
    """The local address of the route to ``target`` (an IPv4 address), or None."""
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.connect((target, 9))  # UDP: picks a route, sends nothing
            return sock.getsockname()[0]
        finally:
            sock.close()
    except OSError:
        return None


def _own_name_address():
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def outward_address():
    """The IPv4 address this machine is reached at when no peer is known yet: the one
    of its default route, else the address its host name resolves to (127.x.x.x when
    it has nothing else)."""
    return _route_source("192.0.2.1") or _own_name_address()  # TEST-NET-1
