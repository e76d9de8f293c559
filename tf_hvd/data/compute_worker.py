"""The compute job's entry point: every rank runs tf.data service workers (and
dispatchers) until a training job shuts the service down (Horovod's
horovod.tensorflow.data.compute_worker).

    tfhvdrun -np 4 python -m tf_hvd.data.compute_worker /tmp/compute.json \\
        --dispatchers 2 --dispatcher-side compute

Rank 0 starts the compute service and writes its TfDataServiceConfig to the file the
training job reads; the other ranks get the config from rank 0 with broadcast_object.
A training rank ends the compute job with
``TfDataServiceConfig.read(path).compute_client().shutdown()``.
"""

import argparse
import secrets
import sys

from tf_hvd import basics, functions, topology
from tf_hvd.data.compute_service import DISPATCHER_SIDES, TfDataServiceConfig, compute_worker_fn
from tf_hvd.data.registry import ComputeService

DEFAULT_TIMEOUT_S = 60


def main(dispatchers: int, dispatcher_side: str, configfile: str,
         timeout: int = DEFAULT_TIMEOUT_S, workers_per_dispatcher: int = None):
    """Runs this rank's share of the tf.data service; returns when it is shut down.

    ::

        main(dispatchers=1, dispatcher_side="compute", configfile="/tmp/compute.json")
    """
    basics.init()
    rank, size = topology.rank(), topology.size()
    if dispatcher_side not in DISPATCHER_SIDES:
        raise ValueError("dispatcher_side must be 'compute' or 'training': %r"
                         % (dispatcher_side,))
    if dispatchers <= 0 or size % dispatchers:
        raise ValueError("Number of processes (%d) must be a multiple of number of "
                         "dispatchers (%d)." % (size, dispatchers))
    if workers_per_dispatcher is not None and workers_per_dispatcher * dispatchers != size:
        raise ValueError("%d dispatchers with %d workers each need %d processes, the job has %d."
                         % (dispatchers, workers_per_dispatcher,
                            dispatchers * workers_per_dispatcher, size))
    print("rank=%d size=%d dispatchers=%d" % (rank, size, dispatchers), flush=True)

    compute = None
    try:
        config_dict = None
        if rank == 0:
            key = secrets.token_bytes(32)
            compute = ComputeService(dispatchers, size // dispatchers, key=key)
            config = TfDataServiceConfig(
                dispatchers=dispatchers, workers_per_dispatcher=size // dispatchers,
                dispatcher_side=dispatcher_side, addresses=compute.addresses(), key=key,
                timeout=timeout)
            config.write(configfile)
            config_dict = config.to_dict()
        config = TfDataServiceConfig.from_dict(
            functions.broadcast_object(config_dict, root_rank=0))
        compute_worker_fn(config, timeout)
    finally:
        if compute is not None:
            compute.shutdown()


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m tf_hvd.data.compute_worker",
        description="Run tf.data service dispatchers and workers on this job's ranks.")
    parser.add_argument("configfile", nargs="?",
                        help="Where to write the compute service config file.")
    parser.add_argument("--compute-service-config-file", dest="config_file_option",
                        help="The same as CONFIGFILE (the spelling of Horovod's docs).")
    parser.add_argument("--dispatchers", type=int, default=1,
                        help="The number of dispatchers (divides the number of ranks).")
    parser.add_argument("--workers-per-dispatcher", type=int, default=None,
                        help="Checked only: it is always the number of ranks / dispatchers.")
    parser.add_argument("--dispatcher-side", default="compute", choices=DISPATCHER_SIDES,
                        help="Where the dispatchers run: on the 'compute' or 'training' side.")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S,
                        help="Seconds to wait for registrations (default %(default)s).")
    args = parser.parse_args(argv)
    if (args.configfile is None) == (args.config_file_option is None):
        parser.error("give the config file once: CONFIGFILE or --compute-service-config-file")
    args.configfile = args.configfile or args.config_file_option
    return args


if __name__ == "__main__":
    args = _parse(sys.argv[1:])
    main(args.dispatchers, args.dispatcher_side, args.configfile, args.timeout,
         args.workers_per_dispatcher)
