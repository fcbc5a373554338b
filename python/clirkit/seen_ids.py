"""Old import path of :mod:`clirkit.encoders.seen_ids`, kept so that existing code keeps working."""

from clirkit.encoders.seen_ids import HASH_MASK, LINE_COUNT_BLOCK, SeenIds

__all__ = ["HASH_MASK", "LINE_COUNT_BLOCK", "SeenIds"]
