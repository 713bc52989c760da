"""Offset reads: a partition read by offset, and the partitions written since a time."""
