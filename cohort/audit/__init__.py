"""Benchmark and audit harness (rounds, balanced orders, paired ratios, replay and audit artifacts)."""
