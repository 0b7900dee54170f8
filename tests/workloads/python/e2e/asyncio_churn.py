"""An asyncio program whose tasks change all the time, for
tests/e2e/test_asyncio.py: `dump --asyncio` reads it while thousands of tasks
a second are created, awaited through nested gathers, and finish; a reader
must never crash or fail on what changes under it.

One long-lived task is named "ünï \"q\" 名" (non-ASCII, quotes) and waits in
steady_wait. Prints {"pid": P} then "ready"; runs until killed or --seconds S.
"""
import asyncio
import json
import os
import sys


async def leaf(i):
    await asyncio.sleep(0.001 * (i % 3))
    return i


async def fan_out(n):
    return sum(await asyncio.gather(*(leaf(i) for i in range(n))))


async def churn():
    round_ = 0
    while True:
        round_ += 1
        tasks = [asyncio.ensure_future(fan_out(5 + round_ % 7)) for _ in range(20)]
        for task in tasks:
            task.set_name(f"churn-{round_}-{id(task) % 1000}")
        await asyncio.gather(*tasks)


async def steady_wait():
    await asyncio.sleep(3600)


async def main():
    steady = asyncio.ensure_future(steady_wait())
    steady.set_name("ünï \"q\" 名")
    workers = [asyncio.ensure_future(churn()) for _ in range(3)]
    await asyncio.sleep(0.2)
    print(json.dumps({"pid": os.getpid()}), flush=True)
    print("ready", flush=True)
    if "--seconds" in sys.argv:
        asyncio.get_running_loop().call_later(float(sys.argv[sys.argv.index("--seconds") + 1]),
                                              os._exit, 0)
    await asyncio.gather(steady, *workers)


asyncio.run(main())
