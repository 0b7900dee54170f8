"""Prints the line tables of real code objects and the lines the interpreter
itself assigns to every instruction, for tests/unit/python/python_line_table_test.cc.

Output, per code object (offsets are bytes from the first instruction, one
entry per 2-byte code unit, -1 where the interpreter has no line):
    code <first_line> <line table as hex, or '-' when empty> <qualname>
    lines <line at offset 0> <line at offset 2> ...
    positions <...>          (3.11+: the lines of co_positions())
"""
import dis
import os
import sys
import types

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
    n = len(code.co_code) // 2
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
            while j < len(starts) and starts[j][0] <= 2 * i:
                line = starts[j][1]
                j += 1
            lines[i] = line
    return lines


def walk(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from walk(const)


def main():
    sources = [("<synthetic>", SYNTHETIC)]
    libdir = os.path.dirname(os.__file__)
    for name in ("dis.py", "argparse.py", "typing.py", "json/decoder.py", "asyncio/base_events.py"):
        with open(os.path.join(libdir, name), encoding="utf-8") as f:
            sources.append((name, f.read()))
    for name, text in sources:
        for code in walk(compile(text, name, "exec")):
            table = code.co_lnotab if sys.version_info < (3, 10) else code.co_linetable
            qualname = getattr(code, "co_qualname", code.co_name)
            print("code", code.co_firstlineno, table.hex() or "-", qualname)
            print("lines", *expected_lines(code))
            if sys.version_info >= (3, 11):
                positions = [-1 if p[0] is None else p[0] for p in code.co_positions()]
                print("positions", *positions)


main()
