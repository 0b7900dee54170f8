"""Makes and runs code that dies young, in a loop, for --seconds, for
tests/e2e/test_imports.py: exec'd module code, eval'd expressions, compiled
functions, lambdas and comprehensions made from fresh source each time, and
a module of its own reloaded. Each code object is freed right after it ran,
and its address soon reused. Prints one JSON line with its pid and counts."""
import importlib
import json
import os
import sys
import tempfile
import time

parser_seconds = 10.0
if len(sys.argv) > 2 and sys.argv[1] == "--seconds":
    parser_seconds = float(sys.argv[2])

module_dir = tempfile.mkdtemp(prefix="pystrobe-reload-")
with open(os.path.join(module_dir, "churned.py"), "w") as f:
    f.write("total = 0\nfor i in range(20000):\n    total += i * i\n")
sys.path.insert(0, module_dir)
import churned  # noqa: E402

counts = {"exec": 0, "eval": 0, "lambda": 0, "reload": 0}
end = time.monotonic() + parser_seconds
n = 0
while time.monotonic() < end:
    n += 1
    # A module body of its own (fresh source: a new code object every time).
    exec(f"acc = 0\nfor i in range({3000 + n % 7}):\n    acc += i % {n % 13 + 2}\n", {})
    counts["exec"] += 1
    # An expression, and a comprehension inside it.
    eval(f"sum([x * {n % 5 + 1} for x in range(3000)])")
    counts["eval"] += 1
    # A function made by exec, with a lambda and a generator inside, dropped.
    namespace = {}
    exec(f"def step_{n % 3}(k):\n"
         f"    f = lambda v: v * {n % 11 + 1} + 1\n"
         f"    return sum(f(v) for v in range(k))\n", namespace)
    namespace[f"step_{n % 3}"](3000)
    counts["lambda"] += 1
    if n % 10 == 0:
        importlib.reload(churned)
        counts["reload"] += 1

print(json.dumps({"pid": os.getpid(), "counts": counts}), flush=True)
