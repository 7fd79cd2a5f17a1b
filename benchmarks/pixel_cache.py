"""Would a cache of preprocessed pixels pay for itself? What one evaluation job spends per question
on work that does not depend on the model (decoding the saved record set, the image processor,
and the processor's exact table that the jobs use, ltopd.models.pixels), what reading the
processor's output back from a cache would cost instead, and how large that cache would be,
against what the job spends per question in all:

    python benchmarks/pixel_cache.py [--model releases/qwen35-tiny] [--benchmark gqa] [--n 160]

One thread; CPU-seconds (robust on shared cores). The record set is built and saved as
`ltopd build-bench` saves it (256 px images, the default profile's world), then read back as an
evaluation job reads it. The cache is measured as the cheapest one there could be: each batch's
pixel_values and image_grid_thw in one safetensors file, read back from the page cache (no disk
read counted). "job" is a trained student's evaluation: the full-token and the CDPruner setting
at the smallest budget from one vision pass (ltopd.models.inference.predict_settings), with the
delta_rule kernels load_backbone installs.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ltopd.bench.store import build_records, load_saved, save_records
from ltopd.models.inference import predict_settings
from ltopd.models.loading import load_backbone


def cpu(fn):
    c0 = time.process_time()
    out = fn()
    return out, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="releases/qwen35-tiny")
    ap.add_argument("--benchmark", default="gqa")
    ap.add_argument("--n", type=int, default=160)
    ap.add_argument("--batch-size", type=int, default=40)
    ap.add_argument("--budget", type=float, default=0.05)
    ap.add_argument("--repeats", type=int, default=5, help="preprocessing passes over the records (medians)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    bb = load_backbone(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        save_records(build_records(args.benchmark, {"n": args.n}, 0, {"image_size": 256}), Path(tmp, "records"))
        records, decode = cpu(lambda: load_saved(Path(tmp, "records")))
        chunks = [records[s:s + args.batch_size] for s in range(0, len(records), args.batch_size)]
        bb.processor.process_images(chunks[0][0]["images"])  # the table's one comparison with the processor, untimed
        processor, table = [], []  # per repeat: CPU-s over every chunk (the two interleaved, chunk by chunk)
        for _ in range(args.repeats):
            processor.append(0.0)
            table.append(0.0)
            for chunk in chunks:
                images = [im for r in chunk for im in r["images"]]
                want, took = cpu(lambda images=images: bb.processor.image_processor(images=images, return_tensors="pt"))
                processor[-1] += took
                got, took = cpu(lambda images=images: bb.processor.process_images(images))
                table[-1] += took
                assert all(torch.equal(got[k], want[k]) for k in got), "the table's patches differ from the processor's"
        read = 0.0
        size = 0
        for i, chunk in enumerate(chunks):
            vision = bb.processor.process_images([im for r in chunk for im in r["images"]])
            path = Path(tmp, f"pixels-{i}.safetensors")
            save_file({k: v.contiguous() for k, v in vision.items()}, str(path))
            size += path.stat().st_size
            back, took = cpu(lambda path=path: load_file(str(path)))
            read += took
            assert all(torch.equal(back[k], vision[k]) for k in vision)
        _, job = cpu(lambda: predict_settings(bb, records, [(1.0, None), (args.budget, "cdpruner")], floor=1,
                                              batch_size=args.batch_size, max_new_tokens=8))
    n = len(records)
    print(f"{args.model}, {args.benchmark}, {n} questions, batch {args.batch_size}, one thread; CPU-ms per question")
    print("| decode records | preprocess: the processor | preprocess: its table (the jobs') | cache read (page cache) "
          f"| a student's job (full + CDPruner {args.budget:g}, one pass) | cache size per question |")
    print("|---|---|---|---|---|---|")
    print(f"| {1000 * decode / n:.2f} | {1000 * statistics.median(processor) / n:.2f} "
          f"| {1000 * statistics.median(table) / n:.2f} | {1000 * read / n:.2f} | {1000 * job / n:.2f} "
          f"| {size / n / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
