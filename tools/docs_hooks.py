"""MkDocs hooks for tf_hvd's documentation site (mkdocs.yml, `hooks:`).

Pages being written on other branches are named in mkdocs.yml's ``extra.pages_to_come``:
their nav entries are left out while the page does not exist yet (any other nav entry
without its page still fails the strict build).

Two more jobs, each so that docs/ reads the same on GitHub and in the built site:

* Benchmark results live in python/benchmarks/results/, outside docs/. Pages link them as
  ``../python/benchmarks/results/NAME`` (right when browsing the repository); the site
  gets a copy of each result file under ``benchmark-results/`` and the links are pointed
  there, so `mkdocs build --strict` checks them like any other link.
* tf_hvd exports its public names lazily (``tf_hvd.__getattr__``), which a static reader
  (griffe, used by mkdocstrings) cannot follow. An API page writes ``::: tf_hvd.allreduce``;
  this hook replaces it with the module that defines the name (``::: tf_hvd.ops.allreduce``),
  found by reading the sources, so that the pages survive a name moving between modules.
"""

import logging
import os
import re

import griffe
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "python", "benchmarks", "results")
RESULTS_LINK = "../python/benchmarks/results/"
RESULTS_URI = "benchmark-results/"
_DIRECTIVE = re.compile(r"^::: (tf_hvd\.[A-Za-z_][A-Za-z0-9_]*)\s*$", re.M)
_package = {}
log = logging.getLogger("mkdocs.hooks.tf_hvd")


def _drop_missing(nav, docs_dir, to_come):
    kept = []
    for entry in nav:
        title, value = next(iter(entry.items())) if isinstance(entry, dict) else (None, entry)
        if isinstance(value, list):
            value = _drop_missing(value, docs_dir, to_come)
            if not value:
                continue
        elif value in to_come and not os.path.isfile(os.path.join(docs_dir, value)):
            log.info("docs: %s is not written yet; left out of the nav", value)
            continue
        kept.append({title: value} if title is not None else value)
    return kept


def on_config(config):
    to_come = set(config["extra"].get("pages_to_come", ()))
    if config["nav"] and to_come:
        config["nav"] = _drop_missing(config["nav"], config["docs_dir"], to_come)
    return config


def on_files(files, config):
    """Adds every benchmark result file to the site under benchmark-results/."""
    if os.path.isdir(RESULTS_DIR):
        for name in sorted(os.listdir(RESULTS_DIR)):
            if not name.startswith(".") and os.path.isfile(os.path.join(RESULTS_DIR, name)):
                files.append(File.generated(config, RESULTS_URI + name,
                                            abs_src_path=os.path.join(RESULTS_DIR, name)))
    return files


def _tf_hvd():
    if "tf_hvd" not in _package:
        _package["tf_hvd"] = griffe.load("tf_hvd", search_paths=[ROOT], allow_inspection=False)
    return _package["tf_hvd"]


def defining_path(dotted):
    """``tf_hvd.NAME`` -> the path of the object griffe can read (unchanged if it can)."""
    package = _tf_hvd()
    name = dotted.split(".", 1)[1]
    if name in package.members:
        return dotted
    found = []
    for module in package.modules.values():
        if module.filepath.name == "__init__.py" or module.name.startswith("_"):
            continue  # subpackages (keras, runner) have pages of their own
        member = module.members.get(name)
        if member is not None and not member.is_alias:
            found.append(member.path)
    if len(found) != 1:
        raise PluginError("docs: %s is defined in %s module(s) of tf_hvd (%s); write the full "
                         "path in the API page" % (dotted, len(found), ", ".join(found)))
    return found[0]


def on_page_markdown(markdown, page, config, files):
    depth = page.file.src_uri.count("/")
    markdown = markdown.replace(RESULTS_LINK, "../" * depth + RESULTS_URI)
    return _DIRECTIVE.sub(lambda m: "::: " + defining_path(m.group(1)), markdown)
