"""Solutions of notebook 05's exercises (nbs.exercises.solution("05_target_conditioning", N) prints one)."""

# %% exercise 1
collapsed = F.one_hot(torch.zeros(8, dtype=torch.long), K).float()
balanced = F.one_hot(torch.arange(8) % K, K).float()
uniform = torch.full((8, K), 1 / K)

def batch_entropy(p):
    p_mean = p.mean(0)
    return -(p_mean * torch.log(p_mean.clamp_min(1e-12))).sum().item()   # clamp: 0 log 0 = 0

l_xe = {name: batch_entropy(p) for name, p in (("collapsed", collapsed), ("balanced", balanced), ("uniform", uniform))}

# %% exercise 2
with torch.no_grad():
    p = torch.softmax(te.domain_scores(src.to(device), tgt_out.to(device)), dim=-1)   # (sentences, K)
p_mean = p.mean(0)
batch_h = -(p_mean * torch.log(p_mean.clamp_min(1e-12))).sum().item()            # L_XE: entropy of the mean
sentence_h = -(p * torch.log(p.clamp_min(1e-12))).sum(-1).mean().item()          # mean of the rows' entropies
