"""Safe YAML loading that remembers where every key and item came from.

Spec errors must name the file, the line and the key path, so the loader keeps a map from
key paths (tuples of keys and list indexes) to 1-based line numbers next to the plain data.
Only PyYAML's SafeLoader is used: specs can never construct Python objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KeyPath = tuple[Any, ...]


class SpecError(Exception):
    """A problem in a spec file, reported as `file:line: key.path: message`."""

    def __init__(self, file: str | Path, line: int | None, key_path: KeyPath, message: str):
        self.file = str(file)
        self.line = line
        self.key_path = key_path
        self.message = message
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        keys = format_key_path(self.key_path)
        return f"{where}: {keys}: {self.message}" if keys else f"{where}: {self.message}"


def format_key_path(path: KeyPath) -> str:
    """`support[0].tensors.InputTensor.types` style, the way people read YAML."""
    out = ""
    for key in path:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += ("." if out else "") + str(key)
    return out


@dataclass
class SourcedYaml:
    """Parsed YAML data plus the line of every key path in it."""

    path: Path
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, key_path: KeyPath) -> int | None:
        """The line of the deepest prefix of key_path that exists (so a missing key points at its parent)."""
        path = tuple(key_path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def error(self, key_path: KeyPath, message: str) -> SpecError:
        return SpecError(self.path, self.line_of(key_path), tuple(key_path), message)


def _record_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _record_lines(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(item, path + (index,), lines)


class _UniqueKeySafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _UniqueKeySafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeySafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: str | Path) -> SourcedYaml:
    """Load one YAML file safely; a syntax error becomes a SpecError with the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(path, None, (), f"cannot read file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(path, None, (), f"not UTF-8 text: {exc.reason}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeySafeLoader)  # noqa: S506 - SafeLoader subclass
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise SpecError(path, line, (), f"invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, None, (), f"invalid YAML: {exc}") from None
    lines: dict[KeyPath, int] = {}
    if node is not None:
        _record_lines(node, (), lines)
    return SourcedYaml(path=path, data=data, lines=lines)
