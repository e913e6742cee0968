"""Solutions of notebook 08's exercises (nbs.exercises.solution("08_ibm3_synthetic_ambiguity", N) prints one)."""

# %% exercise 1
GRID = (0.1, 0.3, 0.5, 1.0, 1.5)
top_prob = {g: float(temper(p, g).max()) for g in GRID}

# %% exercise 2
distinct = {}
for g in (lo, hi):
    rng = np.random.default_rng(SEED)
    distinct[g] = len({tuple(sampler.sample(example, g, rng).words) for _ in range(20)})
