#!/usr/bin/env python3
"""How far a function's share strays when read from sample counts or from sample weights,
under pystrobe's sampling clock (daemon/loader/sampling_clock.h). A simulation, no BPF.

The clock redraws each CPU's rate at random moments: blocks of 16 to 48 mean periods at
0.5x to 1.5x the mean rate. A count-based share carries that noise: a phase sampled during
a fast block gets more samples. Each sample also carries the interval that preceded it
(its weight), and a share of weights does not depend on the rate.

The workload is tests/workloads/python/e2e/cpu_split3.py on one CPU, running without a
break: rounds of 0.1 to 0.2 s of CPU split 60/30/10 between three functions. For each
length, many runs: the standard deviation and the largest error of the first function's
share, in points, by counts and by weights.
  tests/bench/simulate_share_noise.py [--runs 400]
"""
import argparse
import random
import statistics

RATE_HZ = 499
SHARES = (0.6, 0.3, 0.1)


def phases_of(cpu_seconds, rng):
    """[(start, end, part)] of the workload's CPU time, back to back."""
    phases, t = [], 0.0
    while t < cpu_seconds:
        round_s = rng.uniform(0.1, 0.2)
        for part, share in enumerate(SHARES):
            phases.append((t, t + round_s * share, part))
            t += round_s * share
    return phases


def one_run(cpu_seconds, rng):
    """The first part's share error (counts, weights) and the number of samples."""
    phases = phases_of(cpu_seconds, rng)
    end = phases[-1][1]
    counts, weights = [0] * len(SHARES), [0.0] * len(SHARES)
    truth = [0.0] * len(SHARES)
    for start, stop, part in phases:
        truth[part] += stop - start
    tick, last, at = rng.uniform(0, 1 / RATE_HZ), 0.0, 0
    while tick < end:
        # A block: its rate, drawn 1/64 high as the clock does, and how long it holds.
        rate = RATE_HZ * rng.uniform(0.5, 1.5) * (1 + 1 / 64)
        block_end = tick + rng.uniform(16, 48) / RATE_HZ
        while tick < min(block_end, end):
            while phases[at][1] <= tick:
                at += 1
            part = phases[at][2]
            counts[part] += 1
            weights[part] += tick - last
            last = tick
            tick += 1 / rate
        # A redraw restarts the timer: the next tick is part of a period away.
        tick = block_end + rng.random() / rate
    true_share = truth[0] / sum(truth)
    return (counts[0] / sum(counts) - true_share, weights[0] / sum(weights) - true_share,
            sum(counts))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    print("cpu s | samples | counts: sd, max (points) | weights: sd, max (points)")
    for cpu_seconds in (1.0, 2.0, 3.5):
        runs = [one_run(cpu_seconds, random.Random(seed)) for seed in range(args.runs)]
        by_count = [100 * r[0] for r in runs]
        by_weight = [100 * r[1] for r in runs]
        samples = statistics.mean(r[2] for r in runs)
        print(f"{cpu_seconds:5.1f} | {samples:7.0f} | "
              f"{statistics.pstdev(by_count):.2f}, {max(map(abs, by_count)):.1f} | "
              f"{statistics.pstdev(by_weight):.2f}, {max(map(abs, by_weight)):.1f}")


if __name__ == "__main__":
    main()
