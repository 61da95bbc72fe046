#!/usr/bin/env python3
"""An all-reduce over torch.distributed (gloo, CPU), set up the way Slurm users do it: rank, world
size and the rendezvous address come from srun's SLURM_* variables only."""
import os
import socket
import sys

import torch
import torch.distributed as dist


def first_host(nodelist):
    """The first name of a Slurm host list: node[1-4,7] -> node1, a,b -> a."""
    head = nodelist.split(",")[0]
    if "[" in nodelist:
        prefix, rest = nodelist.split("[", 1)
        first = rest.split(",")[0].split("-")[0].rstrip("]")
        return prefix + first
    return head


def main():
    rank = int(os.environ["SLURM_PROCID"])
    world = int(os.environ["SLURM_NTASKS"])
    # Rank 0 runs on the step's first node. Real clusters resolve its name; a one-machine test
    # cluster's node names resolve nowhere, and there srun's own address (SLURM_LAUNCH_NODE_IPADDR)
    # is the same machine.
    master = first_host(os.environ["SLURM_STEP_NODELIST"])
    try:
        master = socket.gethostbyname(master)
    except OSError:
        master = os.environ["SLURM_LAUNCH_NODE_IPADDR"]
    port = 20000 + int(os.environ["SLURM_JOB_ID"]) % 20000
    dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}", rank=rank,
                           world_size=world)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    print(f"rank {rank} of {world} on {os.environ['SLURMD_NODENAME']}: sum {int(t.item())}",
          flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if int(t.item()) == world * (world + 1) // 2 else 1


if __name__ == "__main__":
    sys.exit(main())
