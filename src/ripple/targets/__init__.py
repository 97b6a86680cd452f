"""Destinations: one module per target, all behind `ripple.targets.base.Target`."""

from ripple.targets.base import OK, Delivery, Outcome, Result, Target

__all__ = ["OK", "Delivery", "Outcome", "Result", "Target"]
