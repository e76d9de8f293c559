"""Host discovery for elastic runs: run the user's --host-discovery-script now and then
and read the hosts it prints, one ``host[:slots]`` per line (Horovod's format).

    d = HostDiscovery("./discover.sh", slots_per_host=1)
    hosts = d.poll()   # [("localhost", 3)], or None when not due yet or the script failed
"""

import subprocess
import time

from .hosts import HostSpecError


def parse_hosts_output(text, slots_per_host):
    """[(host, slots)] from the script's output; raises HostSpecError for a bad line."""
    hosts = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        host, _, slots = line.partition(":")
        if not host or (slots and not slots.isdigit()):
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

    def poll(self):
        """The hosts the script prints now; None when not due yet or when it failed
        (the failure is logged once until the script works again)."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.interval
        try:
            out = subprocess.run([self.script], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=self.timeout, check=True)
            hosts = parse_hosts_output(out.stdout.decode("utf-8", "replace"),
                                       self.slots_per_host)
        except (OSError, subprocess.SubprocessError, HostSpecError) as e:
            error = "host discovery script %s failed: %s" % (self.script, e)
            if error != self._last_error and self._log:
                self._log(error)
            self._last_error = error
            return None
        self._last_error = None
        return hosts
