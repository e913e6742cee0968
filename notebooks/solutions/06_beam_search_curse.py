"""Solutions of notebook 06's exercises (nbs.exercises.solution("06_beam_search_curse", N) prints one)."""

# %% exercise 1
full_low = tasks["low"].corpus.test.refs[0][0]
threshold_low = math.exp(sum(math.log(p) for p in data_probabilities(full_low, "low")))
larger_at_low = True        # a low-ambiguity translation pays for far fewer choices

# %% exercise 2
SENTENCE = {lv: (tasks[lv].corpus.test.src[1], tasks[lv].corpus.test.refs[1][0]) for lv in ("high", "low")}
full_minus_the = {level: score(models[level, "softmax"], tasks[level], sentence, reference)
                  - score(models[level, "softmax"], tasks[level], sentence, "the")
                  for level, (sentence, reference) in SENTENCE.items()}
