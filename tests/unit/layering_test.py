"""No include runs upward: each folder of daemon/ includes only the layers below it.

The layers, lowest first, are the libraries daemon/CMakeLists.txt builds; this
table is the one place that says which may use which. A new folder must be
added here, or the test fails and names it.
"""
import pathlib
import re
import sys
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# folder -> the project folders its files may include (besides itself).
ALLOWED = {
    # The bottom: what includes nothing of ours.
    "bpf": set(),
    "bpf/asm": set(),
    "preload": set(),  # the library record preloads into a command: nothing of ours
    "model": set(),  # the Profile and frame names: what every layer above speaks
    "daemon/procfs": set(),  # /proc, read in one place
    "config": {"daemon/procfs"},  # its bounded file reader
    "daemon/containers": {"daemon/procfs"},
    "daemon/elf": set(),  # the one ELF reader
    "daemon/gpu": set(),
    # Command-line flags: the flag table facility and record's options, low
    # enough that cli (the parser, --help) and control (the record request's
    # codec) read one table.
    "daemon/flags": set(),
    # Writers and pushers of profiles.
    "exporters": {"model"},
    # Reading processes and binaries.
    "daemon/python": {"bpf", "daemon/elf", "daemon/procfs"},
    "daemon/unwind": {"bpf", "daemon/elf"},
    "daemon/symbolizer": {"daemon/elf", "daemon/procfs"},
    "daemon/control": {"model", "daemon/flags"},
    "daemon/loader": {"bpf", "daemon/unwind", "daemon/procfs"},
    # The one decoder of the ring buffer's records (a code copy parsed by python).
    "daemon/records": {"bpf", "daemon/python"},
    # Records to profiles, and records to counters.
    "daemon/recording": {"bpf", "model", "daemon/loader", "daemon/records", "daemon/elf",
                         "daemon/procfs", "daemon/python", "daemon/unwind", "daemon/symbolizer",
                         "daemon/containers", "daemon/gpu"},
    "daemon/accounting": {"bpf", "model", "exporters", "daemon/loader", "daemon/records",
                          "daemon/gpu", "daemon/procfs"},
    "daemon/reports": {"model", "exporters"},
    # The daemon: its loop, windows, metrics, pages (reports), the control server.
    "daemon/service": {"bpf", "model", "exporters", "config", "daemon/loader", "daemon/records",
                       "daemon/recording", "daemon/unwind", "daemon/accounting",
                       "daemon/control", "daemon/python", "daemon/symbolizer",
                       "daemon/containers", "daemon/gpu", "daemon/reports", "daemon/procfs"},
    # The commands: parse, call, print.
    "daemon/cli": {"bpf", "model", "exporters", "config", "daemon/flags", "daemon/loader",
                   "daemon/recording", "daemon/unwind", "daemon/elf", "daemon/accounting",
                   "daemon/control", "daemon/python", "daemon/symbolizer", "daemon/containers",
                   "daemon/service", "daemon/reports", "daemon/gpu", "daemon/procfs"},
    "daemon": {"daemon/cli"},  # main.cc
}

INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def folder_of(path):
    """The layer a project path belongs to: its folder, or None outside the table."""
    parent = str(pathlib.PurePosixPath(path).parent)
    return parent if parent in ALLOWED else None


class LayeringTest(unittest.TestCase):
    def test_every_source_folder_is_a_known_layer(self):
        for folder in ["daemon", "bpf", "model", "exporters", "config", "preload"]:
            for path in (ROOT / folder).rglob("*"):
                if path.suffix in (".cc", ".h", ".c"):
                    rel = path.relative_to(ROOT).as_posix()
                    self.assertIsNotNone(folder_of(rel), f"{rel}: its folder is not in ALLOWED")

    def test_no_include_runs_upward(self):
        wrong = []
        for layer in ALLOWED:
            for path in sorted((ROOT / layer).glob("*")):
                if path.suffix not in (".cc", ".h", ".c"):
                    continue
                for included in INCLUDE.findall(path.read_text()):
                    target = folder_of(included)
                    if target is None or target == layer:
                        continue  # a generated header, a skeleton, or its own layer
                    if target not in ALLOWED[layer]:
                        wrong.append(f"{path.relative_to(ROOT)} includes {included}")
        self.assertEqual(wrong, [], "includes that run upward or sideways:\n" + "\n".join(wrong))


if __name__ == "__main__":
    sys.exit(unittest.main())
