"""The one tail of a part driver (allreduce_bench.py, fusion_bench.py, training_bench.py):
run every contender, print the tables, write <tag>.json and <tag>.png, exit with 0 only when
every contender ran. compare.py calls write_part() through each part's report() with the
medians of its rounds.
"""

from lib import jsonio, launch, paths, tables


def write_part(module, header, contenders, runs, results_dir, tag, records=None, extra=None,
               table_args=()):
    """Prints the part's tables, writes <tag>.json/.png and returns the records.

    module: the part (its PART, print_tables(records, contenders, *table_args) and plot());
    records: the part's records (default: those in runs); extra: fields added to the JSON,
    or a function of the records that returns them.
    """
    if records is None:
        records = launch.part_records(runs, module.PART)
    module.print_tables(records, contenders, *table_args)
    data = dict(header)
    data["contenders"] = launch.contenders_section(contenders, runs)
    data["results"] = records
    data.update((extra(records) if callable(extra) else extra) or {})
    json_path = "%s/%s.json" % (results_dir, tag)
    png_path = "%s/%s.png" % (results_dir, tag)
    jsonio.write_json(json_path, data)
    if records:
        module.plot(records, contenders, header, png_path)
    tables.log("wrote %s and %s" % (json_path, png_path))
    return records


def run_part(module, name, args, cfg):
    """A part driver's main() after its arguments: runs the part on every contender
    (launch.run_all), reports it with module.report() and returns the exit status."""
    header = jsonio.run_header(name, args)
    header["config"] = cfg
    contenders, runs = launch.run_all(name, {module.PART: module}, args, {module.PART: cfg},
                                      module.CONTENDERS)
    jsonio.finish_header(header)
    module.report(header, contenders, runs, paths.ensure_dir(args.results_dir),
                  tag=args.tag or name)
    return 0 if all(r["status"] == "ok" for r in runs.values()) else 1

