"""A small but real workload for pystrobe's demo: it builds a corpus of text,
counts words in pure Python, compresses chunks with zlib (native code), and
writes and reads the result through a file (the kernel), on two threads.

Runs for about five seconds; `--seconds N` changes that.
"""

import argparse
import collections
import os
import random
import tempfile
import threading
import time
import zlib

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "an", "el"]


def make_word(rng):
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))


def make_corpus(rng, words):
    return " ".join(make_word(rng) for _ in range(words))


def count_words(text):
    counts = collections.Counter()
    for word in text.split():
        counts[word.strip(".,")] += 1
    return counts


def compress_chunks(text, chunk_size=64 * 1024):
    data = text.encode()
    return [zlib.compress(data[i:i + chunk_size], 9) for i in range(0, len(data), chunk_size)]


def round_trip_through_disk(chunks, directory):
    path = os.path.join(directory, "census.bin")
    with open(path, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    with open(path, "rb") as source:
        return len(source.read())


def census_worker(seed, deadline, directory, results):
    rng = random.Random(seed)
    totals = collections.Counter()
    rounds = 0
    while time.monotonic() < deadline:
        text = make_corpus(rng, 20_000)
        totals.update(count_words(text))
        round_trip_through_disk(compress_chunks(text), directory)
        rounds += 1
    results[seed] = (rounds, totals.most_common(3))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        workers = []
        for seed in (1, 2):
            workdir = os.path.join(directory, f"worker-{seed}")
            os.mkdir(workdir)
            workers.append(threading.Thread(target=census_worker, name=f"census-{seed}",
                                            args=(seed, deadline, workdir, results)))
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    for seed, (rounds, common) in sorted(results.items()):
        print(f"census-{seed}: {rounds} rounds, most common words {common}")


if __name__ == "__main__":
    main()
