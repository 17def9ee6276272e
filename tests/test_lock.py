"""A fresh machine installs what CI tested: ``requirements.lock`` pins every package the dev
install resolves to, within pyproject.toml's ranges; every install command (the README's two,
``.ci/run``, the Dockerfile) uses it; and the environment running this suite is the locked one,
so a green run speaks for the versions a newcomer gets (refreshed on purpose: ``.ci/lock``)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
INSTALL = "pip install -q -c requirements.lock -e"


def locked() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"requirements.lock: {line!r} is not an exact pin (name==version)"
        pins[canonicalize_name(name)] = Version(version)
    return pins


def declared() -> list[Requirement]:
    """The project's dependencies and its dev extras (what the README's commands install)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in
            [*project["dependencies"], *project["optional-dependencies"]["dev"]]]


def test_every_declared_dependency_is_pinned_inside_its_range() -> None:
    pins = locked()
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is declared but not locked: run .ci/lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{requirement.name}=={pins[name]} is outside pyproject.toml's {requirement}")


def test_this_environment_is_the_locked_one() -> None:
    """Every locked package is installed here at its locked version (pip check's sense)."""
    pins = locked()
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version)
                 for d in importlib.metadata.distributions()}
    wrong = {name: (str(pin), str(installed.get(name))) for name, pin in pins.items()
             if installed.get(name) != pin}
    assert not wrong, (f"installed versions differ from requirements.lock (locked, installed): "
                       f"{wrong}; install with `.venv/bin/{INSTALL} '.[dev]'`")


def test_every_install_command_uses_the_lock() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(python3 -m venv .venv .*?)\n```", readme)
    assert len(blocks) == 2, "the README's two set-up commands"
    assert all(INSTALL in block for block in blocks)
    assert INSTALL in (ROOT / ".ci" / "run").read_text()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert INSTALL in dockerfile and "COPY pyproject.toml README.md requirements.lock" in dockerfile
    assert "requirements.lock" not in (ROOT / ".dockerignore").read_text()
