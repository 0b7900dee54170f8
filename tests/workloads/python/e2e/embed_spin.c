/*
 * A C program that embeds libpython and spins in Python, for
 * tests/e2e/test_record_python.py: a process whose executable is not python
 * must still show its Python frames. Runs embedded_spin() (in "<string>",
 * the spinning line is line 6) for the seconds given as argv[1] (default 2).
 */
#include <Python.h>

#include <stdio.h>
#include <stdlib.h>

/* Runs on 2.7 and 3.6+ (time.time where time.monotonic is missing). */
static const char kCode[] =
    "import sys, time\n"
    "def embedded_spin(seconds):\n"
    "    end = clock() + seconds\n"
    "    x = 0\n"
    "    while clock() < end:\n"
    "        for i in range(200): x += i  # line 6\n"
    "clock = getattr(time, 'monotonic', time.time)\n"
    "sys.stdout.write('ready\\n')\n"
    "sys.stdout.flush()\n"
    "embedded_spin(SECONDS)\n";

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  char seconds_code[64];

  Py_Initialize();
  snprintf(seconds_code, sizeof(seconds_code), "SECONDS = %f\n", seconds);
  if (PyRun_SimpleString(seconds_code) != 0 || PyRun_SimpleString(kCode) != 0) return 1;
#if PY_VERSION_HEX >= 0x03060000
  return Py_FinalizeEx() < 0 ? 1 : 0;
#else
  Py_Finalize();
  return 0;
#endif
}
