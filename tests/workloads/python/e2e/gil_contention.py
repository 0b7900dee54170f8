"""For tests/e2e/test_record_offcpu.py: four threads spinning in pure Python
for --seconds; on a 2-core machine most of their time goes waiting for the
GIL. Runs on 2.7 and 3.6+."""
import argparse
import threading

import portable


def contend(seconds):
    end = portable.monotonic() + seconds
    x = 0
    while portable.monotonic() < end:
        x += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2)
    args = parser.parse_args()
    threads = [threading.Thread(target=contend, args=(args.seconds,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
