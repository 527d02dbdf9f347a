"""Benchmarks: each prints its numbers as ratios against a baseline measured in the same run."""
