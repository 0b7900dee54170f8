"""A task made but not stepped by its loop for a while: for test_asyncio.py.

main() creates the task "waiting-to-start" (its coroutine never_started() has
not run a line yet), then holds the event loop for --hold seconds in a plain
CPU loop (hold_the_loop, no await), then lets the task run and exits. The
task is ready, not suspended in an await: `record --asyncio --off-cpu` must
not charge it [await] time for the hold. At its end it prints "cpu_seconds S",
the CPU time it had.
"""
import asyncio
import sys
import time


async def never_started():
    await asyncio.sleep(0)


def hold_the_loop(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def main():
    hold = float(sys.argv[sys.argv.index("--hold") + 1]) if "--hold" in sys.argv else 2.0
    task = asyncio.ensure_future(never_started())
    if hasattr(task, "set_name"):
        task.set_name("waiting-to-start")
    hold_the_loop(hold)
    await task


if __name__ == "__main__":
    asyncio.run(main())
    print(f"cpu_seconds {time.process_time():.6f}", flush=True)
