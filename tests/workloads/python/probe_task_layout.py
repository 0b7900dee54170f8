"""Prints, as "name=value" lines, where this interpreter's _asyncio.Future
and _asyncio.Task keep the fields pystrobe reads (daemon/python/object_layout.cc),
found by looking for known objects in live tasks' memory through ctypes.
_asyncio's structs are in no header, so tests/unit/python/asyncio_readers_test.cc
checks the table against this. Not product code."""
import asyncio
import ctypes
import sys


def words(address, count=40):
    return list((ctypes.c_uint64 * count).from_address(address))


def offset_of(address, target):
    """The one offset in the object at `address` that holds pointer `target`."""
    found = [i * 8 for i, value in enumerate(words(address)) if value == target]
    if len(found) != 1:
        raise SystemExit(f"pointer found at {found}, expected exactly once")
    return found[0]


async def wait_for(future):
    await future


async def main():
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    task = loop.create_task(wait_for(future))
    task.set_name("probe-task")
    await asyncio.sleep(0)
    if type(task).__module__ != "_asyncio":
        raise SystemExit("no C _asyncio tasks")
    print("future_loop=%d" % offset_of(id(task), id(loop)))
    print("task_coro=%d" % offset_of(id(task), id(task.get_coro())))
    print("task_name=%d" % offset_of(id(task), id(task.get_name())))
    print("task_fut_waiter=%d" % offset_of(id(task), id(future)))
    first = lambda _: None  # noqa: E731
    task.add_done_callback(first)
    print("future_callback0=%d" % offset_of(id(task), id(first)))
    before = words(id(task))
    task.add_done_callback(lambda _: None)
    after = words(id(task))
    grown = [i * 8 for i in range(40) if before[i] == 0 and after[i] != 0]
    print("future_callbacks=%d" % grown[0])
    # fut_state: 0 pending, 1 cancelled, 2 finished.
    pending, cancelled, finished = (loop.create_future() for _ in range(3))
    cancelled.cancel()
    finished.set_result(None)
    size = type(pending).__basicsize__
    raw = [ctypes.string_at(id(f), size) for f in (pending, cancelled, finished)]
    states = [at for at in range(16, size - 3, 4)
              if [int.from_bytes(r[at:at + 4], "little") for r in raw] == [0, 1, 2]]
    print("future_state=%d" % states[0])
    future.set_result(None)
    await task


print("version_minor=%d" % sys.version_info[1])
asyncio.run(main())
