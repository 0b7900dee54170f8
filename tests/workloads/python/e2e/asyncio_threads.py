"""Asyncio tasks wherever CPython keeps them, for tests/e2e/test_asyncio.py.

From 3.14 a C task is on the list of the thread that made it, and moves to
its interpreter's list when that thread ends; eager tasks start without
going through the loop. This program has one of each:
  eager-0, eager-1  started by an eager task factory (3.12+), awaited by
                    the main task through gather, waiting in eager_wait
  thread-main       the main task of a loop run by a second thread, waiting
                    in thread_wait
  orphan            made on a loop of a thread that has ended, still
                    pending, waiting in orphan_wait
Prints {"pid": P, "eager": bool} then "ready"; runs until killed or for
--seconds S.
"""
import asyncio
import json
import os
import sys
import threading

orphan = None


async def orphan_wait():
    await asyncio.sleep(3600)


def ended_thread():
    global orphan
    loop = asyncio.new_event_loop()
    orphan = loop.create_task(orphan_wait())
    orphan.set_name("orphan")
    loop.run_until_complete(asyncio.sleep(0.01))  # steps it once, then the thread ends


async def thread_wait(started):
    asyncio.current_task().set_name("thread-main")
    started.set()
    await asyncio.sleep(3600)


async def eager_wait():
    await asyncio.sleep(3600)


async def main(thread_started):
    eager = hasattr(asyncio, "eager_task_factory")
    tasks = []
    if eager:
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        for i in range(2):
            tasks.append(asyncio.get_running_loop().create_task(eager_wait()))
            tasks[-1].set_name(f"eager-{i}")
    asyncio.current_task().set_name("main")
    while not thread_started.is_set():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    print(json.dumps({"pid": os.getpid(), "eager": eager}), flush=True)
    print("ready", flush=True)
    if "--seconds" in sys.argv:
        asyncio.get_running_loop().call_later(float(sys.argv[sys.argv.index("--seconds") + 1]),
                                              os._exit, 0)
    # A future, not a coroutine: gather would make a task of one.
    await asyncio.gather(*tasks, asyncio.get_running_loop().create_future())


if __name__ == "__main__":
    finished = threading.Thread(target=ended_thread)
    finished.start()
    finished.join()
    started = threading.Event()
    threading.Thread(target=lambda: asyncio.run(thread_wait(started)), daemon=True).start()
    asyncio.run(main(started))
