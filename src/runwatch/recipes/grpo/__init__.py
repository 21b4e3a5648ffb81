"""GRPO recipe: group-relative policy optimisation on synthetic tasks, on a laptop CPU.

Single-turn and multi-turn episodes, dynamic sampling, async off-policy collection
and pathology presets that make each GRPO health metric move on purpose.
"""
