"""Install the project's pinned packages into the virtual environment whose Python runs this script (`make setup`).

    .venv/bin/python scripts/install_packages.py            # uv when it installs, else pip
    .venv/bin/python scripts/install_packages.py --with pip # pip only, as before uv

The same three steps either way: requirements.txt under constraints.txt, requirements-nodeps.txt without their
dependencies (weights and data packages whose metadata over-pins), and this project editable. uv installs them in
parallel from its cache (about 10 s here against pip's 80 s, each file unpacked once); pip is the fallback when uv
cannot be installed or fails, and the installed versions are the same, since constraints.txt pins every package.

uv reads no pip configuration, so the places pip would take packages from (index-url, extra-index-url, find-links,
constraint files and the certificate from pip.conf or PIP_* variables) are handed to uv as its own options here:
a machine whose pip reaches a mirror or a local wheel folder (say, a CPU build of torch) gets the same packages from
uv. Only the standard library is used: nothing is installed yet when this runs.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UV = "uv==0.13.9"
# pip's precedence among configuration scopes, highest first (pip config list prints each scope's keys).
SCOPES = (":env:", "site", "user", "global")
CONFIG_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[a-z-]+)='(?P<value>.*)'$")
# The install steps, in order, as the arguments after `install` (pip's and uv's alike).
STEPS = (
    ("-r", "requirements.txt", "-c", "constraints.txt"),
    ("--no-deps", "-r", "requirements-nodeps.txt"),
    ("--no-deps", "--no-build-isolation", "-e", "."),
)


def pip_config(text: str) -> dict[str, list[str]]:
    """`pip config list` output -> {key: values}: list keys merged over every scope, highest precedence first;
    index-url, cert: the value of the highest-precedence scope only, as pip takes it."""
    found: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        m = CONFIG_LINE.match(line.strip())
        if m:
            scope = m["scope"] if m["scope"] in SCOPES else "global"
            found.setdefault(m["key"], {})[scope] = m["value"].split()
    merged: dict[str, list[str]] = {}
    for key, by_scope in found.items():
        ordered = [by_scope[s] for s in SCOPES if s in by_scope]
        if key in ("index-url", "cert"):
            merged[key] = ordered[0][:1]
        else:
            merged[key] = list(dict.fromkeys(v for values in ordered for v in values))
    return merged


def uv_options(config: dict[str, list[str]]) -> list[str]:
    """uv pip install options that take packages from where pip, configured as `config`, would."""
    options = [f"--index-url={v}" for v in config.get("index-url", [])]
    options += [f"--extra-index-url={v}" for v in config.get("extra-index-url", [])]
    options += [f"--find-links={v}" for v in config.get("find-links", [])]
    options += [f"--constraint={v}" for v in config.get("constraint", [])]
    if config.get("extra-index-url") or config.get("find-links"):
        # pip takes the best version among all its indexes; uv's default takes a package from the first index that
        # has it, which may not hold the pinned version.
        options.append("--index-strategy=unsafe-best-match")
    return options


def run(cmd: list[str], env: dict | None = None) -> int:
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def install_with_pip(python: str) -> int:
    for step in STEPS:
        code = run([python, "-m", "pip", "install", "--quiet", "--no-compile", *step])
        if code:
            return code
    return 0


def install_with_uv(python: str) -> int:
    """uv into the environment (with pip), then each step with uv; the first non-zero exit code, or 0."""
    code = run([python, "-m", "pip", "install", "--quiet", "--no-compile", UV])
    if code:
        return code
    text = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    config = pip_config(text)
    env = dict(os.environ)
    if config.get("cert") and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = config["cert"][0]
    uv = str(Path(python).parent / "uv")
    for step in STEPS:
        code = run([uv, "pip", "install", "--quiet", "--python", python, *uv_options(config), *step], env)
        if code:
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--with", dest="installer", choices=("uv", "pip"), default="uv", help="uv (default) or pip")
    args = ap.parse_args(argv)
    python = sys.executable
    if args.installer == "uv":
        if install_with_uv(python) == 0:
            return 0
        print("uv could not install the packages (its message is above); installing with pip instead", flush=True)
    return install_with_pip(python)


if __name__ == "__main__":
    sys.exit(main())
