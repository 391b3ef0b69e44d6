# SPDX-License-Identifier: BSD-3-Clause
"""Helpers shared by the schednic pytest suite (no pytest dependency here)."""
