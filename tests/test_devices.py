"""Device hygiene on a CPU-only machine: nbsupport.devicecheck simulates a second device, so a
tensor built without ``device=`` and handed to a model that was moved to its device fails here
as it would on a GPU. The notebooks' ci runs (tests/test_notebooks.py) execute every widget's
default view with the checker on; these tests check the checker and the fixed defects."""
import ast
import json
import types
from pathlib import Path

import pytest
import torch

import nbsupport as nbs
from nbsupport.harness import devicecheck
from nbsupport.data import WordVocab
from nbsupport.models import Transformer, TransformerConfig

ROOT = Path(__file__).resolve().parent.parent
DEVICE = torch.device("cpu")      # the model's device, as nbs.setup() returns it here


@pytest.fixture
def checking():
    with devicecheck.checking():
        yield


def tiny_model(n_latent=1):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(20, 20, d_model=16, d_ff=32, enc_layers=1, dec_layers=1, n_latent=n_latent)).to(DEVICE).eval()


def test_host_tensor_to_a_moved_model_fails(checking):
    model = tiny_model()
    with pytest.raises(devicecheck.DeviceMismatch, match="built on the CPU"):
        model.encode(torch.tensor([[5, 6, 7]]))
    with pytest.raises(devicecheck.DeviceMismatch):          # what is computed from it stays on the host
        model.encode(torch.arange(5, 8).unsqueeze(0).repeat(2, 1))
    with pytest.raises(devicecheck.DeviceMismatch):
        model.encode(torch.tensor([[5, 6, 7]], device=DEVICE).cpu())


def test_device_tensors_and_unmoved_models_pass(checking):
    model = tiny_model()
    for src in (torch.tensor([[5, 6, 7]], device=DEVICE), torch.tensor([[5, 6, 7]]).to(DEVICE),
                torch.full((1, 3), 5, device=DEVICE) + torch.tensor(1)):     # a 0-dim host tensor may join, as on CUDA
        assert model.encode(src)[0].shape == (1, 3, 16)
    probe = Transformer(TransformerConfig(20, 20, d_model=16, d_ff=32, enc_layers=1, dec_layers=1))   # never moved: not checked
    assert probe.encode(torch.tensor([[5, 6]]))[0].shape == (1, 2, 16)
    assert type(next(probe.parameters())) is torch.nn.Parameter           # parameters are never host tensors


def test_checker_is_off_by_default_and_env_is_validated(monkeypatch):
    assert not devicecheck.enabled() and type(torch.zeros(1)) is torch.Tensor
    monkeypatch.setenv(devicecheck.ENV, "yes")
    with pytest.raises(ValueError, match="NBS_CHECK_DEVICES must be 1"):
        nbs.start("ci", quiet=True)
    monkeypatch.setenv(devicecheck.ENV, "1")
    try:
        assert nbs.start("ci", quiet=True).device.type == "cpu" and devicecheck.enabled()
        assert type(torch.zeros(1)) is devicecheck.HostTensor
    finally:
        devicecheck.disable()
    assert type(torch.zeros(1)) is torch.Tensor


def test_latent_greedy_builds_its_latents_on_the_model_device(checking):
    """decode.generate(method="latent_greedy") built z = 0..K-1 with torch.arange(k) on the CPU."""
    model = tiny_model(n_latent=3)
    out = nbs.decode.token_ids(nbs.decode.decode(model, torch.tensor([[5, 6, 7]], device=DEVICE), "latent_greedy", n=3))
    assert len(out) == 1 and len(out[0]) == 3


def render_function(notebook: str, name: str) -> str:
    """The source of ``def name(...)`` in a notebook's code cells (without the rest of its cell)."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and f"def {name}(" in src:
            node = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == name)
            return ast.get_source_segment(src, node)
    raise AssertionError(f"{notebook} has no {name}")


def test_notebook_06_render_beam_scores_on_the_model_device(checking):
    """Notebook 07's beam widget once built its source with torch.tensor([...]) on the CPU and
    handed it to a model on the GPU; its live view (beam search, the empty translation), run on
    stand-in models, must pass the checker."""
    sentences = ["a b c", "d e"]
    vocab = WordVocab.build(sentences)
    task = types.SimpleNamespace(src_vocab=vocab, tgt_vocab=vocab, corpus=types.SimpleNamespace(
        test=types.SimpleNamespace(src=sentences, refs=[[s] for s in sentences])))
    namespace = {"nbs": nbs, "torch": torch, "device": DEVICE, "tasks": {"high": task, "low": task},
                 "models": {("high", "softmax"): tiny_model(), ("high", "scones_0.2"): tiny_model()},
                 "live_sources": sentences, "opening_beam": 4, "TITLE": {"high": "high", "low": "low"}}
    exec(render_function("07_scones.ipynb", "render_beam"), namespace)
    html = namespace["render_beam"]().data
    assert html.count("the empty translation (EOS first):") == 2
    # exact search within a budget (lesson 09's models answer through the same view)
    exact = nbs.live.beam_view(tiny_model(), vocab, vocab, "a b c", beam=2, n_best=2, exact_budget=50).data
    assert "exact search:" in exact


def test_packed_lstm_sources_pass_and_host_sources_fail(checking):
    """pack_padded_sequence takes its lengths on the CPU on every device: not a mismatch."""
    from nbsupport.models.lstm import LSTMConfig, MultiSourceLSTM
    torch.manual_seed(0)
    model = MultiSourceLSTM(LSTMConfig((20, 20), 20, d_model=16, layers=1, attention="local")).to(DEVICE).eval()
    src = (torch.randint(4, 20, (2, 5), device=DEVICE), torch.randint(4, 20, (2, 6), device=DEVICE))
    tgt = torch.randint(4, 20, (2, 4), device=DEVICE)
    assert model(src, tgt).shape == (2, 4, 20)
    with pytest.raises(devicecheck.DeviceMismatch):
        model((src[0], torch.randint(4, 20, (2, 6))), tgt)
