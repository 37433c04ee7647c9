"""One training rank: compute phase + all-reduce per iteration, timestamped.

``python -m netlab_agent.train --job-id J --rank R --world-size W ...``

The rank is deliberately synthetic: what the testbed studies is how the
all-reduce traffic of co-located jobs interacts on shaped links, so the
compute phase only has to take the right time. On a GPU host it runs real
matmuls calibrated to ``--compute-ms``; on a CPU host it sleeps, so a 2-core
machine can emulate many GPU ranks without the compute fighting the network
stack for cores. ``--offset-ms`` is the CASSINI time shift applied once after
the start barrier. torch is imported here only, so the agent itself does not
need it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import threading
import time


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m netlab_agent.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--job-id", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--backend", choices=["gloo", "nccl", "auto"], default="auto")
    p.add_argument("--grad-bytes", type=int, required=True)
    p.add_argument("--compute-ms", type=float, required=True)
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--offset-ms", type=float, default=0.0)
    p.add_argument("--start-at", type=float, default=None, help="unix time to start the first iteration")
    p.add_argument("--log", required=True, help="JSON lines file, one record per iteration")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="share of min(compute, all-reduce) hidden by overlapping them (netlab's iteration-time rule)")
    p.add_argument("--timeout-s", type=float, default=600.0, help="rendezvous/collective timeout")
    p.add_argument("--heartbeat-fd", type=int, default=None, help="a pipe to write one byte to every heartbeat")
    p.add_argument("--heartbeat-s", type=float, default=1.0, help="seconds between heartbeats")
    return p.parse_args(argv)


def _beat(fd: int, every_s: float) -> None:
    """Write a byte to the agent's pipe every ``every_s`` from a thread, so the agent sees this rank is alive
    (and notices within seconds if the process is stopped or its interpreter hangs)."""
    def run():
        while True:
            try:
                os.write(fd, b".")
            except OSError:  # the agent is gone: nobody listens any more
                return
            time.sleep(every_s)

    threading.Thread(target=run, name="heartbeat", daemon=True).start()


def _job_id(raw: str):
    return int(raw) if raw.isdigit() and str(int(raw)) == raw else raw


class _Compute:
    """Callable that spends ``compute_ms``: calibrated matmuls on cuda, sleep on cpu."""

    def __init__(self, torch, device: str, compute_ms: float):
        self.torch, self.device, self.s = torch, device, compute_ms / 1000.0
        self.steps = 0
        if device == "cuda" and self.s > 0:
            self.a = torch.randn(4096, 4096, device="cuda")
            self._matmuls(3)
            torch.cuda.synchronize()
            t = time.perf_counter()
            self._matmuls(10)
            torch.cuda.synchronize()
            per = (time.perf_counter() - t) / 10
            self.steps = max(1, round(self.s / per))

    def _matmuls(self, n: int) -> None:
        for _ in range(n):
            self.a @ self.a

    def __call__(self) -> None:
        if self.steps:
            self._matmuls(self.steps)
            self.torch.cuda.synchronize()
        elif self.s > 0:
            time.sleep(self.s)


def _overlapped(dist, torch, grad, hidden, compute_start: float, compute_s: float, overlap: float) -> float:
    """One all-reduce overlapped with the rest of the compute (DDP's buckets during the backward pass): started
    after ``(1 - overlap)`` of the compute, it runs while ``hidden`` spends the rest; the iteration then ends
    where netlab's rule puts it, ``compute + comm - overlap x min(compute, comm)`` after ``compute_start``, with
    ``comm`` the all-reduce's measured time. Returns when the all-reduce ended."""
    start = time.time()
    work = dist.all_reduce(grad, async_op=True)
    ended: list[float] = []

    def wait():
        work.wait()
        if grad.is_cuda:
            torch.cuda.synchronize()
        ended.append(time.time())

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    hidden()
    waiter.join()
    comm = ended[0] - start
    time.sleep(max(0.0, compute_start + compute_s + comm - overlap * min(compute_s, comm) - time.time()))
    return ended[0]


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.heartbeat_fd is not None:
        _beat(args.heartbeat_fd, args.heartbeat_s)  # before torch, whose import takes seconds
    import torch
    import torch.distributed as dist

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    device = args.device
    if device == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=args.rank, world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        grad = torch.ones(args.grad_bytes // 4, dtype=torch.float32,
                          device="cuda" if (device == "cuda" or backend == "nccl") else "cpu")
        overlap = args.overlap
        compute = _Compute(torch, device, args.compute_ms * (1.0 - overlap))  # before the all-reduce starts
        hidden = _Compute(torch, device, args.compute_ms * overlap) if overlap > 0 else None  # while it runs
        dist.barrier()
        if args.start_at is not None:
            time.sleep(max(0.0, args.start_at - time.time()))
        time.sleep(args.offset_ms / 1000.0)
        job_id = _job_id(args.job_id)
        with open(args.log, "a") as log:
            for it in range(args.iterations):
                compute_start = time.time()
                compute()
                allreduce_start = time.time()
                if hidden is None:
                    dist.all_reduce(grad)
                    if grad.is_cuda:
                        torch.cuda.synchronize()
                    allreduce_end = time.time()
                else:
                    allreduce_end = _overlapped(dist, torch, grad, hidden, compute_start, args.compute_ms / 1000.0,
                                                overlap)
                log.write(json.dumps({"job_id": job_id, "rank": args.rank, "iter": it,
                                      "compute_start": compute_start, "allreduce_start": allreduce_start,
                                      "allreduce_end": allreduce_end}) + "\n")
                log.flush()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
