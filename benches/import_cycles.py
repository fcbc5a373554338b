"""Find import cycles among the Rust core's files and among the Python package's modules.

    python benches/import_cycles.py   # lists every cycle; exit status 1 on one not in KNOWN_CYCLES

A module here is a file. Rust: `crates/clirkit-core/src/**/*.rs`; an edge goes from a file to
the file of every module a `crate::`, `super::` or `self::` path in its code names (in `use`
items or inline), and to a child module it uses by name (`use child::Item`); a `mod child;`
declaration is not an import. Comments, strings and `#[cfg(test)]` items are left out: a test
module may use what it tests. Python: `python/clirkit/**/*.py`; an edge goes from a module to
every `clirkit` module it imports, at any depth (a function-level import is still an import),
except under `if TYPE_CHECKING:`. `from clirkit.x import name` names the module `clirkit.x.name`
when that is a module, else `clirkit.x`.

A cycle is a strongly connected component of more than one file (Tarjan's algorithm).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUST_SRC = ROOT / "crates" / "clirkit-core" / "src"
PYTHON_PACKAGE = ROOT / "python" / "clirkit"

# Comments, string and char literals, blanked so that braces and paths in them do not count; and
# visibility restrictions (`pub(in crate::bm25)`), which name a module without importing it.
_RUST_NOISE = re.compile(
    r"""//[^\n]*|/\*.*?\*/|r(\#*)".*?"\1|b?"(?:\\.|[^"\\])*"|b?'(?:\\.|[^'\\])'"""
    r"""|\bpub\s*\(\s*in\s+[^)]*\)""",
    re.S,
)
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = re.compile(rf"\b(crate|super|self)((?:\s*::\s*{_IDENT})+)")
_USE = re.compile(r"\buse\s+([^;]+);")
_MOD_DECL = re.compile(rf"\bmod\s+({_IDENT})\s*;")
_CFG_TEST = re.compile(r"#\[cfg\(test\)\]")


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def _strip_rust(text: str) -> str:
    return _RUST_NOISE.sub(_blank, text)


def _item_end(text: str, start: int) -> int:
    """The end of the item starting at `start`: its `;` or its matching `}`."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == ";" and depth == 0:
            return i + 1
    return len(text)


def _drop_test_items(text: str) -> str:
    out, at = [], 0
    for m in _CFG_TEST.finditer(text):
        if m.start() < at:
            continue
        out.append(text[at : m.start()])
        at = _item_end(text, m.end())
        out.append(re.sub(r"[^\n]", " ", text[m.start() : at]))
    out.append(text[at:])
    return "".join(out)


def _expand_use_tree(tree: str) -> list[list[str]]:
    """`a::{b, c::{d, e}}` as [[a, b], [a, c, d], [a, c, e]] (`self` and `*` end a path)."""
    tree = re.sub(r"\s+", "", tree)
    tree = re.sub(rf"\bas{_IDENT}\b", "", tree)

    def parse(s: str, prefix: list[str]) -> list[list[str]]:
        paths: list[list[str]] = []
        depth, part_start, parts = 0, 0, []
        for i, c in enumerate(s):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                parts.append(s[part_start:i])
                part_start = i + 1
        parts.append(s[part_start:])
        for part in filter(None, parts):
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                head = [p for p in part[:brace].split("::") if p]
                paths.extend(parse(part[brace + 1 : -1], prefix + head))
            else:
                segments = [p for p in part.split("::") if p and p not in ("self", "*")]
                paths.append(prefix + segments)
        return paths

    return parse(tree, [])


def _rust_modules(src: Path) -> dict[tuple[str, ...], Path]:
    modules: dict[tuple[str, ...], Path] = {}
    for path in src.rglob("*.rs"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        modules[tuple(parts)] = path
    return modules


def _resolve(modules: dict[tuple[str, ...], Path], path: list[str]) -> tuple[str, ...]:
    """The longest prefix of `path` that is a file module."""
    for n in range(len(path), -1, -1):
        if tuple(path[:n]) in modules:
            return tuple(path[:n])
    return ()


_DEFINITION = re.compile(
    rf"\b(?:fn|struct|enum|trait|type|const|static|union)\s+({_IDENT})|macro_rules!\s*({_IDENT})"
)


def _absolute(module: tuple[str, ...], segments: list[str]) -> list[str]:
    """`segments` (starting `crate`, `super`, `self` or a child's name) from the crate root."""
    head, rest = segments[0], segments[1:]
    if head == "crate":
        return rest
    if head == "self":
        return list(module) + rest
    if head == "super":
        base = list(module)
        while head == "super":
            base = base[:-1]
            head, rest = (rest[0], rest[1:]) if rest else ("", [])
        return base + ([head] if head else []) + rest
    return list(module) + segments


def rust_graph(src: Path = RUST_SRC) -> dict[str, set[str]]:
    """Each file's imports; a name a module only imports (`use`, `pub use`) is followed to the
    module that defines it, so `super::Item` re-exported by a parent names the defining file."""
    modules = _rust_modules(src)
    found: dict[tuple[str, ...], list[list[str]]] = {}
    defined: dict[tuple[str, ...], set[str]] = {}
    imported: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for module, path in modules.items():
        text = _drop_test_items(_strip_rust(path.read_text()))
        children = set(_MOD_DECL.findall(text))
        defined[module] = {a or b for a, b in _DEFINITION.findall(text)}
        paths: list[list[str]] = []
        imported[module] = {}
        for m in _USE.finditer(text):
            for segments in _expand_use_tree(m.group(1).strip().lstrip(":")):
                if segments and (segments[0] in ("crate", "super", "self") or segments[0] in children):
                    absolute = _absolute(module, segments)
                    paths.append(absolute)
                    if absolute:
                        imported[module][absolute[-1]] = absolute
        for m in _PATH.finditer(_USE.sub(" ", text)):
            segments = [m.group(1)] + [s for s in re.split(r"\s*::\s*", m.group(2)) if s]
            paths.append(_absolute(module, segments))
        found[module] = paths

    def resolve(path: list[str], depth: int = 0) -> tuple[str, ...]:
        target = _resolve(modules, path)
        rest = path[len(target) :]
        if rest and depth < 8 and rest[0] not in defined[target]:
            origin = imported[target].get(rest[0])
            if origin is not None and origin != path:
                return resolve(origin + rest[1:], depth + 1)
        return target

    graph: dict[str, set[str]] = {}
    for module, paths in found.items():
        targets = {resolve(p) for p in paths} - {module}
        graph["::".join(("crate",) + module)] = {"::".join(("crate",) + t) for t in targets}
    return graph


def _python_modules(package: Path) -> dict[str, Path]:
    modules = {}
    for path in [*package.rglob("*.py"), *package.rglob("*.pyi")]:
        if path.suffix == ".pyi" and path.with_suffix(".py").exists():
            continue
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _python_imports(tree: ast.AST, package: str, modules: dict[str, Path]) -> set[str]:
    targets: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules else source)
        todo.extend(ast.iter_child_nodes(node))
    return targets


def python_graph(package: Path = PYTHON_PACKAGE) -> dict[str, set[str]]:
    modules = _python_modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        targets = _python_imports(tree, package, modules)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        # Iterative Tarjan: (node, iterator over its successors).
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in graph:
                    continue
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return "; ".join(edges)


# Cycles tolerated, each with its reason, to be taken apart by its owner; a cycle found is
# tolerated only while all its files lie inside one of these sets (so none may grow or join
# others). Empty: the last two (bm25/mod.rs <-> rm3.rs, io::atomic <-> io::manifest) were taken
# apart in issue 27's second step, and any cycle now fails the test.
KNOWN_CYCLES: list[tuple[str, frozenset[str]]] = []


def unknown(found: list[list[str]]) -> list[list[str]]:
    """The cycles that lie inside no known cycle's set of files."""
    return [c for c in found if not any(set(c) <= members for _, members in KNOWN_CYCLES)]


def main() -> int:
    status = 0
    for label, graph in (("Rust", rust_graph()), ("Python", python_graph())):
        found = cycles(graph)
        print(f"{label}: {len(graph)} modules, {len(found)} cycles")
        new = unknown(found)
        for component in found:
            status |= component in new
            mark = "NEW " if component in new else "known "
            print(f"  {mark}cycle of {len(component)}: {describe(component, graph)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
