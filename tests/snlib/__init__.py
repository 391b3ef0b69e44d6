"""Helpers shared by the schednic pytest suite (no pytest dependency here)."""
