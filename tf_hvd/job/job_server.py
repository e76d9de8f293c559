"""The rendezvous server a driver serves for the ranks it starts (Ray's executors,
Spark's barrier tasks): a fresh secret, the authenticated store on the address the ranks
reach, and the first refused request logged with the secret masked.

    >>> server = start_job_server("127.0.0.1", print)  # doctest: +SKIP
    >>> server.port, len(server.secret)                # doctest: +SKIP
    (41234, 64)
"""

from . import auth
from .rendezvous import RendezvousServer


def start_job_server(address, log):
    """A started RendezvousServer bound to ``address``; ``log(line)`` reports the first
    request it refuses (a rank with another secret, or a stranger)."""
    secret = auth.new_secret()

    def on_refusal(client_address, code, reason, first):
        if first:
            log(auth.mask("the rendezvous server refused a request from %s (HTTP %d: %s)"
                          % (client_address[0] if client_address else "?", code, reason),
                          secret))
    server = RendezvousServer(address, secret=secret, on_refusal=on_refusal)
    server.start()
    return server
