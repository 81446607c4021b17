"""PyTorch DDP's gradient buckets for a model, as its Reducer uses them.

    .venv/bin/python python/tests/ddp_buckets.py MODEL.py [--bucket-cap-mb X]

Wraps ``make()``'s model in ``DistributedDataParallel`` (one Gloo rank,
``bucket_cap_mb=X`` or DDP's default), runs three forward/backward passes
and prints, as JSON, the parameter names of each bucket (in bucket order,
and in order within a bucket) that a communication hook sees on the last
one. DDP starts with one bucket per dtype and rebuilds its buckets after
the first backward from the order the gradients became ready
(``compute_bucket_assignment_by_size`` with the limits
``[first_bucket_bytes_cap, bucket_bytes_cap]``), so the last pass shows the
steady-state buckets that loom-replicate reproduces.
"""

from __future__ import annotations

import argparse
import json
import runpy

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def ddp_buckets(model_file: str, bucket_cap_mb: float | None) -> list[list[str]]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model, batches = runpy.run_path(model_file)["make"]()
        names = {id(p): n for n, p in model.named_parameters()}
        ddp = DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
        seen: dict[int, list[str]] = {}

        def hook(state, bucket):
            seen[bucket.index()] = [names[id(p)] for p in bucket.parameters()]
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

        ddp.register_comm_hook(None, hook)
        for _ in range(3):
            seen.clear()
            ddp(*batches[0]).backward()
        return [seen[i] for i in sorted(seen)]
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--bucket-cap-mb", type=float)
    args = parser.parse_args()
    print(json.dumps(ddp_buckets(args.model, args.bucket_cap_mb)))


if __name__ == "__main__":
    main()
