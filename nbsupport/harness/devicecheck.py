"""An opt-in device checker that finds GPU device mismatches on a CPU-only machine.

On a CPU every tensor lives on the same device, so a tensor built without ``device=`` and
handed to a model works here and fails on a GPU ("Expected all tensors to be on the same
device"). With ``NBS_CHECK_DEVICES=1`` (read by :func:`nbsupport.harness.start`) the package
simulates a second device:

* a tensor built by a torch factory (``torch.tensor``, ``zeros``, ``arange``, ``from_numpy``,
  ...) without a ``device`` argument, or by ``Tensor.cpu()``, is a *host* tensor (the
  ``HostTensor`` subclass); whatever is computed from a host tensor is a host tensor too,
  except that, as on CUDA, a 0-dim host tensor combined with device tensors gives a device
  tensor; ``.to(device)``, ``.cuda()`` or a factory with an explicit ``device`` gives a
  device tensor;
* a module moved with ``.to(device)`` / ``.cuda()`` claims that device, and a forward
  pre-hook on every module then rejects a host tensor of one dimension or more among its
  positional inputs (``DeviceMismatch``).

Models that stay where they were built (never ``.to(...)``) are not checked, so a probe built
on the CPU and fed CPU tensors is fine, as it is on a GPU machine.
"""
from __future__ import annotations

import contextlib
import functools
import os

import torch
from torch.nn.utils.rnn import PackedSequence
from torch.utils._pytree import tree_leaves, tree_map_only

ENV = "NBS_CHECK_DEVICES"
FACTORIES = ("tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "empty", "full", "arange",
             "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm", "tril_indices", "triu_indices")

# ops that take CPU-side arguments on every device; their results are where their input is
FOLLOW_INPUT = ("_pack_padded_sequence",)


class DeviceMismatch(RuntimeError):
    """A tensor built on the host reached a module that claims another device."""


class HostTensor(torch.Tensor):
    """A tensor on the simulated host (CPU) device while models claim another one."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.__format__:       # f"{t:.2f}" formats plain tensors only
            return format(args[0].as_subclass(torch.Tensor), *args[1:])
        if func is torch.Tensor.__repr__:         # printed as any tensor: tensor([...])
            return repr(args[0].as_subclass(torch.Tensor))
        with torch._C.DisableTorchFunctionSubclass():    # plain tensors inside: no recursion
            return _mark(func(*args, **kwargs), _result_on_host(func, args, kwargs))


def _result_on_host(func, args, kwargs) -> bool:
    if func is torch.Tensor.to:
        target = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
        other = next((a for a in args[1:] if isinstance(a, torch.Tensor)), None)
        host = isinstance(other, HostTensor) if other is not None else target is None
    elif func is torch.Tensor.cuda:
        host = False
    elif func is torch.Tensor.cpu:
        host = True
    elif getattr(func, "__name__", "") in FOLLOW_INPUT:
        host = isinstance(args[0], HostTensor)
    else:
        tensors = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        # like CUDA: a 0-dim host tensor may join device tensors (the result is on the device)
        host = any(isinstance(t, HostTensor) and t.dim() > 0 for t in tensors) or \
            all(isinstance(t, HostTensor) for t in tensors)
    return host


def _mark(out, host: bool):
    if host:
        return tree_map_only(torch.Tensor, lambda t: t if isinstance(t, HostTensor) else t.as_subclass(HostTensor), out)
    return tree_map_only(HostTensor, lambda t: t.as_subclass(torch.Tensor), out)


def _factory(fn):
    @functools.wraps(fn)
    def build(*args, **kwargs):
        out = fn(*args, **kwargs)
        if kwargs.get("device") is None and not (args and isinstance(args[0], torch.Tensor)):
            return out.as_subclass(HostTensor)
        return out
    return build


def _check_inputs(module, args):
    claimed = getattr(module, "_nbs_device", None)
    if claimed is None:
        return
    # a PackedSequence keeps its batch_sizes on the CPU on every device: check its data only
    leaves = tree_leaves(args, is_leaf=lambda x: isinstance(x, PackedSequence))
    hosts = [x.data if isinstance(x, PackedSequence) else x for x in leaves]
    hosts = [t for t in hosts if isinstance(t, HostTensor)]
    with torch._C.DisableTorchFunctionSubclass():
        shapes = [tuple(t.shape) for t in hosts if t.dim() > 0]
    if shapes:
        raise DeviceMismatch(
            f"{type(module).__name__} was moved to {claimed} but got a tensor of shape {shapes[0]} built on the "
            f"CPU (a torch factory without device=, or .cpu()): build it with device=<the model's device> "
            f"or move it with .to(device)")


def _claim(module, device):
    for m in module.modules():
        m._nbs_device = device


_ACTIVE: list = []


def enabled() -> bool:
    return bool(_ACTIVE)


def enable() -> None:
    """Turn the checker on (idempotent): patch the factories, nn.Module.to/cuda/cpu and
    nn.Parameter, and register the global forward pre-hook."""
    if _ACTIVE:
        return
    saved = [(torch, name, getattr(torch, name)) for name in FACTORIES if hasattr(torch, name)]
    module_to, module_cuda, module_cpu = torch.nn.Module.to, torch.nn.Module.cuda, torch.nn.Module.cpu
    parameter_new = torch.nn.Parameter.__new__
    tensor_cpu = torch.Tensor.cpu

    def to_host(self, *args, **kwargs):
        return tensor_cpu(self, *args, **kwargs).as_subclass(HostTensor)

    def to(self, *args, **kwargs):
        out = module_to(self, *args, **kwargs)
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None:
            _claim(self, device)
        return out

    def cuda(self, device=None):
        out = module_cuda(self, device)
        _claim(self, torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda"))
        return out

    def cpu(self):
        out = module_cpu(self)
        _claim(self, None)
        return out

    def new_parameter(cls, data=None, requires_grad=True):
        if isinstance(data, HostTensor):       # parameters are plain tensors; .to(device) makes the claim
            data = data.as_subclass(torch.Tensor)
        return parameter_new(cls, data, requires_grad)

    for _, name, fn in saved:
        setattr(torch, name, _factory(fn))
    torch.nn.Module.to, torch.nn.Module.cuda, torch.nn.Module.cpu = to, cuda, cpu
    torch.nn.Parameter.__new__ = new_parameter
    torch.Tensor.cpu = to_host
    hook = torch.nn.modules.module.register_module_forward_pre_hook(_check_inputs)

    def undo():
        hook.remove()
        for owner, name, fn in saved:
            setattr(owner, name, fn)
        torch.nn.Module.to, torch.nn.Module.cuda, torch.nn.Module.cpu = module_to, module_cuda, module_cpu
        torch.nn.Parameter.__new__ = parameter_new
        torch.Tensor.cpu = tensor_cpu
    _ACTIVE.append(undo)


def disable() -> None:
    while _ACTIVE:
        _ACTIVE.pop()()


@contextlib.contextmanager
def checking():
    """``with checking():`` the checker on inside the block only (for tests)."""
    was = enabled()
    enable()
    try:
        yield
    finally:
        if not was:
            disable()
