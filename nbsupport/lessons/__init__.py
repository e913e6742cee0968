"""Lesson helpers: the experiments each notebook runs, built on the engine (the package's top
level). ``analysis`` (Hard-MoE and mixture measurements: purity, flip rate, D1/D2),
``beam_curse`` (notebooks 06-07's sweeps and exact search), ``ibm_tasks`` (notebooks 08-09's synthetic
tasks), ``mixture_runs`` (notebooks 03-04), ``multisource`` (notebook 01), ``comparison``
(notebook 10: every method, one task, a K sweep), ``scenarios``
(notebook 00's Fig. 1), ``exercises`` (the check after each exercise, and its solution)."""
