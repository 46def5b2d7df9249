"""scripts/install_packages.py: `make setup` hands uv the places pip is configured to take packages from."""

import importlib.util
import subprocess
import sys

from lib.common.paths import ROOT

spec = importlib.util.spec_from_file_location("install_packages", ROOT / "scripts" / "install_packages.py")
install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install)

# `pip config list` on a machine with a local mirror, a wheel folder set both in pip.conf and in PIP_FIND_LINKS, a
# user index that the environment overrides, and a machine-wide constraint file.
CONFIG = """\
:env:.find-links='/opt/wheels'
:env:.index-url='https://mirror.example/simple'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
user.index-url='https://other.example/simple'
"""


def test_pip_configuration_becomes_uv_options_in_pips_precedence():
    config = install.pip_config(CONFIG)
    assert config["index-url"] == ["https://mirror.example/simple"]  # the environment's value beats the user's
    assert config["find-links"] == ["/opt/wheels"]  # once, though two scopes name it
    assert install.uv_options(config) == [
        "--index-url=https://mirror.example/simple",
        "--extra-index-url=file:///opt/pypi/simple",
        "--extra-index-url=file:///opt/pypi-more/simple",
        "--find-links=/opt/wheels",
        "--constraint=/etc/xdg/pip/constraints.txt",
        "--index-strategy=unsafe-best-match",
    ]


def test_without_pip_configuration_uv_takes_its_defaults():
    assert install.uv_options(install.pip_config("")) == []
    assert install.uv_options(install.pip_config("global.index-url='https://pypi.org/simple'\n")) == [
        "--index-url=https://pypi.org/simple"
    ]


def test_this_machines_pip_configuration_reads_without_error():
    text = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    options = install.uv_options(install.pip_config(text))
    assert all(o.startswith("--") for o in options)
