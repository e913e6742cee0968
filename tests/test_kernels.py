"""The fused SCONES loss and the chunked linear + loss against the plain torch composition."""
import os

import pytest
import torch

from nbsupport.kernels import HAVE_TRITON, chunked_linear_loss, fused_scones_loss
from nbsupport.losses import cross_entropy_loss, scones_loss

PAD = 0


def data(seed=0, b=3, t=5, v=37, d=8):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, t, v, generator=g) * 3
    targets = torch.randint(1, v, (b, t), generator=g)
    targets[0, -2:] = PAD
    hidden = torch.randn(b, t, d, generator=g)
    weight = torch.randn(v, d, generator=g) * 0.5
    return logits, targets, hidden, weight


@pytest.mark.parametrize("alpha, lam", [(1.0, 0.0), (0.2, 0.1)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_fused_torch_backend_matches_scones_loss(alpha, lam, reduction):
    logits, targets, _, _ = data()
    a = logits.clone().requires_grad_()
    b = logits.clone().requires_grad_()
    ref = scones_loss(a, targets, pad_id=PAD, alpha=alpha, label_smoothing=lam, reduction=reduction)
    out = fused_scones_loss(b, targets, pad_id=PAD, alpha=alpha, label_smoothing=lam, reduction=reduction,
                            backend="torch", chunk_rows=4)
    assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5)
    weights = torch.rand_like(ref)                 # a non-uniform upstream gradient
    (ref * weights).sum().backward()
    (out * weights).sum().backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not HAVE_TRITON, reason="triton is not installed (make test-kernels installs the extra)")
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                    reason="runs under the Triton interpreter only (make test-kernels sets TRITON_INTERPRET=1); "
                           "on a GPU the CUDA kernel tests cover the real kernel")
def test_triton_kernel_matches_under_the_interpreter():
    logits, targets, _, _ = data(v=19)
    a = logits.clone().requires_grad_()
    b = logits.clone().requires_grad_()
    ref = scones_loss(a, targets, pad_id=PAD, alpha=0.5, label_smoothing=0.1)
    out = fused_scones_loss(b, targets, pad_id=PAD, alpha=0.5, label_smoothing=0.1, backend="triton")
    assert torch.allclose(out, ref, atol=1e-5)
    ref.backward()
    out.backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-5)


@pytest.mark.parametrize("kind", ["softmax", "scones"])
@pytest.mark.parametrize("lam", [0.0, 0.1])
def test_chunked_linear_loss_matches_unchunked(kind, lam):
    _, targets, hidden, weight = data(1)
    h1, w1 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    h2, w2 = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    logits = h1 @ w1.t()
    if kind == "softmax":
        ref = cross_entropy_loss(logits, targets, pad_id=PAD, label_smoothing=lam)
    else:
        ref = scones_loss(logits, targets, pad_id=PAD, alpha=0.3, label_smoothing=lam)
    out = chunked_linear_loss(h2, w2, targets, pad_id=PAD, loss=kind, alpha=0.3, label_smoothing=lam, chunk_rows=4)
    assert out.item() == pytest.approx(ref.item(), rel=1e-5, abs=1e-6)
    (2 * ref).backward()
    (2 * out).backward()
    assert torch.allclose(h1.grad, h2.grad, atol=1e-5) and torch.allclose(w1.grad, w2.grad, atol=1e-5)


@pytest.mark.skipif(not (HAVE_TRITON and torch.cuda.is_available()) or os.environ.get("TRITON_INTERPRET") == "1",
                    reason="the compiled Triton kernel needs a CUDA GPU (and no interpreter)")
def test_triton_kernel_matches_on_the_gpu():
    logits, targets, _, _ = data(v=19)
    a = logits.cuda().requires_grad_()
    b = logits.cuda().requires_grad_()
    ref = scones_loss(a, targets.cuda(), pad_id=PAD, alpha=0.5, label_smoothing=0.1)
    out = fused_scones_loss(b, targets.cuda(), pad_id=PAD, alpha=0.5, label_smoothing=0.1, backend="triton")
    assert torch.allclose(out, ref, atol=1e-5)
    ref.backward()
    out.backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-5)


def test_bad_kernel_arguments():
    logits, targets, hidden, weight = data()
    with pytest.raises(ValueError, match="valid: triton, torch"):
        fused_scones_loss(logits, targets, pad_id=PAD, backend="cuda")
    with pytest.raises(ValueError, match="softmax, scones"):
        chunked_linear_loss(hidden, weight, targets, pad_id=PAD, loss="hinge")
