"""Run health: a catalogue of rules over a run's metrics, evaluated incrementally."""
