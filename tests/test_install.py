"""Installing the package keeps the host's torch: pip's resolver, run for real (dry run).

A GPU cloud notebook ships its own CUDA torch; ``pip install -e .`` must not replace it (a pin
would uninstall it and pull several GB, breaking torchvision/torchaudio). The check runs pip's
resolver offline on stub wheels: a fresh venv holding a stub ``torch`` 2.15.0, and a stub
``nbsupport`` whose requirements are exactly pyproject.toml's dependencies (every other
requirement is satisfied by a dependency-free stub, so nothing is fetched from the network).
Every pip run here is hermetic: no configuration file of any level (site-wide, user, ``PIP_CONFIG_FILE``)
and no ``PIP_*`` variable reaches it, so a machine whose pip caps torch gives the same answers.
"""
import json
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DEPENDENCIES = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
HOST_TORCH = "2.15.0"            # what a cloud notebook ships (a CUDA build there)


def stub_wheel(folder: Path, name: str, version: str, requires=()) -> Path:
    """A minimal pure-Python wheel of ``name`` ``version`` with no files but its metadata."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = {f"{info}/METADATA": "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
                 name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_install\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, text in files.items():
            zf.writestr(p, text)
    return path


def satisfying_version(req: Requirement) -> str:
    """A version that meets ``req`` (its lower bound or pinned version, else 1.0)."""
    for candidate in [s.version for s in req.specifier] + ["1.0"]:
        if req.specifier.contains(Version(candidate), prereleases=True):
            return candidate
    raise AssertionError(f"no stub version found for {req}")


def installed(req: Requirement) -> bool:
    """Whether this interpreter has a distribution meeting ``req``."""
    try:
        return req.specifier.contains(metadata.version(req.name))
    except metadata.PackageNotFoundError:
        return False


def hermetic_env(base=None) -> dict:
    """``base`` (default: this process's environment) without any ``PIP_*`` variable, and with
    ``PIP_CONFIG_FILE`` at the null device, which makes pip skip every configuration file,
    site-wide ones included (``--isolated`` skips only the user's file and the variables)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def pip(python: Path, *args, env=None) -> subprocess.CompletedProcess:
    """This interpreter's pip acting on the environment of ``python`` (pip's --python), with the
    environment ``env`` (default: :func:`hermetic_env`)."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
                           "--no-input", *args], capture_output=True, text=True, timeout=120,
                          env=hermetic_env() if env is None else env)


def would_install(tmp_path: Path, dependencies, host_torch: str, env=None) -> dict:
    """{name: version} that ``pip install nbsupport`` would install into an environment which
    already holds ``torch`` ``host_torch``, when nbsupport requires ``dependencies``."""
    wheels = tmp_path / "wheels"
    wheels.mkdir(parents=True)
    reqs = [Requirement(d) for d in dependencies]
    for r in reqs:
        if r.name != "torch":
            stub_wheel(wheels, r.name, satisfying_version(r))
    for v in {"2.13.0", host_torch}:          # the pinned version is on offer too
        stub_wheel(wheels, "torch", v)
    stub_wheel(wheels, "nbsupport", "0.1.0", dependencies)
    host = tmp_path / "host"
    venv.create(host, with_pip=False)
    python = host / "bin" / "python"
    offline = ["--no-index", "--find-links", str(wheels), "--isolated"]
    done = pip(python, "install", *offline, f"torch=={host_torch}", env=env)
    assert done.returncode == 0, done.stderr
    report = tmp_path / "report.json"
    done = pip(python, "install", *offline, "--dry-run", "--report", str(report), "nbsupport", env=env)
    assert done.returncode == 0, done.stderr
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def test_install_keeps_the_host_torch(tmp_path):
    plan = would_install(tmp_path, DEPENDENCIES, HOST_TORCH)
    assert "nbsupport" in plan and "numpy" in plan, plan          # the resolver did run
    assert "torch" not in plan, f"pip would replace the host's torch {HOST_TORCH} with {plan.get('torch')}"


def test_a_torch_pin_would_replace_the_host_torch(tmp_path):
    """The check above can fail: with the old pin, pip plans to install torch 2.13.0 over 2.15.0."""
    pinned = ["torch==2.13.0"] + [d for d in DEPENDENCIES if not d.startswith("torch")]
    assert would_install(tmp_path, pinned, HOST_TORCH).get("torch") == "2.13.0"


def capped_pip_configuration(tmp_path: Path) -> dict:
    """An environment whose pip is configured as some machines are: a site-wide configuration
    (found through ``XDG_CONFIG_DIRS``), a ``PIP_CONFIG_FILE`` and a ``PIP_CONSTRAINT`` variable,
    each capping torch below the host's 2.15."""
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch<=2.14.1\n")
    site = tmp_path / "xdg" / "pip"
    site.mkdir(parents=True)
    (site / "pip.conf").write_text(f"[global]\nconstraint = {constraints}\n")
    env_file = tmp_path / "pip-env.conf"
    env_file.write_text(f"[install]\nconstraint = {constraints}\n")
    return {**os.environ, "XDG_CONFIG_DIRS": str(tmp_path / "xdg"), "PIP_CONFIG_FILE": str(env_file),
            "PIP_CONSTRAINT": str(constraints)}


def test_a_capped_pip_configuration_does_not_leak_into_the_check(tmp_path):
    capped = capped_pip_configuration(tmp_path)
    plan = would_install(tmp_path / "run", DEPENDENCIES, HOST_TORCH, env=hermetic_env(capped))
    assert "nbsupport" in plan and "torch" not in plan, plan


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pip finds site-wide files through XDG_CONFIG_DIRS on Linux only")
def test_the_capped_configuration_is_real_for_pip_without_the_hermetic_environment(tmp_path):
    """The test above can fail: given the capped configuration as it is, pip refuses the host's torch."""
    only_site_wide = {**hermetic_env(), "XDG_CONFIG_DIRS": str(tmp_path / "xdg")}
    del only_site_wide["PIP_CONFIG_FILE"]
    capped_pip_configuration(tmp_path)
    with pytest.raises(AssertionError, match="ResolutionImpossible"):
        would_install(tmp_path / "run", DEPENDENCIES, HOST_TORCH, env=only_site_wide)


def test_torch_range_admits_cloud_versions_and_the_tested_one():
    (spec,) = [Requirement(d) for d in DEPENDENCIES if Requirement(d).name == "torch"]
    for v in ("2.11.0+cu130", "2.13.0", "2.13.0+cpu", "2.14.0", "2.15.0", "2.16.0", "3.0.0"):
        assert spec.specifier.contains(v), f"{spec} rejects torch {v}"
    assert not spec.specifier.contains("2.10.1"), "the lowest tested torch is 2.11: do not admit older ones untested"


@pytest.mark.skipif(not (ROOT / ".venv").exists() or Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="checks the development venv (.venv) only")
def test_editable_install_in_the_dev_venv_installs_nothing(tmp_path):
    """`pip install -e .` where the Makefile put torch 2.13.0 (CPU) leaves every package as it is."""
    build = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]]
    # the installed build backend when it is recent enough (fast, offline), else pip fetches it
    isolation = ["--no-build-isolation"] if all(map(installed, build)) else []
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", *isolation,
                           "--report", str(report), "-e", str(ROOT)], capture_output=True, text=True, timeout=120,
                          env=hermetic_env() if isolation else None)   # a fetched backend may need the machine's index settings
    assert done.returncode == 0, done.stderr
    plan = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert plan == ["nbsupport"], f"would also install: {plan}"
