#!/usr/bin/env python3
"""PyTorch 2.x's own torch.distributed.checkpoint reading a megacpp torch_dcp checkpoint
(tests/distributed/test_pytorch_interop.cpp; run in scripts/setup_pytorch2.sh's root).

    pytorch2_dcp_check.py CHECKPOINT FINAL_PARAMS RANKS ITERATION

CHECKPOINT is an iter_N directory saved by RANKS ranks at ITERATION, FINAL_PARAMS the
--dump-final-params file of the same run. Three readers, as a PyTorch user would load it:
  1. dcp.load in one process into the nested state dict (docs/checkpoints.md): weights equal
     FINAL_PARAMS, AdamW state and Megatron's extras as saved.
  2. dcp.load by two processes (Gloo) into DTensors sharded on dim 0: each loads its shard.
  3. dcp_to_torch_save, which rebuilds the nesting from .metadata's planner_data.
Prints "pytorch2 checks passed" and exits 0, or fails with an assertion naming what differs.
"""
import datetime
import os
import sys
import tempfile
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

SCHEDULER_KEYS = ("max_lr", "min_lr", "lr_warmup_steps", "lr_decay_steps", "lr_decay_style", "num_steps")
HYPERPARAMETERS = ("lr", "betas", "eps", "weight_decay")


def template(final, metadata, ranks, make=lambda t: torch.empty_like(t)):
    """The state dict a user hands dcp.load: tensors of the right shapes, None for objects."""
    sizes = metadata.state_dict_metadata
    optim = {}
    for fqn, t in final.items():
        optim[f"state.{fqn}.exp_avg"] = make(t)
        optim[f"state.{fqn}.exp_avg_sq"] = make(t)
        optim[f"state.{fqn}.step"] = torch.empty(())
        optim.update({f"param_groups.{fqn}.{h}": None for h in HYPERPARAMETERS})
    rng = {str(r): {"torch_rng_state": torch.empty(sizes[f"rng_state.{r}.torch_rng_state"].size, dtype=torch.uint8)}
           for r in range(ranks)}
    return {"model": {fqn: make(t) for fqn, t in final.items()}, "optim": optim, "iteration": None,
            "checkpoint_version": None, "args": None, "opt_param_scheduler": {k: None for k in SCHEDULER_KEYS},
            "rng_state": rng}


def check_one_process(checkpoint, final, ranks, iteration):
    metadata = FileSystemReader(checkpoint).read_metadata()
    state = template(final, metadata, ranks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to load in a single process"
        dcp.load(state, checkpoint_id=checkpoint)
    for fqn, t in final.items():
        assert torch.equal(state["model"][fqn], t), f"model.{fqn} differs from the final parameters"
        step = state["optim"][f"state.{fqn}.step"]
        assert step.dtype == torch.float32 and step.item() == iteration, f"optim.state.{fqn}.step = {step}"
        exp_avg_sq = state["optim"][f"state.{fqn}.exp_avg_sq"]
        assert torch.isfinite(exp_avg_sq).all() and (exp_avg_sq >= 0).all() and exp_avg_sq.abs().sum() > 0, fqn
        assert isinstance(state["optim"][f"param_groups.{fqn}.lr"], float), fqn
        assert len(state["optim"][f"param_groups.{fqn}.betas"]) == 2, fqn
    assert state["iteration"] == iteration, state["iteration"]
    assert state["checkpoint_version"] == 3.0, state["checkpoint_version"]
    args = state["args"]
    assert type(args).__name__ == "Namespace", type(args)
    assert args.world_size == ranks and args.iteration == iteration, vars(args)
    # Megatron counts the scheduler in samples: the samples consumed so far
    assert state["opt_param_scheduler"]["num_steps"] == iteration * args.global_batch_size, state["opt_param_scheduler"]
    for r in range(ranks):
        assert state["rng_state"][str(r)]["torch_rng_state"].numel() > 0, r
    print(f"1. dcp.load in one process: {len(final)} weights equal the final parameters; "
          f"optimizer state, args, scheduler and {ranks} RNG states as saved")


def sharded_worker(rank, checkpoint, final, port, out):
    # Gloo on loopback needs no hostname lookup. The parent hosts the store: no port is picked
    # and released beforehand, for another test's process to take meanwhile.
    os.environ.update(GLOO_SOCKET_IFNAME="lo")
    store = dist.TCPStore("127.0.0.1", port, is_master=False, use_libuv=False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    mesh = init_device_mesh("cpu", (2,))
    model = {fqn: distribute_tensor(torch.zeros_like(t), mesh, [Shard(0)]) for fqn, t in final.items()}
    dcp.load({"model": model}, checkpoint_id=checkpoint)
    checked = 0
    for fqn, t in final.items():
        local = model[fqn].to_local()
        expected = torch.chunk(t, 2, dim=0)[rank]
        assert torch.equal(local, expected), f"rank {rank}: shard of model.{fqn} differs"
        checked += local.shape[0] < t.shape[0]
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        torch.save(checked, out)


def load_in_two_processes(checkpoint, final, deadline_s=120):
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=False)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "checked.pt")
        context = mp.spawn(sharded_worker, args=(checkpoint, final, store.port, out), nprocs=2, join=False)
        deadline = time.monotonic() + deadline_s
        while not context.join(timeout=5):
            if time.monotonic() > deadline:  # a pair that waits for ever raises nothing
                for process in context.processes:
                    process.kill()
                raise TimeoutError(f"the two processes did not finish in {deadline_s} s")
        return torch.load(out)


def check_two_processes(checkpoint, final, attempts=3):
    # Gloo adopts any connection that reaches a pair's port, so a stray dial from another test's
    # process (a reused ephemeral port) can leave the pair waiting for ever (megacpp's own ranks
    # guard against it: parallel/agreed_connect.h). Such a run times out (Gloo's timeout, or the
    # whole run's deadline when nothing raises) and is tried again.
    for attempt in range(1, attempts + 1):
        try:
            sharded = load_in_two_processes(checkpoint, final)
            break
        except (mp.ProcessRaisedException, TimeoutError) as e:
            if attempt == attempts:
                raise
            print(f"2. attempt {attempt} failed ({str(e).strip().splitlines()[-1]}); trying again")
    assert sharded > 0, "no tensor was sharded"
    print(f"2. dcp.load by 2 processes into DTensors Shard(0): every shard equals its rows ({sharded} tensors split)")


def check_torch_save(checkpoint, final, ranks):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "whole.pt")
        dcp_to_torch_save(checkpoint, path)
        state = torch.load(path, weights_only=False)
    expected_top = {"model", "optim", "iteration", "checkpoint_version", "args", "opt_param_scheduler", "rng_state"}
    assert set(state) == expected_top, sorted(state)
    assert set(state["model"]) == set(final), sorted(state["model"])
    for fqn, t in final.items():
        assert torch.equal(state["model"][fqn], t), fqn
    assert set(state["rng_state"]) == {str(r) for r in range(ranks)}, sorted(state["rng_state"])
    assert set(state["opt_param_scheduler"]) == set(SCHEDULER_KEYS), sorted(state["opt_param_scheduler"])
    print("3. dcp_to_torch_save rebuilds the nested state dict from planner_data")


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__)
    checkpoint, final_path, ranks, iteration = argv[1], argv[2], int(argv[3]), int(argv[4])
    final = torch.load(final_path, weights_only=True)  # --dump-final-params loads without pickle's full power
    print(f"torch {torch.__version__}: {checkpoint}")
    check_one_process(checkpoint, final, ranks, iteration)
    check_two_processes(checkpoint, final)
    check_torch_save(checkpoint, final, ranks)
    print("pytorch2 checks passed")


if __name__ == "__main__":
    main(sys.argv)
