"""Gloo's links compared: the own socket mesh against Gloo's TCP pairs (sync mode).

    python python/benchmarks/links_bench.py [--quick] [--nps 2,3] [--rounds 3]

tf_hvd over Gloo once per HOROVOD_GLOO_LINKS value (mesh, pairs, pairs_busy_poll), all with
HOROVOD_SHM_ALLREDUCE=0 so every allreduce crosses the links: 4 KiB (the gather
algorithm; latency, the in-graph figure is chain mode) and 256 MiB (the ring; bus
bandwidth). Runs are interleaved (mesh, pairs, pairs_busy_poll, mesh, ... per np), so load
drift on a shared machine hits both alike; the summary gives the median over the
rounds of each run's median, with the spread (min..max of the rounds), and the
ratio mesh / pairs (and mesh / pairs_busy_poll, for information: a busy-polling
rank keeps a core busy for as long as it waits, so it is not a candidate default). Uses allreduce_bench's worker part; every result is checked
against the exact sum. Writes <results>/links.json.

The verdict rule for the default links: pairs, unless the mesh is faster by more
than 10% at 4 KiB (latency) or at 256 MiB (bus bandwidth), at np=2 or np=3.
"""

import argparse
import os
import statistics
import sys

import allreduce_bench
from lib import formats, jsonio, launch, paths, tables

LINKS = ("mesh", "pairs", "pairs_busy_poll")
SIZES = [4 * formats.KiB, 256 * formats.MiB]
MODES = ("function", "chain")
MARGIN = 0.10


def _contender(np_, links):
    # Named tf_hvd_gloo so that lib/launch.py starts it with tfhvdrun; the run's tag
    # and the records' "links" field tell the two apart.
    return launch.Contender(
        "tf_hvd_gloo", "hvd", "tf_hvd (Gloo, %s)" % links,
        "tf_hvd over Gloo with HOROVOD_GLOO_LINKS=%s, shared memory off, tfhvdrun -np %d"
        % (links, np_), np_, {"HOROVOD_GLOO_LINKS": links, "HOROVOD_SHM_ALLREDUCE": "0"})


def _figure(rec):
    """The figure compared for one record: latency (us) or bus bandwidth (GB/s)."""
    if rec["bytes"] <= 64 * formats.KiB:
        return "latency_us", rec["latency_us"]["median"]
    return "busbw_gbps", rec["busbw_gbps"]


def summarize(records):
    """Rows (np, size, mode, figure, mesh median/spread, pairs median/spread, ratio)."""
    groups = {}
    for rec in records:
        if not rec["correct"]:
            continue
        key = (rec["ranks"], rec["bytes"], rec["mode"])
        name, value = _figure(rec)
        group = groups.setdefault(key, dict([("figure", name)] + [(l, []) for l in LINKS]))
        group[rec["links"]].append(value)
    rows = []
    for (np_, nbytes, mode), g in sorted(groups.items()):
        row = {"np": np_, "bytes": nbytes, "mode": mode, "figure": g["figure"]}
        for links in LINKS:
            vals = g[links]
            row[links] = {"median": statistics.median(vals) if vals else None,
                          "min": min(vals) if vals else None,
                          "max": max(vals) if vals else None, "rounds": len(vals)}
        # > 1: the mesh is better (lower latency or higher bandwidth).
        for other in LINKS[1:]:
            m, p = row["mesh"]["median"], row[other]["median"]
            key = "mesh_advantage" if other == "pairs" else "mesh_advantage_over_" + other
            if m and p:
                row[key] = (p / m) if g["figure"] == "latency_us" else (m / p)
            else:
                row[key] = None
        rows.append(row)
    return rows


def verdict(rows):
    """'pairs' unless the mesh wins by more than MARGIN on a deciding figure."""
    deciding = [r for r in rows if r["mesh_advantage"] is not None and (
        (r["bytes"] == 4 * formats.KiB and r["mode"] == "chain")
        or (r["bytes"] == 256 * formats.MiB and r["mode"] == "function"))]
    worse = [r for r in deciding if r["mesh_advantage"] > 1.0 + MARGIN]
    return ("mesh" if worse else "pairs"), deciding


def print_summary(rows):
    table = []
    for r in rows:
        unit = "us" if r["figure"] == "latency_us" else "GB/s"
        cells = [r["np"], formats.human_bytes(r["bytes"]), r["mode"], unit]
        for links in LINKS:
            s = r[links]
            cells += [formats.fmt(s["median"]), "%s..%s" % (formats.fmt(s["min"]),
                                                           formats.fmt(s["max"]))]
        cells.append(formats.fmt(r["mesh_advantage"]))
        cells.append(formats.fmt(r["mesh_advantage_over_pairs_busy_poll"]))
        table.append(cells)
    headers = ["np", "size", "mode", "unit"]
    for links in LINKS:
        headers += [links, "spread"]
    tables.print_table(
        "Gloo links: median over rounds of each run's median (spread = min..max of rounds); "
        "mesh_adv > 1 means the own mesh is better than pairs (busy: than pairs_busy_poll)",
        headers + ["mesh_adv", "mesh_adv_busy"], table)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nps", default="2,3", help="process counts (default 2,3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved runs per links kind and np (default 3)")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--sizes", default=None, help="message sizes (default 4K,256M)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one run may take (default 600)")
    parser.add_argument("--results-dir", default=paths.DEFAULT_RESULTS_DIR)
    parser.add_argument("--links", default=",".join(LINKS),
                        help="links kinds to run (default %(default)s)")
    parser.add_argument("--tag", default="links")
    args = parser.parse_args(argv)
    sizes = formats.parse_list(args.sizes, formats.parse_size) if args.sizes else SIZES
    cfg = allreduce_bench.make_config(sizes, MODES, args.quick)
    header = jsonio.run_header("links", args)
    results_dir = paths.ensure_dir(os.path.abspath(args.results_dir))
    run_dir = os.path.join(results_dir, "runs")
    log_dir = os.path.join(results_dir, "logs")
    records, runs, ok = [], [], True
    for np_ in formats.parse_list(args.nps, int):
        for round_ in range(args.rounds):
            for links in formats.parse_list(args.links):
                tag = "%s-np%d-%s-r%d" % (args.tag, np_, links, round_)
                run = launch.run_contender(_contender(np_, links), [allreduce_bench.PART],
                                           {allreduce_bench.PART: cfg}, run_dir, log_dir,
                                           args.timeout, tag)
                tables.log("[links] np=%d %-5s round %d: %s in %.1f s (load %.1f -> %.1f)%s"
                           % (np_, links, round_, run["status"], run["seconds"] or 0,
                              run["loadavg_1min"][0], run["loadavg_1min"][1],
                              ": " + run["error"] if run["error"] else ""))
                ok &= run["status"] == "ok"
                for rec in launch.part_records({tag: run}, allreduce_bench.PART):
                    rec.update({"links": links, "round": round_})
                    records.append(rec)
                runs.append({"np": np_, "links": links, "round": round_,
                             "status": run["status"], "seconds": run["seconds"],
                             "loadavg_1min": run["loadavg_1min"], "error": run["error"]})
    jsonio.finish_header(header)
    rows = summarize(records)
    print_summary(rows)
    choice, deciding = verdict(rows)
    tables.log("default links by the 10%% rule: %s (deciding rows: 4 KiB chain latency, "
               "256 MiB function bus bandwidth)" % choice)
    data = dict(header)
    data.update({"config": cfg, "runs": runs, "results": records, "summary": rows,
                 "verdict": choice})
    path = os.path.join(results_dir, "%s.json" % args.tag)
    jsonio.write_json(path, data)
    tables.log("wrote %s" % path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
