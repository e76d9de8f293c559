"""Finding and reading the complete steps of a checkpoint directory.

A complete step is a directory ``step-<8 digits>`` (renamed into place after its
``manifest.json`` was written); ``step-<8 digits>.partial-<token>`` is a step still being
written, or one whose run was killed while writing it, and is never read::

    >>> step_name(12), partial_name(12, "ab12")
    ('step-00000012', 'step-00000012.partial-ab12')
    >>> Step.newest("/nonexistent") is None
    True
"""

import json
import logging
import os
import re
import zipfile
import zlib

from tf_hvd.exceptions import CheckpointError

MANIFEST = "manifest.json"
_STEP = re.compile(r"^step-(\d{8})$")
_PARTIAL = re.compile(r"^step-(\d{8})\.partial-(\w+)$")
_log = logging.getLogger("tf_hvd")


def step_name(step):
    return "step-%08d" % int(step)


def partial_name(step, token):
    return "%s.partial-%s" % (step_name(step), token)


def _listing(root):
    try:
        return os.listdir(root)
    except FileNotFoundError:
        return []


def complete_steps(root):
    """The numbers of the complete steps under ``root``, oldest first."""
    found = []
    for name in _listing(root):
        m = _STEP.match(name)
        if m and os.path.isfile(os.path.join(root, name, MANIFEST)):
            found.append(int(m.group(1)))
    return sorted(found)


def partial_dirs(root):
    """(step, directory name, token) of every half-written step under ``root``."""
    found = []
    for name in _listing(root):
        m = _PARTIAL.match(name)
        if m:
            found.append((int(m.group(1)), name, m.group(2)))
    return sorted(found)


class Step(object):
    """One complete step: its manifest, and its files read with their size and CRC-32
    checked against it."""

    def __init__(self, root, step):
        self.root = str(root)
        self.step = int(step)
        self.directory = os.path.join(self.root, step_name(step))
        path = os.path.join(self.directory, MANIFEST)
        try:
            with open(path) as f:
                self.manifest = json.load(f)
        except (OSError, ValueError) as e:
            raise CheckpointError("checkpoint step %d: cannot read its manifest %s (%s)"
                                  % (self.step, path, e))
        self.size = int(self.manifest["size"])
        self.meta = self.manifest.get("meta", {})
        self.files = self.manifest["files"]

    @staticmethod
    def newest(root, say_ignored=True):
        """The newest complete step under ``root`` (None if there is none), saying which
        half-written steps newer than it are ignored."""
        steps = complete_steps(root)
        newest = steps[-1] if steps else None
        if say_ignored:
            for step, name, _ in partial_dirs(root):
                if newest is None or step > newest:
                    _log.warning("tf_hvd checkpoint: ignoring %s: a half-written step (no "
                                 "manifest; its run stopped while saving)",
                                 os.path.join(str(root), name))
        return None if newest is None else Step(root, newest)

    def path(self, name):
        return os.path.join(self.directory, *name.split("/"))

    def has(self, name):
        return name in self.files

    def verify(self, name):
        """Check file ``name``'s size and CRC-32 (a .npz file's: each member's) against
        the manifest; returns its path.
        CheckpointError names the file and what differs."""
        path = self.path(name)
        info = self.files.get(name)
        if info is None:
            raise CheckpointError("checkpoint step %d (%s) has no file %s; it has %s"
                                  % (self.step, self.directory, name,
                                     ", ".join(sorted(self.files)) or "none"))
        try:
            size = os.path.getsize(path)
        except OSError as e:
            raise CheckpointError("checkpoint file %s is missing (%s); the manifest lists "
                                  "it with %d bytes" % (path, e.strerror, info["size"]))
        if size != info["size"]:
            raise CheckpointError("checkpoint file %s has %d bytes, its manifest says %d "
                                  "(truncated or overwritten)" % (path, size, info["size"]))
        if "members" in info:
            _verify_members(path, info["members"])
            return path
        crc = 0
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(16 << 20), b""):
                crc = zlib.crc32(chunk, crc)
        if (crc & 0xFFFFFFFF) != info["crc32"]:
            raise CheckpointError("checkpoint file %s is corrupted: its CRC-32 is %08x, its "
                                  "manifest says %08x" % (path, crc & 0xFFFFFFFF,
                                                          info["crc32"]))
        return path


def _verify_members(path, members):
    """A .npz file checked member by member: the same members, each read whole with its
    CRC-32 equal to the manifest's (zip's own structure checked on the way)."""
    try:
        with zipfile.ZipFile(path) as z:
            names = sorted(z.namelist())
            if names != sorted(members):
                raise CheckpointError(
                    "checkpoint file %s is corrupted: it holds the members %s, its manifest "
                    "lists %s" % (path, ", ".join(names), ", ".join(sorted(members))))
            for name in names:
                crc = 0
                try:
                    with z.open(name) as f:  # zip checks the member's CRC-32 at its end
                        for chunk in iter(lambda: f.read(16 << 20), b""):
                            crc = zlib.crc32(chunk, crc)
                except zipfile.BadZipFile:
                    crc = None
                if crc != members[name]:
                    raise CheckpointError(
                        "checkpoint file %s is corrupted: its member %s does not have the "
                        "CRC-32 %08x its manifest says" % (path, name, members[name]))
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise CheckpointError("checkpoint file %s is corrupted: %s" % (path, e))
