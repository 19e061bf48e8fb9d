"""``terraform-provider-inlet``: serve the provider to Terraform, or install it where Terraform finds it.

Terraform starts the executable itself (with its plugin handshake in the environment); a person
runs ``terraform-provider-inlet install`` once, after which ``terraform init`` works offline."""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
from pathlib import Path

from terraform_provider_inlet.provider import ADDRESS, VERSION, InletProvider

_MAGIC_COOKIE = "TF_PLUGIN_MAGIC_COOKIE"  # set by Terraform when it starts a provider


def terraform_platform() -> str:
    machine = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower())
    if machine is None:
        raise SystemExit(f"terraform-provider-inlet: no Terraform platform name for {platform.machine()}")
    return f"{sys.platform}_{machine}"


def install(plugins_dir: Path) -> Path:
    """Put a launcher for this provider in ``plugins_dir``, in the layout of Terraform's implicit
    local mirror (``~/.terraform.d/plugins``) and of a ``filesystem_mirror`` (unpacked)."""
    folder = plugins_dir / ADDRESS / VERSION / terraform_platform()
    folder.mkdir(parents=True, exist_ok=True)
    launcher = folder / f"terraform-provider-{ADDRESS.rsplit('/', 1)[1]}_v{VERSION}"
    launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m terraform_provider_inlet \"$@\"\n")
    launcher.chmod(0o755)
    return launcher


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args and os.environ.get(_MAGIC_COOKIE):
        from tf.runner import run_provider

        run_provider(InletProvider(), [])
        return 0
    parser = argparse.ArgumentParser(
        prog="terraform-provider-inlet",
        description=f"Terraform provider for Inlet ({ADDRESS} {VERSION}). Terraform starts it; install it first.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    put = commands.add_parser("install", help="install the provider where `terraform init` finds it offline")
    put.add_argument("--plugins-dir", type=Path, default=Path.home() / ".terraform.d" / "plugins",
                     help="Terraform's plugin directory or a filesystem_mirror path (default: ~/.terraform.d/plugins)")
    options = parser.parse_args(args)
    launcher = install(options.plugins_dir)
    print(f"installed {ADDRESS} {VERSION} at {launcher}")
    return 0
