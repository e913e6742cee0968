"""Solutions of notebook 02's exercises (nbs.exercises.solution("02_hard_moe", N) prints one)."""

# %% exercise 1
batch = tuple(t.to(device) for t in (src, tgt_in, tgt_out))
z_eval = {"untrained": nbs.models.hard_em.hard_em_assign(probe.to(device), *batch),
          "trained": nbs.models.hard_em.hard_em_assign(moe, *batch)}
z_dropout = {"untrained": nbs.models.hard_em.hard_em_assign(probe, *batch, e_step_mode="train"),
             "trained": nbs.models.hard_em.hard_em_assign(moe, *batch, e_step_mode="train")}
flipped = {k: (z_dropout[k] != z_eval[k]).float().mean().item() for k in z_eval}

# %% exercise 2
best_refs = {max(range(S), key=lambda j: nbs.metrics.sentence_bleu(h, test.refs[0][j])) for h in hyps["hard_moe"][0]}
covered = len(best_refs)

# %% exercise 3
rows = [row for row in conf if sum(row) > 0]               # experts that wrote any hypothesis
my_purity = float(sum(max(row) / sum(row) for row in rows) / len(rows))
