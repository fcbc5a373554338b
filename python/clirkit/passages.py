"""Old import path of :mod:`clirkit.encoders.passages`, kept so that existing code keeps working."""

from clirkit.encoders.passages import doc_id, maxp, maxp_file

__all__ = ["doc_id", "maxp", "maxp_file"]
