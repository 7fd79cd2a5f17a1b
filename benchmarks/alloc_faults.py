"""What a fresh CPU tensor costs here: CPU-ms and minor page faults per call of an out-of-place
elementwise op (a new buffer each call) against the same op in place, by tensor size:

    python benchmarks/alloc_faults.py

One thread; medians of CPU-seconds. Every freshly allocated page of a large temporary faults
(glibc hands freed large buffers back to the kernel), and a fault costs microseconds on these
machines: why ltopd.models.delta_rule works in place wherever a buffer is not read again.
"""
from __future__ import annotations

import resource
import time

import torch


def per_call(fn, repeats: int = 30) -> tuple[float, float]:
    """(median CPU-ms, minor page faults) per call."""
    fn()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / repeats
    return 1000 * sorted(times)[repeats // 2], faults


def main() -> None:
    torch.set_num_threads(1)
    print("one thread; per call: median CPU-ms (minor page faults)")
    print("| tensor | x * -1 (new buffer) | x.mul_(-1) (in place) | ratio |")
    print("|---|---|---|---|")
    for kib in (64, 256, 1024, 4096):
        x = torch.randn(kib * 256)
        fresh, f_faults = per_call(lambda x=x: x * -1.0)
        inplace, i_faults = per_call(lambda x=x: x.mul_(-1.0))  # a sign flip: the values stay normal
        print(f"| {kib} KiB | {fresh:.3f} ({f_faults:.0f}) | {inplace:.3f} ({i_faults:.0f}) | {fresh / inplace:.1f}x |")


if __name__ == "__main__":
    main()
