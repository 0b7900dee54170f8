"""The work subinterpreters.py runs in four sub-interpreters: each function
spins for `seconds` and reports what its own thread's CPU clock measured.
A module of its own, because a sub-interpreter imports the function it is
handed by name (3.14+)."""
import threading
import time


def spin(seconds):
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        for i in range(200):
            x += i
    return x


def measured(function, seconds):
    from concurrent import interpreters
    start = time.thread_time()
    spin(seconds)
    return {"function": function, "cpu_s": time.thread_time() - start,
            "tid": threading.get_native_id(), "interpreter": interpreters.get_current().id}


def work_a(seconds):
    return measured("work_a", seconds)


def work_b(seconds):
    return measured("work_b", seconds)


def work_c(seconds):
    return measured("work_c", seconds)


def work_d(seconds):
    return measured("work_d", seconds)
