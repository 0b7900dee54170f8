"""What the e2e workloads that run on every CPython from 2.7 on need from the
interpreter, with the same meaning on each: CPU clocks, a monotonic clock,
the kernel's id of a thread, and a line printed at once.

On 3.7+ these are the time and threading functions themselves. Before, the
clocks a hot loop reads are C functions still (time.clock is 2.7's process
CPU time, time.time its monotonic enough clock), so that no Python frame of
a clock shows in the samples; only thread_time, read once per thread at the
end, goes through ctypes."""
import ctypes
import sys
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
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


# CPU seconds of the calling thread (a Python function before 3.7).
thread_time = getattr(time, "thread_time", None) or _clock(_CLOCK_THREAD_CPUTIME_ID)
# CPU seconds of the process: time.process_time, or time.clock on 2.7.
process_time = getattr(time, "process_time", None) or time.clock
# CPU seconds of the calling thread of a single-threaded program, from a C
# function on every version: thread_time, or the process's CPU time before 3.7.
cpu_time = getattr(time, "thread_time", None) or process_time
# Seconds for deadlines; 2.7 has no monotonic clock in C: wall time.
monotonic = getattr(time, "monotonic", None) or time.time


def native_thread_id():
    """The calling thread's kernel tid."""
    get = getattr(threading, "get_native_id", None)
    return get() if get else _libc.syscall(_SYS_GETTID)


def say(line):
    """Prints `line` and flushes, so the test reads it at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
