"""Side-by-side speed ratios (`make bench`). Every figure is a ratio of two things measured in
the same run on the same machine, so machines can be compared by their ratios.

    python benchmarks/bench.py [--size tiny|lab] [--out benchmarks]

writes results.json (the ratios, the raw timings and the device) and results.md.
Models are fresh (untrained): speed does not depend on the weights, and untrained models
decode to the maximum length, so decoding ratios measure search cost per step.
"""
from __future__ import annotations

import argparse
import json
import copy
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

import nbsupport as nbs
from nbsupport.data.batching import pad_batch
from nbsupport.data.vocab import PAD
from nbsupport.kernels import fused_scones_loss
from nbsupport.losses import scones_loss
from nbsupport.models import ConditioningConfig, TargetConditionedTransformer, Transformer, TransformerConfig
from nbsupport.batched import train_together
from nbsupport.speed import step_seconds
from nbsupport.train import Encoded, TrainConfig, train

SIZES = {
    "tiny": dict(n_train=400, steps=3, rounds=1, sentences=8, d_model=32, d_ff=64, layers=1, vocab=(512, 1024), rows=64,
                 stack_pairs=100),
    "lab": dict(n_train=4000, steps=12, rounds=5, sentences=64, d_model=128, d_ff=256, layers=2, vocab=(8000, 32000),
                rows=2048, stack_pairs=800),
}


def _timed(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def side_by_side(a, b, repeats: int = 5) -> tuple[float, float, float]:
    """Median seconds of ``a()`` and of ``b()``, called in turns (after one untimed call each),
    and the median over the turns of time(a) / time(b)."""
    a(), b()
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(_timed(a))
        tb.append(_timed(b))
    return statistics.median(ta), statistics.median(tb), statistics.median(x / y for x, y in zip(ta, tb))


def step_ratio(seconds: dict, name: str, reference: str) -> float:
    """Median over rounds of (step time of ``name``) / (step time of ``reference``)."""
    return statistics.median(a / b for a, b in zip(seconds[name], seconds[reference]))


def estep_loop(model, src, tgt_in, tgt_out):
    """fairseq's way: one decoder call per expert."""
    with torch.no_grad():
        memory, mask = model.encode(src)
        zs = [torch.full((src.shape[0],), z, device=src.device) for z in range(model.config.n_latent)]
        return torch.stack([model.sentence_nll(model.decode(tgt_in, memory, mask, z), tgt_out) for z in zs], dim=1)


def estep_batched(model, src, tgt_in, tgt_out):
    with torch.no_grad():
        memory, mask = model.encode(src)
        return model.latent_nll(memory, mask, tgt_in, tgt_out)


def saved_bytes(fn) -> int:
    """Bytes of the tensors autograd keeps for backward while ``fn()`` builds its graph."""
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    out.backward()
    return total


def peak_memory(fn) -> int:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn().backward()
        return torch.cuda.max_memory_allocated() - base
    return saved_bytes(fn)


def widget_latency(task, dev, repeats: int = 5) -> dict:
    """Median seconds of one re-render of each kind of live view (nbsupport.views.live), with a
    model of the lab profile's toy size: what a student waits for after a click."""
    from nbsupport.views import live, widgets
    sizes = nbs.profile("lab").toy_model
    torch.manual_seed(0)
    mc = lambda k=1: TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), n_latent=k, **sizes)
    moe, base = Transformer(mc(4)).to(dev).eval(), Transformer(mc()).to(dev).eval()
    sents = task.corpus.test.src
    parts = dict(subject="dog", verb="sees", object="cat", place="near the river")
    views = {
        "latent_k4": lambda i: live.latent_view(moe, task.src_vocab, task.tgt_vocab, sents[i], z=i % 4),
        "fixed_latent_8_sources": lambda i: live.fixed_latent_view(moe, task.src_vocab, task.tgt_vocab,
                                                                   sents[i:i + 8], z=i % 4),
        "beam_8": lambda i: live.beam_view(base, task.src_vocab, task.tgt_vocab, sents[i], beam=8),
        "beam_64": lambda i: live.beam_view(base, task.src_vocab, task.tgt_vocab, sents[i], beam=64),
        "beam_8_exact_500": lambda i: live.beam_view(base, task.src_vocab, task.tgt_vocab, sents[i], beam=8,
                                                     exact_budget=500),
        "sample_5": lambda i: live.sample_view(base, task.src_vocab, task.tgt_vocab, sents[i], temperature=1.0, seed=i),
        "composed_with_latent_k4": lambda i: live.composed_view(
            task.corpus, lambda src: live.latent_view(moe, task.src_vocab, task.tgt_vocab, src["src"], z=i % 4), **parts),
    }
    out = {}
    for name, view in views.items():
        with widgets.interaction_threads():              # as nbs.widgets.explore renders
            view(0)                                      # untimed
            out[name] = statistics.median(_timed(lambda: view(i)) for i in range(1, repeats + 1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", choices=list(SIZES), default="lab")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent))
    args = ap.parse_args(argv)
    sz = SIZES[args.size]
    dev = nbs.start("lab", 0, quiet=True).device
    task = nbs.pipeline.toy_task(nbs.profile("ci"), 0, ambiguity="low", n_train=sz["n_train"])
    sizes = dict(d_model=sz["d_model"], n_heads=4, d_ff=sz["d_ff"], enc_layers=sz["layers"], dec_layers=sz["layers"])
    mc = lambda k=1, **kw: TransformerConfig(len(task.src_vocab), len(task.tgt_vocab), n_latent=k, **sizes, **kw)
    cfg = TrainConfig(max_tokens=1024, warmup=10)
    batches = list(task.train.batches(1024, shuffle=True, seed=0, device=dev))[:sz["steps"]]
    raw, ratios = {}, {}

    # a. Hard-MoE step against the baseline step; batched E-step against a per-expert loop
    # same batches for every model, so step-time ratios are inverse token-throughput ratios
    torch.manual_seed(0)
    warmup = 2   # untimed steps per model
    tokens = sum(int((b[2] != PAD).sum()) for b in batches[warmup:])
    secs = step_seconds({k: Transformer(mc(k)).to(dev) for k in (1, 3, 10)}, batches, cfg, sz["rounds"], warmup)
    raw["baseline_tok_s"] = tokens / statistics.median(secs[1])
    for k in (3, 10):
        raw[f"hard_moe_k{k}_tok_s"] = tokens / statistics.median(secs[k])
        ratios[f"hard_moe_k{k}_step_over_baseline"] = step_ratio(secs, k, 1)
    moe10 = Transformer(mc(10)).to(dev).eval()
    src, tgt_in, tgt_out, _ = batches[0]
    assert torch.allclose(estep_loop(moe10, src, tgt_in, tgt_out), estep_batched(moe10, src, tgt_in, tgt_out), atol=1e-3)
    raw["estep_loop_k10_s"], raw["estep_batched_k10_s"], ratios["batched_estep_speedup_over_loop"] = side_by_side(
        lambda: estep_loop(moe10, src, tgt_in, tgt_out), lambda: estep_batched(moe10, src, tgt_in, tgt_out))

    # b. target-encoder step at K=50 against K=3
    secs = step_seconds({k: TargetConditionedTransformer(mc(k), ConditioningConfig()).to(dev) for k in (3, 50)},
                        batches, cfg, sz["rounds"], warmup)
    for k in (3, 50):
        raw[f"target_encoder_k{k}_tok_s"] = tokens / statistics.median(secs[k])
    ratios["target_encoder_k50_step_over_k3"] = step_ratio(secs, 50, 3)

    # c. SCONES greedy against softmax beam 4 (sentences per second), batch 4 and 64
    sents = task.corpus.test.src[:sz["sentences"]]
    encoded = [task.src_vocab.encode(s) for s in sents]
    scones, softmax = Transformer(mc(output="scones")).to(dev), Transformer(mc()).to(dev)

    def decode_all(model, batch, method, **kw):
        for lo in range(0, len(encoded), batch):
            nbs.decode.token_ids(nbs.decode.decode(model, pad_batch(encoded[lo:lo + batch]).to(dev), method, **kw))
    for b in (4, 64):
        beam_s, greedy_s, ratio = side_by_side(lambda: decode_all(softmax, b, "beam", n=1, beam=4),
                                               lambda: decode_all(scones, b, "greedy"), repeats=3)
        raw[f"scones_greedy_b{b}_sent_s"], raw[f"softmax_beam4_b{b}_sent_s"] = len(sents) / greedy_s, len(sents) / beam_s
        ratios[f"scones_greedy_over_softmax_beam4_b{b}"] = ratio   # beam time / greedy time = throughput ratio

    # d. K-latent parallel greedy against K separate greedy runs; KV cache against none
    moe4 = Transformer(mc(4)).to(dev).eval()
    enc = pad_batch(encoded).to(dev)
    separate = lambda: [nbs.decode.token_ids(nbs.decode.decode(moe4, enc, "greedy", z=torch.full((len(sents),), z, device=dev)))
                        for z in range(4)]
    raw["separate_greedy_k4_s"], raw["latent_greedy_k4_s"], ratios["latent_greedy_speedup_over_separate"] = side_by_side(
        separate, lambda: nbs.decode.token_ids(nbs.decode.decode(moe4, enc, "latent_greedy")))
    raw["greedy_no_cache_s"], raw["greedy_cache_s"], ratios["kv_cache_speedup"] = side_by_side(
        lambda: nbs.decode.token_ids(nbs.decode.decode(softmax, enc, "greedy", use_cache=False)),
        lambda: nbs.decode.token_ids(nbs.decode.decode(softmax, enc, "greedy", use_cache=True)))

    # e. fused SCONES loss against the plain composition: time and memory at two vocabularies
    for v in sz["vocab"]:
        label = f"{v // 1000}k" if v >= 1000 else str(v)
        g = torch.Generator().manual_seed(0)
        logits = (torch.randn(sz["rows"], v, generator=g) * 2).to(dev)
        targets = torch.randint(1, v, (sz["rows"],), generator=g).to(dev)
        plain = lambda: scones_loss(logits.requires_grad_(), targets, pad_id=0, alpha=0.5)
        fused = lambda: fused_scones_loss(logits.requires_grad_(), targets, pad_id=0, alpha=0.5)
        raw[f"fused_loss_{label}_s"], raw[f"plain_loss_{label}_s"], ratios[f"fused_loss_time_over_plain_{label}"] = \
            side_by_side(lambda: fused().backward(), lambda: plain().backward(), repeats=3)
        raw[f"plain_loss_{label}_bytes"] = peak_memory(plain)
        raw[f"fused_loss_{label}_bytes"] = peak_memory(fused)
        ratios[f"fused_loss_peak_mem_over_plain_{label}"] = raw[f"fused_loss_{label}_bytes"] / raw[f"plain_loss_{label}_bytes"]

    # g. three seeds of one model trained together (nbsupport.batched) against the same three one by one:
    # one epoch over the same pairs, dropout 0 so that both must end with the same validation loss
    sub = Encoded(task.train.src[:sz["stack_pairs"]], task.train.tgt[:sz["stack_pairs"]])
    for k in (1, 4):
        stack_cfgs = [TrainConfig(epochs=1, max_tokens=1024, warmup=10, seed=s) for s in range(3)]
        inits = []
        for s in range(3):
            torch.manual_seed(s)
            inits.append(Transformer(mc(k, dropout=0.0)).to(dev))
        alone_models = [copy.deepcopy(m) for m in inits]
        together_models = [copy.deepcopy(m) for m in inits]
        alone_h, together_h = [], []
        alone_s = _timed(lambda: alone_h.extend(train(m, sub, sub, c, dev, progress=False)
                                                for m, c in zip(alone_models, stack_cfgs)))
        together_s = _timed(lambda: together_h.extend(train_together(together_models, sub, sub, stack_cfgs, dev)))
        steps = sum(1 for _ in sub.batches(1024, shuffle=False, seed=0, device="cpu"))
        raw[f"three_seeds_k{k}_one_by_one_s"], raw[f"three_seeds_k{k}_together_s"] = alone_s, together_s
        raw[f"stacked_step_per_model_k{k}_ms"] = 1000 * together_s / steps / 3
        raw[f"single_step_k{k}_ms"] = 1000 * alone_s / steps / 3
        raw[f"three_seeds_k{k}_max_valid_rel_diff"] = max(abs(a.best_valid - b.best_valid) / a.best_valid
                                                          for a, b in zip(alone_h, together_h))
        ratios[f"three_seeds_k{k}_together_speedup_over_one_by_one"] = alone_s / together_s

    # f. widget interactions: seconds per re-render of each kind of live view, at the lab
    # profile's toy model size (untrained, so every hypothesis runs to the length cap: the slow case)
    latency = widget_latency(task, dev, repeats=5 if args.size == "lab" else 2)
    raw.update({f"widget_{k}_s": v for k, v in latency.items()})

    device = (torch.cuda.get_device_name(0) if dev.type == "cuda"
              else f"CPU {platform.machine()}, {torch.get_num_threads()} threads")
    memory_kind = "CUDA max_memory_allocated" if dev.type == "cuda" else "bytes autograd saves for backward"
    out = {"device": device, "size": args.size, "memory_measure": memory_kind, "torch": torch.__version__, **ratios,
           "raw": raw}
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(out, indent=2))
    lines = [f"Measured on {device} (torch {torch.__version__}, size {args.size}; memory: {memory_kind}).", "",
             "| ratio | value |", "| --- | --- |"] + [f"| {k} | {v:.2f} |" for k, v in ratios.items()]
    lines += ["", "Widget interaction latency (median seconds per re-render, lab toy model size, untrained: "
              "every hypothesis runs to the length cap; the target is 0.3 s, an exact search may take its budget):",
              "", "| view | seconds |", "| --- | --- |"] + [f"| {k} | {v:.3f} |" for k, v in latency.items()]
    (folder / "results.md").write_text("\n".join(lines) + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(ratios) + 1))
    ax.barh(list(ratios), list(ratios.values()), color="steelblue")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xlabel("ratio (measured side by side)")
    ax.set_title(f"{device}, size {args.size}", fontsize=9)
    fig.tight_layout()
    fig.savefig(folder / "results.png", dpi=100)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
