/*
 * A C program that embeds libpython, for tests/unit/python/python_frame_walker_test.cc:
 * discovery must find the interpreter in a process whose executable is not
 * python. Runs Python code that reports and then waits in embedded_wait().
 */
#include <Python.h>

static const char kCode[] =
    "import time\n"
    "def embedded_wait():\n"
    "    print('ready', flush=True)\n"
    "    while True:\n"
    "        time.sleep(1000)  # line 5\n"
    "embedded_wait()\n";

int main(void) {
  Py_Initialize();
  PyRun_SimpleString(kCode);
  return Py_FinalizeEx() < 0 ? 1 : 0;
}
