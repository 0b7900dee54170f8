"""An asyncio service with named tasks, for tests/e2e/test_asyncio.py.

Tasks, all children of the main task ("main"), which awaits them through a
TaskGroup (3.11+) or asyncio.gather (3.8-3.10):
  io-0 .. io-4  loop in serve > handle_request > query_db, which awaits an
                asyncio.sleep: suspended about 95% of the time
  cpu-0         loops in batch_loop > crunch, burning CPU, yielding to the
                loop between batches with asyncio.sleep(0)

With --pure-python the C _asyncio module is blocked, so the pure-Python
Task and Future run. Prints one JSON line and then "ready" once every task
has started:
  {"pid": P, "c_tasks": bool, "lines": {"query_db": N, "crunch": N, ...}}
Runs until killed, or for --seconds S, at whose end it prints
"cpu_seconds S", the CPU time it had (what a test judges sample counts by), and
"wall_seconds S", how long it ran (S or more: its timer fires late on a busy
machine).
"""
import json
import os
import sys
import time

STARTED = time.monotonic()

if "--pure-python" in sys.argv:
    sys.modules["_asyncio"] = None  # import _asyncio fails: asyncio falls back to Python

import asyncio  # noqa: E402

HERE = open(__file__, encoding="utf-8").read().splitlines()


def line_of(tag):
    """The number of the line ending with the comment '# <tag>'."""
    for number, text in enumerate(HERE, start=1):
        if text.rstrip().endswith("# " + tag):
            return number
    raise KeyError(tag)


started = set()


async def query_db(request):
    await asyncio.sleep(0.05)  # query_db
    return request


async def handle_request(request):
    result = await query_db(request)  # handle_request
    return result


async def serve(name):
    started.add(name)
    request = 0
    while True:
        request += 1
        await handle_request(request)  # serve


def crunch(n):
    total = 0
    for i in range(n):  # crunch
        total += i * i
    return total


async def batch_loop(name):
    started.add(name)
    while True:
        deadline = time.process_time() + 0.05
        while time.process_time() < deadline:
            crunch(20000)  # batch_loop
        await asyncio.sleep(0)


def exit_with_cpu_seconds():
    # Called late when the machine is busy (the loop is in a batch, or not
    # scheduled): how long it really ran is the wall time it printed.
    # It ends even when its reader has gone (a killed test): the print then
    # raises, which the loop would log and carry on after, spinning for good.
    try:
        print(f"cpu_seconds {time.process_time():.6f}\n"
              f"wall_seconds {time.monotonic() - STARTED:.6f}", flush=True)
    finally:
        os._exit(0)


async def main():
    asyncio.current_task().set_name("main")
    coroutines = [(serve(f"io-{i}"), f"io-{i}") for i in range(5)]
    coroutines.append((batch_loop("cpu-0"), "cpu-0"))

    async def announce():
        while len(started) < 6:
            await asyncio.sleep(0.01)
        print(json.dumps({
            "pid": os.getpid(),
            "c_tasks": sys.modules.get("_asyncio") is not None,
            "lines": {tag: line_of(tag) for tag in
                      ("query_db", "handle_request", "serve", "crunch", "batch_loop")},
        }), flush=True)
        print("ready", flush=True)

    asyncio.ensure_future(announce())
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else None
    if seconds is not None:
        asyncio.get_running_loop().call_later(seconds, exit_with_cpu_seconds)
    if hasattr(asyncio, "TaskGroup"):
        async with asyncio.TaskGroup() as group:
            for coroutine, name in coroutines:
                group.create_task(coroutine, name=name)
    else:
        tasks = []
        for coroutine, name in coroutines:
            tasks.append(asyncio.ensure_future(coroutine))
            tasks[-1].set_name(name)
        await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main())
