"""What the e2e workloads that run on every CPython from 2.7 on need from the
interpreter, with the same meaning on each: CPU clocks, a monotonic clock,
the kernel's id of a thread, and a line printed at once.

On 3.7+ these are the time and threading functions themselves; before,
clock_gettime and gettid through ctypes (2.7's time.clock is process CPU
time, which a single-threaded program may use as its thread's)."""
import ctypes
import sys
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
_CLOCK_MONOTONIC = 1
_CLOCK_THREAD_CPUTIME_ID = 3
_SYS_GETTID = 186  # x86_64


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _clock(clock_id):
    def read():
        value = _Timespec()
        if _libc.clock_gettime(clock_id, ctypes.byref(value)) != 0:
            raise OSError(ctypes.get_errno(), "clock_gettime")
        return value.tv_sec + value.tv_nsec * 1e-9
    return read


# CPU seconds of the calling thread.
thread_time = getattr(time, "thread_time", None) or _clock(_CLOCK_THREAD_CPUTIME_ID)
# CPU seconds of the process: time.process_time, or time.clock on 2.7.
process_time = getattr(time, "process_time", None) or time.clock
monotonic = getattr(time, "monotonic", None) or _clock(_CLOCK_MONOTONIC)


def native_thread_id():
    """The calling thread's kernel tid."""
    get = getattr(threading, "get_native_id", None)
    return get() if get else _libc.syscall(_SYS_GETTID)


def say(line):
    """Prints `line` and flushes, so the test reads it at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
