"""Host cost of the teeny_tx.nn wrappers per call (no GPU work to speak of): where the time goes.

Run on a GPU machine: python3 bench/profile_wrappers.py. Prints µs per call for each wrapper on
tiny inputs (torch tensors and CuPy arrays) and the top functions of a cProfile of softmax.
"""

import cProfile
import pstats
import time

import cupy as cp
import torch

import teeny_tx.nn as tnn


def per_call(fn, n=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def main():
    x = torch.randn(4, 1024, device="cuda")
    w, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    xc = cp.asarray(x)
    print(f"softmax torch      {per_call(lambda: tnn.softmax(x)):7.2f} us/call")
    print(f"softmax cupy       {per_call(lambda: tnn.softmax(xc)):7.2f} us/call")
    print(f"layer_norm torch   {per_call(lambda: tnn.layer_norm(x, w, b)):7.2f} us/call")
    print(f"rms_norm torch     {per_call(lambda: tnn.rms_norm(x, w)):7.2f} us/call")
    print(f"torch.softmax      {per_call(lambda: torch.softmax(x, -1)):7.2f} us/call")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        tnn.softmax(x)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
