"""Reading an experiment file: TOML parsed by ``tomllib`` (``tomli`` before Python 3.11), plus the line
of every key, so that a bad value can be reported as ``file:line: key``.

``tomllib`` keeps no positions, so the lines come from a light scan of the text: table headers
(``[a.b]``, ``[[a]]``), ``key = value`` lines and inline tables (``key = { x = 1 }``). A key the scan
cannot place (unusual layouts) falls back to the line of its nearest located parent."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Union

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11
    import tomli as tomllib

from clirkit._native import InvalidInputError

KeyPath = tuple[Union[str, int], ...]

_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"' + r"|'[^']*'"
_KEY = rf"(?:{_BARE}|{_QUOTED})"
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*\]\]?")
_ASSIGN = re.compile(rf"^\s*({_DOTTED})\s*=")
_INLINE_KEY = re.compile(rf"(?:^|[{{,])\s*({_DOTTED})\s*=")


class ExperimentError(InvalidInputError):
    """An experiment file that cannot run: the message names the file, the line and the key."""


def _split_dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.findall(rf"{_KEY}", text)]


@dataclass
class TomlSource:
    """A parsed experiment file: its data and where each key was written."""

    path: str
    data: dict[str, Any]
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line(self, key: KeyPath) -> int:
        """The line of ``key`` or, failing that, of its nearest located parent (1 if none)."""
        for end in range(len(key), 0, -1):
            found = self.lines.get(tuple(key[:end]))
            if found is not None:
                return found
        return 1

    def error(self, key: KeyPath, message: str) -> ExperimentError:
        """An error naming ``file:line`` and the dotted key."""
        dotted = ".".join(str(k) if not isinstance(k, int) else f"[{k}]" for k in key).replace(".[", "[")
        return ExperimentError(f"{self.path}:{self.line(key)}: {dotted}: {message}")


def _strip_comment(line: str) -> str:
    out, quote = [], ""
    for ch in line:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out)


def _locate(text: str) -> dict[KeyPath, int]:
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    array_counts: dict[KeyPath, int] = {}
    in_multiline = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw) if not in_multiline else raw
        if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
            in_multiline = not in_multiline
            if not in_multiline:
                continue
        elif in_multiline:
            continue
        header = _HEADER.match(line)
        if header:
            path = tuple(_split_dotted(header.group(2)))
            if header.group(1) == "[[":
                index = array_counts.get(path, 0)
                array_counts[path] = index + 1
                table = (*path, index)
            else:
                table = path
            for end in range(1, len(table) + 1):
                lines.setdefault(table[:end], number)
            continue
        assign = _ASSIGN.match(line)
        if not assign:
            continue
        key = (*table, *_split_dotted(assign.group(1)))
        lines[key] = number
        rest = line[assign.end() :]
        if rest.lstrip().startswith("{"):
            for inner in _INLINE_KEY.finditer(rest.lstrip()[1:]):
                lines.setdefault((*key, *_split_dotted(inner.group(1))), number)
    return lines


def load_toml(path: str | os.PathLike) -> TomlSource:
    """Parse ``path``; a syntax error is an :class:`ExperimentError` naming the file and line."""
    shown = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as err:
        raise ExperimentError(f"{shown}: cannot read the experiment file: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as err:
        raise ExperimentError(f"{shown}: not UTF-8 ({err.reason} at byte {err.start})") from None
    except tomllib.TOMLDecodeError as err:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(err))
        where = f"{shown}:{match.group(1)}" if match else shown
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        raise ExperimentError(f"{where}: invalid TOML: {message}") from None
    return TomlSource(shown, data, _locate(text))
