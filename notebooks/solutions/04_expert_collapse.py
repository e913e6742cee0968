"""Solutions of notebook 04's exercises (nbs.exercises.solution("04_expert_collapse", N) prints one)."""

# %% exercise 1
pair = tuple(t[:1].to(device) for t in (src, tgt_in, tgt_out))
with torch.no_grad():
    nll = {name: m.eval().expert_nll(*m.encode(pair[0]), *pair[1:])[0].cpu() for name, m in example.items()}
losses = {name: {"hMup": v.min().item(),                        # the best expert's NLL
                 "sMup": -torch.logsumexp(-v, 0).item()}        # -log sum_z p(y|z,x)
          for name, v in nll.items()}

# %% exercise 2
my_usage = {}
for name in (BASE, "online.shared.hMlp"):
    model, wins = models[name].eval(), torch.zeros(K, dtype=torch.long)
    with torch.no_grad():
        for src_b, tgt_in_b, tgt_out_b, _ in task.train.batches(2048, shuffle=False, seed=0, device=device):
            winners = model.expert_nll(*model.encode(src_b), tgt_in_b, tgt_out_b).argmin(1)   # lowest NLL, no prior
            wins += torch.bincount(winners.cpu(), minlength=K)
    my_usage[name] = wins.tolist()
