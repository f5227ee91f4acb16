"""Presenting results: the comparison table and plots."""
