"""Solutions of notebook 03's exercises (nbs.exercises.solution("03_dropout_in_the_e_step", N) prints one)."""

# %% exercise 1
d = init_details[2]                                        # numpy arrays, one entry per sampled sentence
median_gap = float(torch.from_numpy(d["gap"]).median())
small = d["gap"] < median_gap
flip_rate_by_gap = {"small": float(d["flipped"][small].mean()), "large": float(d["flipped"][~small].mean())}

# %% exercise 2
em_model = models["E&M"].experts[0]                                       # its one shared network
clean_em, noisy_em = nbs.analysis.estep_with_dropout(em_model, src, tgt_in, tgt_out, P_PAPER, SEED)   # (pairs, K) each
em_flip = float((clean_em.argmin(1) != noisy_em.argmin(1)).float().mean())   # section 1's comparison, averaged
two = clean_em.topk(2, dim=1, largest=False).values                          # each row's best and second-best NLL
em_gap = float((two[:, 1] - two[:, 0]).mean())
