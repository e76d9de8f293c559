"""Host discovery for elastic runs: run the user's --host-discovery-script now and then
and read the hosts it prints, one ``host[:slots]`` per line (Horovod's format).

    d = HostDiscovery("./discover.sh", slots_per_host=1)
    hosts = d.poll()   # [("localhost", 3)], or None when not due yet or the script failed
    hosts = wait_for_slots(d, 4, timeout=600)   # at the start: until 4 slots are listed

Hosts are keyed by the name the script prints, as in Horovod: ``localhost:2`` and
``127.0.0.1:2`` are two hosts of two slots each, although both are this machine.
"""

import re
import subprocess
import time

from ...job.host_spec import HostSpecError


_HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]*$")  # [user@]name or IPv4 address


def parse_hosts_output(text, slots_per_host):
    """[(host, slots)] from the script's output; raises HostSpecError for a bad line."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        host, _, slots = line.partition(":")
        if not _HOST.match(host) or (slots and not slots.isdigit()):
            raise HostSpecError("host discovery script, line %d: expected host[:slots], got "
                                "%r" % (number, line))
        hosts.append((host, int(slots) if slots else slots_per_host))
    return hosts


class HostDiscovery(object):
    def __init__(self, script, slots_per_host=1, interval=1.0, timeout=10.0, log=None):
        self.script, self.slots_per_host = script, slots_per_host
        self.interval, self.timeout = interval, timeout
        self._log = log
        self._next = 0.0
        self._last_error = None

    def run(self):
        """The hosts the script prints now, a name listed twice counted once (its
        slots summed); raises HostSpecError naming the script when it fails."""
        try:
            out = subprocess.run([self.script], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=self.timeout, check=True)
        except (OSError, subprocess.SubprocessError) as e:
            detail = e.strerror if isinstance(e, OSError) and e.strerror else e
            stderr = getattr(e, "stderr", None)
            if stderr:
                detail = "%s: %s" % (detail, stderr.decode("utf-8", "replace").strip()[-300:])
            raise HostSpecError("host discovery script %s failed: %s" % (self.script, detail))
        try:
            hosts = parse_hosts_output(out.stdout.decode("utf-8", "replace"),
                                       self.slots_per_host)
        except HostSpecError as e:
            raise HostSpecError("host discovery: ignoring this output of %s (%s); the hosts "
                                "stay as they were" % (self.script, e))
        merged = {}
        for host, slots in hosts:
            merged[host] = merged.get(host, 0) + slots
        return list(merged.items())

    def poll(self):
        """The hosts the script prints now; None when not due yet or when it failed
        (the failure is logged once until the script works again)."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.interval
        try:
            hosts = self.run()
        except HostSpecError as e:
            if str(e) != self._last_error and self._log:
                self._log(str(e))
            self._last_error = str(e)
            return None
        self._last_error = None
        return hosts


def wait_for_slots(discovery, needed, timeout, sleep=time.sleep, clock=time.monotonic):
    """Run the script until it lists at least ``needed`` slots; return its hosts.

    A script that fails ends the wait at once (HostSpecError), as in Horovod; so does
    ``timeout`` seconds without enough slots (the message says how many were found)."""
    deadline = clock() + timeout
    while True:
        hosts = discovery.run()
        found = sum(slots for _, slots in hosts)
        if found >= needed:
            return hosts
        if clock() >= deadline:
            raise HostSpecError(
                "host discovery: waited %g s (--elastic-timeout) for %d slot(s), the "
                "script %s lists %d (%s)" % (timeout, needed, discovery.script, found,
                                             ", ".join("%s:%d" % h for h in hosts) or
                                             "no host"))
        sleep(discovery.interval)
