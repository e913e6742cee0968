"""Bad input a new user would give the infrastructure: each is a clear error naming the valid
values (or what to run), or is handled."""
import json
import multiprocessing
import sys
import types

import numpy as np
import pytest
import torch

import nbsupport as nbs
from nbsupport import cache
from nbsupport.harness import run_notebooks
from nbsupport.data import bible, prepare
from nbsupport.models import Transformer, TransformerConfig
from nbsupport.cache import models_dir
from nbsupport.pipeline import train_or_load
from nbsupport.train import Encoded, TrainConfig, make_optimizer

NOTEBOOK = run_notebooks.notebook_paths()[0]


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_BUILD", str(tmp_path / "build"))


# --------------------------------------------------------------------------- the caches
def tiny_run(name="tiny-resume"):
    c = nbs.data.toy(n_train=200, n_dev=20, n_test=5, seed=3)
    sv = nbs.data.WordVocab.build(c.train.src)
    tv = nbs.data.WordVocab.build(r for rs in c.train.refs for r in rs)
    tr, va = Encoded.from_split(c.train, sv, tv), Encoded.from_split(c.dev, sv, tv)
    mc = TransformerConfig(len(sv), len(tv), d_model=16, n_heads=2, d_ff=32, enc_layers=1, dec_layers=1)
    return train_or_load(name, mc, TrainConfig(epochs=1, max_tokens=512, warmup=10), {"toy": "resume"}, tr, va,
                         torch.device("cpu"), progress=False)


def test_corrupt_resume_checkpoint_is_deleted_and_retrained(capsys):
    """A truncated `*.partial.pt` crashed every later run in torch.load, without naming the file."""
    clean, _ = tiny_run()
    (final,) = models_dir().glob("tiny-resume-*.pt")
    partial = final.with_suffix(".partial.pt")
    final.unlink()
    partial.write_bytes(b"PK\x03\x04 truncated by a full disk")
    capsys.readouterr()
    again, history = tiny_run()
    out = capsys.readouterr().out
    assert str(partial) in out and "training from the start" in out
    assert not partial.exists() and final.exists()
    assert [e["epoch"] for e in history.epochs] == [1]
    # retrained from the same initial weights as a run that never saw the corrupt file
    assert all(torch.equal(a, b) for a, b in zip(clean.state_dict().values(), again.state_dict().values()))


def cached_text(key, build_hook=None, load_hook=None):
    def build(tmp):
        if build_hook:
            build_hook()
        tmp.write_text("fresh")

    def load(path):
        if load_hook:
            load_hook(path)
        text = path.read_text()
        if text != "fresh":
            raise ValueError("corrupt")
        return text

    return cache.cached_file("race", key, build, load, suffix=".txt")


def corrupt_entry(key):
    cached_text(key)
    (entry,) = nbs.paths.cache_dir().glob("race-*.txt")
    entry.write_text("garbage")
    return entry


def test_corrupt_cache_entry_removed_by_another_process_meanwhile():
    """The other process unlinks the corrupt entry between our failed load and our unlink."""
    entry = corrupt_entry({"k": 1})

    def other_process_got_there_first(path):
        if path.read_text() == "garbage":
            path.unlink()
            raise ValueError("corrupt")

    assert cached_text({"k": 1}, load_hook=other_process_got_there_first) == "fresh"
    assert entry.read_text() == "fresh"


def _rebuild_in_process(role, build_dir, barrier, first_unlinked, second_unlinked, errors):
    import os
    os.environ["NBS_BUILD"] = build_dir
    try:
        if role == 0:   # fails to load, unlinks, then waits in build until the other has unlinked too
            hooks = dict(load_hook=lambda p: barrier.wait(),
                         build_hook=lambda: (first_unlinked.set(), second_unlinked.wait(20)))
        else:           # fails to load, waits until the first has unlinked, then unlinks the missing file
            hooks = dict(load_hook=lambda p: (barrier.wait(), first_unlinked.wait(20)),
                         build_hook=second_unlinked.set)
        assert cached_text({"k": 2}, **hooks) == "fresh"
    except BaseException as err:    # noqa: BLE001 (reported to the parent)
        errors.put(f"{type(err).__name__}: {err}")


def test_two_processes_rebuilding_the_same_corrupt_entry():
    entry = corrupt_entry({"k": 2})
    ctx = multiprocessing.get_context("fork")
    barrier, first, second, errors = ctx.Barrier(2), ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_rebuild_in_process, args=(r, str(nbs.paths.build_dir()), barrier, first, second,
                                                             errors)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.terminate()
    assert errors.empty(), errors.get()      # before the fix: FileNotFoundError in the second one's unlink
    assert not alive and [p.exitcode for p in procs] == [0, 0]
    assert entry.read_text() == "fresh"


# --------------------------------------------------------------------------- the Bible
@pytest.fixture(scope="module")
def verses_lines():
    path = bible.data_dir() / "bible" / "verses.tsv"
    if not path.exists():
        pytest.skip("the Bible is not prepared (make data)")
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def broken_files(lines):
    header, rows = lines[0], lines[1:]
    return {
        "empty": "",
        "header only": header,
        "truncated mid-row": "".join(lines)[:5_000_000],
        "truncated at a line": header + "".join(rows[:-100]),
        "no dev split": header + "".join(r for r in rows if r.split("\t")[4] != "dev"),
        "a version missing": "".join("\t".join(l.rstrip("\n").split("\t")[:-1]) + "\n" for l in lines),
        "not a tsv": "<html>proxy error</html>\n",
    }


@pytest.mark.parametrize("case", ["empty", "header only", "truncated mid-row", "truncated at a line",
                                  "no dev split", "a version missing", "not a tsv"])
def test_broken_verses_tsv_says_to_run_make_data(verses_lines, tmp_path, case):
    path = tmp_path / "verses.tsv"
    path.write_text(broken_files(verses_lines)[case], encoding="utf-8")
    with pytest.raises(bible.CorpusError, match=r"make data") as err:
        bible.verses("dev", path=path)
    assert str(path) in str(err.value)


def test_complete_verses_tsv_loads_and_a_rewrite_is_reloaded(verses_lines, tmp_path):
    path = tmp_path / "verses.tsv"
    path.write_text("".join(verses_lines), encoding="utf-8")
    assert {s: len(bible.verses(s, path=path)) for s in bible.SPLITS} == bible.SPLIT_SIZES
    path.write_text("".join(verses_lines[:1000]), encoding="utf-8")     # rewritten in place: not the old rows
    with pytest.raises(bible.CorpusError, match="verses per split"):
        bible.verses(path=path)


def test_prepare_rebuilds_a_truncated_extraction(verses_lines, tmp_path, monkeypatch):
    monkeypatch.setenv("NBS_DATA", str(tmp_path))
    path = tmp_path / "bible" / "verses.tsv"
    path.parent.mkdir()
    path.write_text("".join(verses_lines[:-5]), encoding="utf-8")
    calls = []
    monkeypatch.setattr(bible, "extract", lambda p: calls.append(p) or path.write_text("".join(verses_lines)))
    prepare.prepare()
    assert calls == [path] and len(bible.verses(path=path)) == len(verses_lines) - 1
    prepare.prepare()                     # complete now: kept
    assert calls == [path]


# --------------------------------------------------------------------------- seeds, devices, configs
@pytest.mark.parametrize("seed", ["1", 1.5, None, True])
def test_non_integer_seed_is_a_clear_error(seed):
    with pytest.raises(TypeError, match="seed must be an integer"):
        nbs.setup(seed)
    with pytest.raises(TypeError, match="seed must be an integer"):
        nbs.start("ci", seed, quiet=True)
    with pytest.raises(TypeError, match="seed must be an integer"):
        nbs.seed_everything(seed)


def test_numpy_integer_seed_is_accepted():
    nbs.seed_everything(np.int64(5))
    a = torch.rand(3)
    nbs.seed_everything(5)
    assert torch.equal(a, torch.rand(3))


def test_device_that_is_not_there(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("NBS_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match=r"no CUDA device is available.*unset NBS_DEVICE"):
        nbs.start("ci", quiet=True)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        nbs.choose_device("cuda")
    monkeypatch.setenv("NBS_DEVICE", "gpu")
    with pytest.raises(ValueError, match="cuda, mps, cpu"):
        nbs.start("ci", quiet=True)
    monkeypatch.setenv("NBS_DEVICE", "")          # `export NBS_DEVICE=`: unset
    assert nbs.start("ci", quiet=True).device.type in ("mps", "cpu")


@pytest.mark.parametrize("kwargs, word", [
    (dict(warmup=0), "warmup=1 is no warm-up"), (dict(epochs=2.5), "epochs"), (dict(max_tokens=0), "max_tokens"),
    (dict(lr=0.0), "lr"), (dict(clip_norm=-1.0), "clip_norm"), (dict(label_smoothing=1.0), "label_smoothing"),
])
def test_train_config_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        TrainConfig(**kwargs)


def test_warmup_one_starts_at_the_peak_and_decays():
    """Before, warmup=0 divided by zero in the first step; warmup=1 is the "no warm-up" schedule."""
    model = Transformer(TransformerConfig(10, 10, d_model=8, n_heads=2, d_ff=8, enc_layers=1, dec_layers=1))
    opt, sched = make_optimizer(model, TrainConfig(lr=1.0, warmup=1))
    lrs = []
    for _ in range(4):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([1.0, 2 ** -0.5, 3 ** -0.5, 0.5])


# --------------------------------------------------------------------------- source languages, profiles
def test_unknown_source_language_names_the_valid_ones():
    with pytest.raises(ValueError, match="'xa', 'xb'"):
        nbs.pipeline.toy_task("ci", trilingual=True, src_lang="fr")
    c = nbs.data.toy_trilingual(n_train=20, n_dev=5, n_test=5)
    with pytest.raises(ValueError, match="'xa', 'xb'"):
        c.train.pairs("de")
    data = nbs.multisource.toy_data(nbs.profile("ci"))
    with pytest.raises(ValueError, match=r"'xa', 'xb', 'xc' \(roles: fr = 'xa', de = 'xb', close = 'xc'"):
        data.encoded("dev", ("fr",))
    with pytest.raises(ValueError, match=r"'e' \(Elberfelder\)"):
        nbs.pipeline.bible_task("ci", src="de")
    assert nbs.pipeline.toy_task("ci", trilingual=True, src_lang="xb").src_lang == "xb"


def test_unknown_toy_setting_names_the_valid_ones():
    with pytest.raises(TypeError, match="ambiguty.*valid: .*ambiguity"):
        nbs.pipeline.toy_task("ci", ambiguty="low")
    with pytest.raises(TypeError, match="ambiguty.*valid: .*ambiguity"):
        nbs.data.load("toy-trilingual", ambiguty="low")
    with pytest.raises(TypeError, match="seed must be an integer"):
        nbs.data.toy(seed="1")


def test_profile_name_is_accepted_where_a_profile_is_expected():
    by_name = nbs.pipeline.toy_task("ci", seed=1)
    by_profile = nbs.pipeline.toy_task(nbs.profile("ci"), seed=1)
    assert by_name.key == by_profile.key and len(by_name.train) == nbs.profile("ci").toy_train
    assert nbs.profile(nbs.profile("lab")) is nbs.profile("lab")
    with pytest.raises(TypeError, match="ci, lab, full"):
        nbs.profile(600)
    assert nbs.mixture_runs.task("ci").key == nbs.mixture_runs.task(nbs.profile("ci")).key
    assert nbs.multisource.toy_data("ci").key == nbs.multisource.toy_data(nbs.profile("ci")).key


def test_every_function_taking_a_profile_accepts_its_name():
    """Each package function whose ``cfg`` is annotated ``Profile`` starts by passing it through
    ``profile()``, so a name works wherever a Profile does (read from the source with ast)."""
    import ast
    from pathlib import Path
    missing = []
    for path in Path(nbs.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.args.args and node.args.args[0].arg == "cfg" \
                    and "Profile" in ast.unparse(node.args.args[0].annotation or ast.Constant(None)):
                body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
                if not body or ast.unparse(body[0]) != "cfg = profile(cfg)":
                    missing.append(f"{path.name}:{node.name}")
    assert not missing, f"functions that fail on a profile name: {missing}"


# --------------------------------------------------------------------------- notebook parameters
def test_parameter_names_are_the_parameters_cell_assignments(tmp_path):
    cells = [{"cell_type": "code", "metadata": {}, "source": "X = 1"},
             {"cell_type": "code", "metadata": {"tags": ["parameters"]},
              "source": ['PROFILE = "lab"  # a comment\n', "SEED: int = 0\n", "A = B = 2\n", "print(A)"]}]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert run_notebooks.parameter_names(path) == ["PROFILE", "SEED", "A", "B"]
    assert run_notebooks.parameter_names(NOTEBOOK) == ["PROFILE", "SEED", "INTERACTIVE"]


def test_execute_rejects_unknown_parameters_before_starting_a_kernel(monkeypatch, tmp_path):
    papermill = types.SimpleNamespace(execute_notebook=lambda *a, **k: pytest.fail("a kernel was started"))
    monkeypatch.setitem(sys.modules, "papermill", papermill)
    with pytest.raises(ValueError, match=r"'PROFLE'.*did you mean 'PROFILE'.*PROFILE, SEED, INTERACTIVE"):
        run_notebooks.execute(NOTEBOOK, "ci", out_dir=tmp_path, parameters={"PROFLE": "ci"})
    with pytest.raises(TypeError, match="seed must be an integer"):
        run_notebooks.execute(NOTEBOOK, "ci", seed="0", out_dir=tmp_path)
    with pytest.raises(TypeError, match="PROFILE must be a profile name"):
        run_notebooks.execute(NOTEBOOK, nbs.profile("ci"), out_dir=tmp_path)


def test_run_notebooks_command_line_parameters(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(run_notebooks, "execute", lambda path, prof, seed, parameters: calls.append(parameters))
    with pytest.raises(SystemExit) as exit_:
        run_notebooks.main(["-p", "PROFLE", "ci", str(NOTEBOOK)])
    assert exit_.value.code == 2 and not calls
    assert "valid parameters: PROFILE, SEED, INTERACTIVE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_notebooks.main(["--profile", "ci", "-p", "PROFILE", "full", str(NOTEBOOK)])
    assert run_notebooks.main(["-p", "PROFILE", "ci", "-p", "SEED", "3", str(NOTEBOOK)]) == 0
    assert calls == [{"PROFILE": "ci", "SEED": 3}]
    assert run_notebooks.main(["--profile", "ci", str(NOTEBOOK)]) == 0
    assert calls[-1] == {"PROFILE": "ci", "SEED": 0}
    assert [run_notebooks.parameter_value(v) for v in ("ci", "1", "0.5", "False")] == ["ci", 1, 0.5, False]
