"""Type aliases shared across the package, defined once."""

from __future__ import annotations

import os
from typing import Dict, Mapping, Union

#: A filesystem path as the API accepts it.
PathLike = Union[str, "os.PathLike[str]"]
#: A run as a Python value: ``{qid: {docid: score}}``, each query's dict in canonical order.
RunDict = Dict[str, Dict[str, float]]
#: Qrels as a Python value: ``{qid: {docid: label}}``.
QrelsDict = Dict[str, Dict[str, int]]
#: A run the API reads from: a run-file path or ``{qid: {docid: score}}``.
RunInput = Union[PathLike, Mapping[str, Mapping[str, float]]]
#: Qrels the API reads from: a qrels-file path or ``{qid: {docid: label}}``.
QrelsInput = Union[PathLike, Mapping[str, Mapping[str, int]]]
