"""Test doubles and helpers for code built on agent_runtime."""

from agent_runtime.testing._wait import wait_until

__all__ = ["wait_until"]
