"""Timers: messages scheduled into a queue partition after a delay, fired exactly once."""
