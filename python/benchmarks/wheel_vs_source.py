"""The repaired release wheel's library against the source build, in interleaved rounds.

    python python/benchmarks/wheel_vs_source.py dist/tf_hvd-...-cp311-...whl [--rounds 5]

The release wheel's library is compiled by another compiler than the source build's (the floor
toolchain, tools/release/floor/: clang against a Debian 11 sysroot, Gloo built from source and linked
in statically) and repaired by auditwheel; none of that may cost speed. Each
round runs allreduce_bench.py's chain mode (dependent Gloo allreduces inside one
tf.function, time per allreduce = call time / chain length) once with the source build
(tf_hvd/_hvd.so) and once with the wheel's tf_hvd/_hvd.so (TF_HVD_LIBRARY; the wheel is
extracted so that its tf_hvd.libs/, if any, sits beside it), in alternating order; the ratio
source time / wheel time is taken per round and size, and reported as median [min-max]
with the verdict for >= 0.97 (rounds.verdict). Writes <results>/wheel_vs_source.json.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

from lib import formats, jsonio, paths, rounds, tables, targets

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GOAL = targets.WHEEL_GOAL


def _chain_seconds(library, sizes, np_, results_dir, tag):
    """{size: median seconds per allreduce} of one allreduce_bench chain run."""
    env = dict(os.environ, TF_HVD_LIBRARY=library)
    cmd = [sys.executable, os.path.join(HERE, "allreduce_bench.py"), "--quick", "--np",
           str(np_), "--contenders", "tf_hvd_gloo", "--modes", "chain", "--sizes", sizes,
           "--results-dir", results_dir, "--tag", tag]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    data = jsonio.read_json(os.path.join(results_dir, tag + ".json"))
    out = {}
    for rec in data["results"]:
        if rec.get("mode") == "chain":
            if not rec.get("correct"):
                raise RuntimeError("%s: a wrong chain result at %d bytes: %s" % (
                    library, rec["bytes"], rec.get("check_error")))
            out[rec["bytes"]] = rec["latency_us"]["median"] * 1e-6
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("--source", default=os.path.join(REPO, "tf_hvd", "_hvd.so"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--sizes", default="64K,1M,16M,64M")
    parser.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    args = parser.parse_args(argv)
    results_dir = paths.ensure_dir(args.results_dir)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(args.wheel) as z:
            z.extractall(tmp)
        wheel_lib = os.path.join(tmp, "tf_hvd", "_hvd.so")
        os.chmod(wheel_lib, 0o755)
        libs = os.path.join(tmp, "tf_hvd.libs")  # empty at the floor: nothing is bundled
        for name in os.listdir(libs) if os.path.isdir(libs) else []:
            os.chmod(os.path.join(libs, name), 0o755)
        libraries = {"source": args.source, "wheel": wheel_lib}
        per_round = []
        for r in range(args.rounds):
            order = ["source", "wheel"] if r % 2 == 0 else ["wheel", "source"]
            got = {}
            for which in order:
                got[which] = _chain_seconds(libraries[which], args.sizes, args.np, tmp,
                                            "%s-%d" % (which, r))
            per_round.append(got)
            tables.log("round %d: %s" % (r + 1, {w: {s: "%.1f us" % (t * 1e6) for s, t in v.items()}
                                                 for w, v in got.items()}))
    sizes = sorted(per_round[0]["source"])
    rows = []
    print("size       source us          wheel us           source/wheel          verdict (>= %.2f)"
          % GOAL)
    for size in sizes:
        src = rounds.spread([g["source"].get(size) for g in per_round])
        whl = rounds.spread([g["wheel"].get(size) for g in per_round])
        ratios = [g["source"][size] / g["wheel"][size] for g in per_round
                  if size in g["source"] and size in g["wheel"]]
        ratio = rounds.spread(ratios)
        verdict = rounds.verdict(ratios, ">=", GOAL)
        rows.append({"bytes": size, "source_s": src, "wheel_s": whl, "ratio": ratio,
                     "verdict": verdict})
        print("%-10s %-18s %-18s %-21s %s" % (
            formats.human_bytes(size).replace(" ", ""),
            "%.1f [%.1f-%.1f]" % tuple(x * 1e6 for x in (src["median"], src["min"], src["max"])),
            "%.1f [%.1f-%.1f]" % tuple(x * 1e6 for x in (whl["median"], whl["min"], whl["max"])),
            "%.3f [%.3f-%.3f]" % (ratio["median"], ratio["min"], ratio["max"]), verdict))
    jsonio.write_json(os.path.join(results_dir, "wheel_vs_source.json"),
                      {"wheel": os.path.basename(args.wheel), "np": args.np,
                       "rounds": args.rounds, "goal": GOAL, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
