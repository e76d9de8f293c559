"""MkDocs hooks for tf_hvd's documentation site (mkdocs.yml, `hooks:`).

Two jobs, each so that docs/ reads the same on GitHub and in the built site:

* Benchmark results (python/benchmarks/results/), example programs (python/examples/) and
  the experiments behind the figures (experiments/) live outside docs/. Pages link them as
  ``../python/benchmarks/results/NAME``, ``../python/examples/NAME`` or
  ``../experiments/NAME`` (right when browsing the repository); the site gets a copy of
  every file under them (``benchmark-results/``, ``examples/``, ``experiments/``; but the
  files of UNPUBLISHED, whose links are written for GitHub only), a generated index page for
  each folder that a page links as ``.../FOLDER/``, and the links are pointed there, so
  `mkdocs build --strict` checks them like any other link.
* tf_hvd exports its public names lazily (``tf_hvd.__getattr__``), which a static reader
  (griffe, used by mkdocstrings) cannot follow. An API page writes ``::: tf_hvd.allreduce``;
  this hook replaces it with the module that defines the name (``::: tf_hvd.ops.allreduce``),
  found by reading the sources, so that the pages survive a name moving between modules.
"""

import os
import re

import griffe
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Folders of the repository published into the site: (repository folder, site folder).
PUBLISHED = [("python/benchmarks/results", "benchmark-results"),
             ("python/examples", "examples"),
             ("experiments", "experiments")]
# Files of those folders left out of the site: the old performance page, kept as the lab's
# notebook, links the docs as ../docs/PAGE.md (right on GitHub, not in the site).
UNPUBLISHED = {"experiments/performance-notebook.md"}
_FOLDER_LINK = re.compile(
    r"\]\(((?:\.\./)*(?:benchmark-results|examples|experiments)/(?:[^)\s]*/)?)\)")
_README_LINK = re.compile(
    r"\]\(((?:\.\./)*(?:benchmark-results|examples|experiments)/(?:[^)\s]*/)?)README\.md([#)])")
_DIRECTIVE = re.compile(r"^::: (tf_hvd\.[A-Za-z_][A-Za-z0-9_]*)\s*$", re.M)
_package = {}
# Subpackages that are one layer of the top-level API split by job (tf_hvd.ops: naming,
# raw, reduce, exchange, gradients), searched like tf_hvd's own modules.
SPLIT_PACKAGES = ("ops",)


def on_files(files, config):
    """Adds every file of the PUBLISHED folders to the site, and an index page per folder."""
    for repo_dir, site_dir in PUBLISHED:
        top = os.path.join(ROOT, repo_dir)
        for here, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            rel = os.path.relpath(here, top)
            uri = site_dir + ("" if rel == "." else "/" + rel.replace(os.sep, "/"))
            shown = sorted(n for n in names if not n.startswith(".") and os.path.relpath(
                os.path.join(here, n), ROOT).replace(os.sep, "/") not in UNPUBLISHED)
            # A folder's README.md and its index page would be the same page of the site: the
            # index page shows the README, then the listing.
            readme = "README.md" in shown
            shown = [n for n in shown if n != "README.md"]
            for name in shown:
                files.append(File.generated(config, uri + "/" + name,
                                            abs_src_path=os.path.join(here, name)))
            listing = "".join("- [%s/](%s/index.md)\n" % (d, d) for d in dirs) + "".join(
                "- [%s](%s)\n" % (n, n) for n in shown)
            if readme:
                with open(os.path.join(here, "README.md")) as f:
                    page = "%s\n\n## Files\n\n%s" % (f.read().rstrip(), listing)
            else:
                page = "# %s/%s\n\n%s" % (repo_dir, "" if rel == "." else rel, listing)
            files.append(File.generated(config, uri + "/index.md", content=page))
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
    modules = list(package.modules.values())
    for split in SPLIT_PACKAGES:  # their modules define names of the top-level API
        modules += list(package.modules[split].modules.values())
    for module in modules:
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
    for repo_dir, site_dir in PUBLISHED:
        markdown = markdown.replace("../%s/" % repo_dir, "../" * depth + site_dir + "/")
    # A link to a folder, or to a folder's README.md, goes to its generated index page.
    markdown = _FOLDER_LINK.sub(lambda m: "](%sindex.md)" % m.group(1), markdown)
    markdown = _README_LINK.sub(lambda m: "](%sindex.md%s" % (m.group(1), m.group(2)), markdown)
    return _DIRECTIVE.sub(lambda m: "::: " + defining_path(m.group(1)), markdown)
