"""Solutions of notebook 04's exercises (nbs.exercises.solution("04_expert_collapse", N) prints one)."""

# %% exercise 1
pair = tuple(t[:1].to(device) for t in (src, tgt_in, tgt_out))
with torch.no_grad():
    nll = {name: e["model"].eval().expert_nll(*e["model"].encode(pair[0]), *pair[1:])[0].cpu() for name, e in example.items()}
losses = {name: {"hMup": v.min().item(),                        # the best expert's NLL
                 "sMup": -torch.logsumexp(-v, 0).item()}        # -log sum_z p(y|z,x)
          for name, v in nll.items()}

# %% exercise 2
def my_label(per_latent_bleu, pairwise_bleu, usage):
    """'D1', 'D2' or 'ok' for one trained model."""
    best, *others = sorted(per_latent_bleu, reverse=True)
    bleu_d1 = best > 0 and all(b < nbs.analysis.D1_RATIO * best for b in others)
    usage_d1 = sum(usage) > 0 and sum(u > 0.01 * sum(usage) for u in usage) < 2
    if bleu_d1 or usage_d1:
        return "D1"
    return "D2" if pairwise_bleu >= nbs.analysis.D2_PAIRWISE else "ok"

# %% exercise 3
with torch.no_grad():
    x = nbs.data.pad_batch([task.src_vocab.encode(test.src[0])] * K).to(device)
    ys = nbs.data.pad_batch([task.tgt_vocab.encode(r) for r in test.refs[0]]).to(device)
    memory, mask = vnmt.eval().encode(x)
    mu_p, lv_p = vnmt.prior_params(memory, mask)
    mu_q, lv_q = vnmt.posterior_params(memory, mask, ys)
kl = (0.5 * (lv_p - lv_q + (lv_q.exp() + (mu_q - mu_p) ** 2) / lv_p.exp() - 1).sum(-1)).tolist()
