"""The compute service: where the tf.data dispatchers and workers of a compute job
announce themselves and where training ranks find them (Horovod's ComputeService and
ComputeClient).

It is the launcher's signed key-value store (tf_hvd.job.rendezvous) with these keys:

* ``compute/layout``            -> "<dispatchers> <workers_per_dispatcher>"
* ``compute/dispatcher/<d>``    -> the dispatcher's address, e.g. "grpc://10.0.0.5:41234"
* ``compute/worker/<d>/<w>``    -> b"1" once worker ``w`` of dispatcher ``d`` runs
* ``compute/shutdown``          -> b"1" once the service is asked to shut down

Clients poll (the store has no blocking reads); every request is signed with the
config's key, so only holders of the config file can register or shut down.
"""

import http.client
import threading
import time

from tf_hvd.job import network
from tf_hvd.job.rendezvous import RendezvousClient, RendezvousServer

POLL_INTERVAL_S = 0.1
SERVICE_NAME = "compute service"


class ComputeService(object):
    """Serves the registry for ``dispatchers`` x ``workers_per_dispatcher`` compute ranks.

    ::

        service = ComputeService(1, 2, key=b"secret")
        service.addresses()            # {"interface": [(ip, port)]}
        service.shutdown()
    """

    def __init__(self, dispatchers, workers_per_dispatcher, key, nics=None):
        if dispatchers <= 0:
            raise ValueError("The number of dispatchers must be larger than 0: %s" % dispatchers)
        if workers_per_dispatcher <= 0:
            raise ValueError("The number of workers per dispatcher must be larger than 0: %s"
                             % workers_per_dispatcher)
        self._server = RendezvousServer("0.0.0.0", secret=key)
        self._port = self._server.start()
        self._server.store.put("compute/layout",
                               ("%d %d" % (dispatchers, workers_per_dispatcher)).encode())
        self._nics = nics
        self._lock = threading.Lock()

    def addresses(self):
        """{interface: [(ip, port)]}; the outward address first, then loopback."""
        found = {"outward": [(network.outward_address(), self._port)],
                 "lo": [("127.0.0.1", self._port)]}
        if self._nics:
            found = {nic: [(network.interface_address(nic), self._port)]
                     for nic in self._nics}
        return found

    def shutdown(self, linger_s=0.0):
        """Marks the service shut down (waiters return), then stops serving after
        ``linger_s`` seconds so pollers can still see the mark."""
        with self._lock:
            if self._server is None:
                return
            self._server.store.put("compute/shutdown", b"1")
            if linger_s:
                time.sleep(linger_s)
            self._server.stop()
            self._server = None


class ComputeClient(object):
    """Talks to a ComputeService at one of ``compute_addresses`` with ``key``.

    ::

        client = ComputeClient({"lo": [("127.0.0.1", 4711)]}, b"secret")
        client.register_dispatcher(0, "grpc://10.0.0.5:41234")
        client.wait_for_dispatcher_registration(0, timeout=60)   # 'grpc://10.0.0.5:41234'
    """

    def __init__(self, compute_addresses, key, verbose=1):
        self._addresses = [tuple(a) for addrs in compute_addresses.values() for a in addrs]
        if not self._addresses:
            raise ValueError("No address given for the %s" % SERVICE_NAME)
        self._key = key
        self._verbose = verbose
        self._client = None
        self._layout = None

    # -- transport -------------------------------------------------------------------------

    def _connect(self):
        errors = []
        for host, port in self._addresses:
            client = RendezvousClient(host, port, self._key, timeout=10)
            try:
                client.request("GET", "compute/layout")
            except (OSError, http.client.HTTPException) as e:
                client.close()
                errors.append("%s:%s (%s)" % (host, port, e))
                continue
            return client
        raise ConnectionError("Cannot reach the %s at any of its addresses: %s"
                              % (SERVICE_NAME, ", ".join(errors)))

    def _request(self, method, key, body=b""):
        if self._client is None:
            self._client = self._connect()
        try:
            status, data = self._client.request(method, key, body)
        except (OSError, http.client.HTTPException):
            self._client.close()
            self._client = self._connect()
            status, data = self._client.request(method, key, body)
        if status == 403:
            raise PermissionError("The %s refused the request: the config's key does not "
                                  "match the service's" % SERVICE_NAME)
        return status, data

    def _get(self, key):
        status, data = self._request("GET", key)
        return data if status == 200 else None

    def _wait_for(self, what, timeout, ready):
        deadline = time.monotonic() + timeout
        while True:
            value = ready()
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError("Timed out waiting for %s after %ss. Check that the compute "
                                   "job is running, or increase the timeout." % (what, timeout))
            time.sleep(POLL_INTERVAL_S)

    def _check_dispatcher_id(self, dispatcher_id):
        if self._layout is None:
            dispatchers, per = self._get("compute/layout").decode().split()
            self._layout = (int(dispatchers), int(per))
        last = self._layout[0] - 1
        if not 0 <= dispatcher_id <= last:
            raise IndexError("Dispatcher id must be within [0..%d]: %s" % (last, dispatcher_id))

    # -- Horovod's ComputeClient API ----------------------------------------------------------

    def register_dispatcher(self, dispatcher_id, dispatcher_address):
        self._check_dispatcher_id(dispatcher_id)
        key = "compute/dispatcher/%d" % dispatcher_id
        known = self._get(key)
        if known is not None and known.decode() != dispatcher_address:
            raise ValueError("Dispatcher with id %d has already been registered under different "
                             "address %s: %s" % (dispatcher_id, known.decode(), dispatcher_address))
        self._request("PUT", key, dispatcher_address.encode())

    def wait_for_dispatcher_registration(self, dispatcher_id, timeout):
        """The address of dispatcher ``dispatcher_id`` once it registered."""
        self._check_dispatcher_id(dispatcher_id)
        data = self._wait_for("dispatcher %d to register" % dispatcher_id, timeout,
                              lambda: self._get("compute/dispatcher/%d" % dispatcher_id))
        return data.decode()

    def register_worker_for_dispatcher(self, dispatcher_id, worker_id):
        self._check_dispatcher_id(dispatcher_id)
        self._request("PUT", "compute/worker/%d/%d" % (dispatcher_id, worker_id), b"1")

    def wait_for_dispatcher_worker_registration(self, dispatcher_id, timeout):
        """Returns once all workers of the dispatcher registered (with a single
        dispatcher, every rank waits for dispatcher 0's workers)."""
        self._check_dispatcher_id(dispatcher_id)
        dispatchers, per = self._layout
        if dispatchers == 1:
            dispatcher_id = 0
        workers = range(dispatcher_id * per, (dispatcher_id + 1) * per)

        def all_registered():
            missing = [w for w in workers
                       if self._get("compute/worker/%d/%d" % (dispatcher_id, w)) is None]
            return None if missing else True
        self._wait_for("workers for dispatcher %d to register" % dispatcher_id, timeout,
                       all_registered)

    def shutdown(self):
        """Asks the compute job to stop its dispatchers and workers."""
        self._request("PUT", "compute/shutdown", b"1")

    def wait_for_shutdown(self):
        """Blocks until the service is asked to shut down (or is gone)."""
        while True:
            try:
                if self._get("compute/shutdown") is not None:
                    return
            except ConnectionError:
                return
            time.sleep(POLL_INTERVAL_S)
