"""Terraform provider for Inlet, written with PyPI's ``tf`` (plugin protocol 6)."""
