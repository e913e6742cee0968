"""Solutions of notebook 03's exercises (nbs.exercises.solution("03_dropout_in_the_e_step", N) prints one)."""

# %% exercise 1
d = init_details[2]                                        # numpy arrays, one entry per sampled sentence
median_gap = float(torch.from_numpy(d["gap"]).median())
small = d["gap"] < median_gap
flip_rate_by_gap = {"small": float(d["flipped"][small].mean()), "large": float(d["flipped"][~small].mean())}

# %% exercise 2
em_model = models["strong", P_PAPER, "E&M"].experts[0]
f = nbs.analysis.estep_flips(em_model, src, tgt_in, tgt_out, P_PAPER, SEED)
em_flip, em_gap = f["flip_rate"], f["gap"]
