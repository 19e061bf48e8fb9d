"""docs/terraform.md's examples are valid for the provider's schema (``tofu validate``), and a bad
value in them is refused naming the attribute. The complete example uses write-only arguments and
an ephemeral variable: OpenTofu 1.11+ (here 1.12.6)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fixtures.terraform import Terraform

DOC = Path(__file__).resolve().parents[2] / "docs" / "terraform.md"


def test_the_documented_example_validates(tmp_path: Path) -> None:
    section = DOC.read_text().split("## A complete example", 1)[1].split("\n## ", 1)[0]
    [example] = re.findall(r"```hcl\n(.*?)```", section, flags=re.DOTALL)
    terraform = Terraform.prepare(tmp_path, endpoint="http://127.0.0.1:1", api_key="unused", cli="1.12.6")
    terraform.write(example)
    terraform.run("init")
    result = terraform.run("validate")
    assert "The configuration is valid" in result.stdout
    terraform.write(example.replace('replay_mode = "replace"', 'replay_mode = "rewrite"'))
    refused = terraform.run("validate", check=False)
    assert refused.code == 1 and "replay_mode" in refused.output and '"rewrite"' in refused.output
    terraform.write(example.replace('value_format        = "json"', 'value_format        = "xml"'))
    refused = terraform.run("validate", check=False)
    assert refused.code == 1 and "source.value_format" in refused.output


def test_the_documented_schema_registry_example_validates(tmp_path: Path) -> None:
    [example] = [block for block in re.findall(r"```hcl\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
                 if "schema_registry_url" in block]
    variables = 'variable "kafka_password" {\n  type = string\n}\nvariable "registry_password" {\n  type = string\n}\n'
    terraform = Terraform.prepare(tmp_path, endpoint="http://127.0.0.1:1", api_key="unused")
    terraform.write(variables + example)
    terraform.run("init")
    assert "The configuration is valid" in terraform.run("validate").stdout
    terraform.write(variables + example.replace('schema_registry_password = var.registry_password',
                                                'schema_registry_token = "t"'))
    refused = terraform.run("validate", check=False)
    assert refused.code == 1 and "schema_registry_token" in refused.output and "schema_registry_username" in refused.output
