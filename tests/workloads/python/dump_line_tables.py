# -*- coding: utf-8 -*-
"""Prints the line tables of real code objects and the lines the interpreter
itself assigns to every instruction, for tests/unit/python/python_line_table_test.cc.

Output: first the bytes per entry (2: one per code unit on 3.6+, whose
instructions are 2 bytes; 1: one per byte on 2.7, whose are 1 or 3), then,
per code object (offsets are bytes from the first instruction, -1 where the
interpreter has no line):
    unit <bytes per entry>
    code <first_line> <line table as hex, or '-' when empty> <qualname>
    lines <line at offset 0> <line at offset unit> ...
    positions <...>          (3.11+: the lines of co_positions())
Runs on 2.7 too.
"""
from __future__ import print_function

import binascii
import dis
import io
import os
import sys
import types

UNIT = 2 if sys.version_info >= (3, 6) else 1

# Constructs whose tables are not trivial: big line gaps (multi-entry
# deltas), long bodies (big byte deltas), multi-line expressions,
# comprehensions, generators, lambdas, try/finally, with, nested functions.
SYNTHETIC = (
    "import contextlib\n"
    "def gaps(x):\n"
    "    a = x + 1\n" + "\n" * 300 + "    b = a * 2\n" + "\n" * 70000 + "    return b\n"
    "def long_body(x):\n" + "".join("    x = x + %d\n" % i for i in range(400)) + "    return x\n"
    "def multi_line(a, b):\n"
    "    return (a +\n"
    "            b *\n"
    "            (a -\n"
    "             b))\n"
    "@contextlib.contextmanager\n"
    "def decorated():\n"
    "    try:\n"
    "        yield [i * i for i in range(3)\n"
    "               if i]\n"
    "    finally:\n"
    "        pass\n"
    "def uses_with(path):\n"
    "    with open(path) as f:\n"
    "        return (lambda y: y.read())(f)\n"
    "def gen():\n"
    "    for i in range(10):\n"
    "        yield {k: i for k in 'ab'}\n"
    "def outer():\n"
    "    def inner():\n"
    "        return 'é' + '\\u20ac'\n"
    "    while True:\n"
    "        try:\n"
    "            return inner()\n"
    "        except Exception:\n"
    "            continue\n"
)


def expected_lines(code):
    n = len(code.co_code) // UNIT
    lines = [-1] * n
    if sys.version_info >= (3, 10):
        for start, end, line in code.co_lines():
            for off in range(start, min(end, 2 * n), 2):
                lines[off // 2] = -1 if line is None else line
    else:
        starts = list(dis.findlinestarts(code))
        line = code.co_firstlineno
        j = 0
        for i in range(n):
            while j < len(starts) and starts[j][0] <= UNIT * i:
                line = starts[j][1]
                j += 1
            lines[i] = line
    return lines


def walk(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            for inner in walk(const):
                yield inner


def main():
    sources = [("<synthetic>", SYNTHETIC)]
    libdir = os.path.dirname(os.__file__)
    print("unit", UNIT)
    # typing and asyncio are not in 2.7's library.
    for name in ("dis.py", "argparse.py", "typing.py", "json/decoder.py", "asyncio/base_events.py"):
        path = os.path.join(libdir, name)
        if sys.version_info >= (3,) or os.path.exists(path):
            with io.open(path, encoding="utf-8") as f:
                sources.append((name, f.read()))
    for name, text in sources:
        # dont_inherit: not this file's print_function (2.7's dis.py has print statements).
        for code in walk(compile(text, name, "exec", 0, True)):
            table = code.co_lnotab if sys.version_info < (3, 10) else code.co_linetable
            qualname = getattr(code, "co_qualname", code.co_name)
            print("code", code.co_firstlineno, binascii.hexlify(table).decode("ascii") or "-",
                  qualname)
            print("lines", " ".join(str(line) for line in expected_lines(code)))
            if sys.version_info >= (3, 11):
                positions = [-1 if p[0] is None else p[0] for p in code.co_positions()]
                print("positions", " ".join(str(line) for line in positions))


main()
