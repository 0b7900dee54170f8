"""CPU work in four sub-interpreters, each with its own GIL, through
concurrent.futures.InterpreterPoolExecutor (3.14+), for
tests/e2e/test_record_python.py: work_a .. work_d (subinterp_work.py) spin
for --seconds at once on one worker each. Prints "ready" when all four run,
then one JSON line with each function's CPU seconds, as its own thread's
clock measured them, and its thread's id."""
import argparse
import json
import os
from concurrent.futures import InterpreterPoolExecutor

import subinterp_work


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3)
    args = parser.parse_args()
    functions = (subinterp_work.work_a, subinterp_work.work_b, subinterp_work.work_c,
                 subinterp_work.work_d)
    # Each worker's sub-interpreter is made when the worker starts; warming
    # them up first keeps interpreter creation out of the measured seconds.
    with InterpreterPoolExecutor(max_workers=len(functions)) as pool:
        barrier = [pool.submit(subinterp_work.spin, 0.05) for _ in functions]
        for future in barrier:
            future.result()
        futures = [pool.submit(f, args.seconds) for f in functions]
        print("ready", flush=True)
        results = [f.result() for f in futures]
    print(json.dumps({"pid": os.getpid(),
                      "workers": {r["function"]: r for r in results}}), flush=True)


if __name__ == "__main__":
    main()
