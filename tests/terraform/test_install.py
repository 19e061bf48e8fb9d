"""``terraform-provider-inlet install --plugins-dir``: a filesystem mirror named in the CLI
configuration, found by ``terraform init`` offline (the default, ``~/.terraform.d/plugins``, is
what the end-to-end test uses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fixtures.terraform import Terraform


def test_init_finds_the_provider_in_a_filesystem_mirror(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    installed = subprocess.run([sys.executable, "-m", "terraform_provider_inlet", "install", "--plugins-dir",
                                str(mirror)], capture_output=True, text=True, check=True)
    launcher = Path(installed.stdout.split(" at ", 1)[1].strip())
    assert launcher.is_relative_to(mirror) and launcher.stat().st_mode & 0o111
    terraform = Terraform.prepare(tmp_path / "tf", endpoint="http://127.0.0.1:1", api_key="unused")
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    Path(terraform.env["TF_CLI_CONFIG_FILE"]).write_text(f"""
provider_installation {{
  filesystem_mirror {{
    path    = "{mirror}"
    include = ["inlet.dev/*/*"]
  }}
}}
""")
    terraform.write("")
    result = terraform.run("init", env={"HOME": str(empty_home)})
    assert "Installing inlet.dev/inlet/inlet v0.1.0" in result.stdout
    assert 'provider "inlet.dev/inlet/inlet"' in (terraform.workdir / ".terraform.lock.hcl").read_text()
