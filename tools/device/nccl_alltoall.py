"""NCCL's own all-to-all of the bytes the cuda plugin's EP transport moves,
the peer figure `fusedmoe bench --gpus N` is compared with (docs/EP.md,
bench/cuda/RESULTS.md "Expert parallelism"). One process per GPU:

    torchrun --nproc_per_node N tools/device/nccl_alltoall.py 1,16,128 [--hidden 7168]

For T tokens per rank on N ranks, a token goes at most once to each rank:
dispatch moves T*N*(H + 4) bytes per rank (an e4m3 row and its f32 scale),
combine T*N*H*2 (bf16 rows back). Each size: 10 warm-up calls, then 50
timed by CUDA events after a barrier; the median, max over the ranks, is
printed by rank 0. Needs torch with NCCL (keep NVLink multicast off on the
device machines: NCCL_NVLS_ENABLE=0).
"""

import argparse

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tokens", help="tokens per rank, comma-separated")
    ap.add_argument("--hidden", type=int, default=7168)
    args = ap.parse_args()
    dist.init_process_group("nccl")
    r, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(r)
    h = args.hidden
    for t in (int(v) for v in args.tokens.split(",")):
        for name, b in (("dispatch", t * n * (h + 4)), ("combine", t * n * h * 2)):
            b = (b + n - 1) // n * n  # all_to_all_single splits evenly
            x = torch.ones(b, dtype=torch.uint8, device="cuda")
            y = torch.empty_like(x)
            for _ in range(10):
                dist.all_to_all_single(y, x)
            torch.cuda.synchronize()
            times = []
            for _ in range(50):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                dist.barrier()
                s.record()
                dist.all_to_all_single(y, x)
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e) * 1000.0)
            med = torch.tensor([sorted(times)[len(times) // 2]], device="cuda")
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            if r == 0:
                print(f"a2a n={n} T={t} {name} bytes/rank={b} median_us={med.item():.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
