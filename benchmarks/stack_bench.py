"""Three seeds of one toy model trained together (nbsupport.batched) against the same three one by one,
at the lab profile's toy sizes: wall time, per-step cost per model, and the validation losses both reach.

    python benchmarks/stack_bench.py [--pairs 800] [--epochs 1]

(`make bench` runs the same comparison inside bench.py; this script runs only it, for the record in
benchmarks/README.md, "Many models at once".)"""
import argparse
import copy
import json
import time

import torch

import nbsupport as nbs
from nbsupport.batched import train_together
from nbsupport.models import Transformer, TransformerConfig
from nbsupport.train import Encoded, TrainConfig, train


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pairs", type=int, default=800)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args(argv)
    dev = nbs.start("lab", 0, quiet=True).device
    task = nbs.pipeline.toy_task(nbs.profile("ci"), 0, ambiguity="low", n_train=4000)
    sub = Encoded(task.train.src[:args.pairs], task.train.tgt[:args.pairs])
    out = {"device": str(dev), "threads": torch.get_num_threads(), "pairs": args.pairs}
    for name, sizes in [("lab toy (d 128, 2+2 layers)", dict(d_model=128, n_heads=4, d_ff=256, enc_layers=2, dec_layers=2)),
                        ("reproduction toy (d 64, 1+1 layer)", dict(d_model=64, n_heads=4, d_ff=256, enc_layers=1,
                                                                     dec_layers=1))]:
        for k in (1, 4):
            cfgs = [TrainConfig(epochs=args.epochs, max_tokens=1024, warmup=10, seed=s) for s in range(3)]
            inits = []
            for s in range(3):
                torch.manual_seed(s)
                inits.append(Transformer(TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), n_latent=k,
                                                           dropout=0.0, **sizes)).to(dev))
            a, b = [copy.deepcopy(m) for m in inits], [copy.deepcopy(m) for m in inits]
            t0 = time.perf_counter()
            ha = [train(m, sub, sub, c, dev, progress=False) for m, c in zip(a, cfgs)]
            t1 = time.perf_counter()
            hb = train_together(b, sub, sub, cfgs, dev)
            t2 = time.perf_counter()
            steps = sum(1 for _ in sub.batches(1024, shuffle=False, seed=0, device="cpu")) * args.epochs
            row = {"one_by_one_s": round(t1 - t0, 2), "together_s": round(t2 - t1, 2),
                   "speedup": round((t1 - t0) / (t2 - t1), 2),
                   "ms_per_step_per_model_alone": round(1000 * (t1 - t0) / steps / 3, 1),
                   "ms_per_step_per_model_stacked": round(1000 * (t2 - t1) / steps / 3, 1),
                   "valid_alone": [round(h.best_valid, 4) for h in ha], "valid_together": [round(h.best_valid, 4) for h in hb]}
            out[f"{name}, K={k}"] = row
            print(f"{name}, K={k}: {row}", flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
