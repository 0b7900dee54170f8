"""Many asyncio tasks that burn CPU in every step, for tests/e2e/test_asyncio.py.

Each of 40 tasks ("busy-0" .. "busy-39") loops in work > step: step yields to
the loop with asyncio.sleep(0) and then burns about 0.3 ms of CPU in its own
frame. The loop is stepping some task nearly all the time, so a reader of the
task chains often reads one while the loop steps it: a chain read then must
not be taken for a suspended one (it would end in step's busy line).
With --pure-python the C _asyncio module is blocked (pure-Python tasks).
Prints {"pid": P, "busy_line": N} then "ready"; runs until --seconds S.
"""
import json
import os
import sys
import time

if "--pure-python" in sys.argv:
    sys.modules["_asyncio"] = None  # import _asyncio fails: asyncio falls back to Python

import asyncio  # noqa: E402

HERE = open(__file__, encoding="utf-8").read().splitlines()
BUSY_LINE = next(n for n, text in enumerate(HERE, start=1) if text.rstrip().endswith("# BUSY"))


async def step():
    await asyncio.sleep(0)
    deadline = time.perf_counter() + 0.0003
    while time.perf_counter() < deadline:  # BUSY
        pass


async def work():
    while True:
        await step()


async def main():
    for i in range(40):
        asyncio.ensure_future(work()).set_name(f"busy-{i}")
    await asyncio.sleep(0.1)
    print(json.dumps({"pid": os.getpid(), "busy_line": BUSY_LINE}), flush=True)
    print("ready", flush=True)
    await asyncio.sleep(float(sys.argv[sys.argv.index("--seconds") + 1]))
    os._exit(0)


asyncio.run(main())
