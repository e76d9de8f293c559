"""GPU collectives: latency and bus bandwidth per message size, when a GPU is present.

    python python/benchmarks/gpu_bench.py [--quick] [--sizes 4K,1M]          # np=1 (NCCL)
    python -m tf_hvd.runner -np 2 python python/benchmarks/gpu_bench.py       # one GPU per rank
    HOROVOD_GPU_OPERATIONS=gloo python -m tf_hvd.runner -np 2 python ...      # host staging

float32 tensors on /GPU:0 (each rank's visible GPU: pin ranks with CUDA_VISIBLE_DEVICES),
allreduce (Sum), allgather and broadcast, each call timed on its own until its result is on
the host side of TensorFlow's stream (a 4-byte read of the output): median, min, max latency,
algorithm and bus bandwidth (allreduce x 2(n-1)/n, allgather and broadcast x (n-1)/n, as NCCL's
tests count them). Needs the CUDA variant (tools/build/build_lib.sh --cuda); without a GPU or that
variant it says so and writes nothing. Rank 0 writes <results>/gpu.json.
"""
import argparse
import os
import sys

from lib import formats, jsonio, paths, timing

SIZES = [4 * formats.KiB, 64 * formats.KiB, formats.MiB, 16 * formats.MiB, 64 * formats.MiB,
         256 * formats.MiB]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few iterations")
    parser.add_argument("--sizes", type=lambda t: formats.parse_list(t, formats.parse_size),
                        default=SIZES)
    parser.add_argument("--results", default=paths.DEFAULT_RESULTS_DIR)
    args = parser.parse_args()
    import tensorflow as tf
    import tf_hvd as hvd
    if not hvd.cuda_built():
        print("gpu_bench: skipped: this tf_hvd is the CPU variant "
              "(tools/build/build_lib.sh --cuda)")
        return 0
    if not tf.config.list_physical_devices("GPU"):
        print("gpu_bench: skipped: TensorFlow sees no GPU")
        return 0
    hvd.init()
    n, rank = hvd.size(), hvd.rank()
    header = jsonio.run_header("gpu", argparse.Namespace(quick=args.quick, np=n))
    header["gpu_operations"] = os.environ.get("HOROVOD_GPU_OPERATIONS", "nccl")
    header["gpu"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    rows = []
    ops = {
        "allreduce": (lambda t: hvd.allreduce(t, op=hvd.Sum, name="bench_ar"),
                      2.0 * (n - 1) / n if n > 1 else 1.0),
        "allgather": (lambda t: hvd.allgather(t, name="bench_ag"), (n - 1) / n if n > 1 else 1.0),
        "broadcast": (lambda t: hvd.broadcast(t, root_rank=0, name="bench_bc"), 1.0),
    }
    for nbytes in args.sizes:
        warm, iters = (1, 5) if args.quick else (5, 50 if nbytes <= 16 * formats.MiB else 10)
        with tf.device("/GPU:0"):
            tensor = tf.ones([nbytes // 4], tf.float32)
        for name, (op, factor) in ops.items():
            def call():
                with tf.device("/GPU:0"):
                    out = op(tensor)
                return float(out[0].numpy())  # waits for the op on TensorFlow's stream
            durations, _, last = timing.time_calls(call, iters, warm)
            stats = timing.summarize(durations)
            alg = nbytes / stats["median"] / formats.GB if stats["median"] else None
            rows.append({"op": name, "bytes": nbytes, "latency_s": stats,
                         "algbw_GBps": alg, "busbw_GBps": alg * factor if alg else None,
                         "checked": last == (n if name == "allreduce" else 1.0)})
            if rank == 0:
                print("%-10s %10s  median %9.1f us  busbw %8s GB/s%s" % (
                    name, formats.human_bytes(nbytes), stats["median"] * 1e6,
                    formats.fmt(rows[-1]["busbw_GBps"]), "" if rows[-1]["checked"] else "  WRONG"))
    if rank == 0:
        path = os.path.join(args.results, "gpu.json")
        jsonio.write_json(path, {"header": jsonio.finish_header(header), "rows": rows})
        print("gpu_bench: wrote", path)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
