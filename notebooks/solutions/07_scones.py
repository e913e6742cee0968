"""Solutions of notebook 07's exercises (nbs.exercises.solution("07_scones", N) prints one)."""

# %% exercise 1
q = data_probabilities(full, "high")
full_alpha1 = sum(math.log(sigma_star(p, 1.0)) for p in q)    # sigma* = q at alpha = 1: the softmax's score
curse_at_alpha1 = True

# %% exercise 2
full_minus_the = {name: score(models["high", name], tasks["high"], source, full)
                  - score(models["high", name], tasks["high"], source, "the") for name in MODELS}
