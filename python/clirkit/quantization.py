"""Old import path of :mod:`clirkit.encoders.quantization`, kept so that existing code keeps working."""

from clirkit.encoders.quantization import QUANT_MAX, per_sequence_quantization

__all__ = ["QUANT_MAX", "per_sequence_quantization"]
