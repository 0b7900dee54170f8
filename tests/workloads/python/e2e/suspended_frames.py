"""Hot loops inside a generator and a coroutine, for tests/e2e/test_record_python.py.

From 3.11 a running generator's or coroutine's frame lives in its object on
the heap, not on the thread's data stack beside its caller's, so a walk that
reads neighbouring frames together must still follow it there and back:
  <module> -> main -> run_generators -> outer_gen -> inner_gen (hot)
  <module> -> main -> run_coroutines -> outer_coro -> inner_coro (hot)
Each half runs for --seconds / 2 of CPU time (so that its sample count does
not depend on the machine's load). Prints "ready" and, at the end, one JSON
line with its pid."""
import argparse
import json
import os
import time


def inner_gen(end):
    x = 0
    while time.process_time() < end:
        for i in range(2000):
            x += i
        yield x


def outer_gen(end):
    yield from inner_gen(end)


def run_generators(end):
    for _ in outer_gen(end):
        pass


class Pause:
    """An awaitable that hands control back to the driver once."""

    def __await__(self):
        yield


async def inner_coro(end):
    x = 0
    while time.process_time() < end:
        for i in range(2000):
            x += i
        await Pause()
    return x


async def outer_coro(end):
    return await inner_coro(end)


def run_coroutines(end):
    coroutine = outer_coro(end)
    try:
        while True:
            coroutine.send(None)
    except StopIteration:
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2)
    args = parser.parse_args()
    print("ready", flush=True)
    run_generators(time.process_time() + args.seconds / 2)
    run_coroutines(time.process_time() + args.seconds / 2)
    print(json.dumps({"pid": os.getpid()}), flush=True)


main()
