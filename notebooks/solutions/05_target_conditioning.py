"""Solutions of notebook 05's exercises (nbs.exercises.solution("05_target_conditioning", N) prints one)."""

# %% exercise 1
collapsed = F.one_hot(torch.zeros(8, dtype=torch.long), K).float()
balanced = F.one_hot(torch.arange(8) % K, K).float()

def batch_entropy(p):
    p_mean = p.mean(0)
    return -(p_mean * torch.log(p_mean.clamp_min(1e-12))).sum().item()   # clamp: 0 log 0 = 0

l_xe = {"collapsed": batch_entropy(collapsed), "balanced": batch_entropy(balanced)}

# %% exercise 2
style1_domain = max(range(K), key=lambda d: train_conf[d][1])
