"""Derived views of runs: phase timing and cost, downsampling, compare, spikes."""
