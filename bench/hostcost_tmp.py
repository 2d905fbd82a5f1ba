import time

import cupy as cp
import torch

from teeny_tx import linalg

a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
ca, cb = cp.asarray(a), cp.asarray(b)
for f, name in (
    (lambda: linalg.matmul(a, b), "linalg.matmul torch 64^3"),
    (lambda: linalg.matmul(ca, cb), "linalg.matmul cupy 64^3"),
    (lambda: torch.matmul(a, b), "torch.matmul 64^3"),
):
    for _ in range(50):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(2000):
        f()
    torch.cuda.synchronize()
    print(name, f"{(time.perf_counter() - t) / 2000 * 1e6:.1f} us/call")
