"""Safe, bounded YAML loading that remembers where every key and item came from.

Spec errors must name the file, the line and the key path, so the loader keeps a map from
key paths (tuples of keys and list indexes) to 1-based line numbers next to the plain data.
Only PyYAML's SafeLoader is used: specs can never construct Python objects.

No input may crash or hang the harness, so loading is bounded before any Python object is
built. A guard watches the parser's events as the composer consumes them (one pass, and it stops
at the first event over a limit, so a hostile file costs milliseconds) and refuses:

- files larger than MAX_FILE_BYTES (read no further than that);
- documents that would expand to more than MAX_NODES nodes, an alias counting as the size of
  the node it names (a "billion laughs" of nested aliases is a few kilobytes of text and
  gigabytes of data once something walks it: the line table, the schema check, the harness);
- collections nested deeper than MAX_DEPTH, aliases included (PyYAML's composer and every walk
  of the data recurse once per level, so deep nesting is a RecursionError otherwise);
- recursive aliases (`&a [*a]`: a structure that contains itself never ends when walked);
- mapping keys that are sequences or mappings (`? [a, b] : 1`: unhashable in Python);
- integer literals longer than MAX_INT_CHARS characters or outside 64 bits (no data type holds
  them; Python also refuses to convert more than 4300 digits, and slowly).

Each refusal is a SpecError `file:line: key.path: message`. Values PyYAML cannot construct
(`!!int ""`, `2024-13-45`) are SpecErrors with their line too, never tracebacks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml
from yaml.events import (AliasEvent, CollectionEndEvent, CollectionStartEvent, DocumentStartEvent, Event,
                         MappingStartEvent, ScalarEvent)

KeyPath = tuple[Any, ...]

MAX_FILE_BYTES = 128 * 1024  # the largest spec is under 8 KiB; pure-Python PyYAML reads ~100 KiB/s at worst
MAX_NODES = 100_000          # scalars and collections after alias expansion; a spec has about 1,000
MAX_DEPTH = 64               # nested collections; a spec nests 6 deep
MAX_INT_CHARS = 40           # digits (and prefix) of one integer literal; 2^64 has 20 decimal digits
INT_MIN, INT_MAX = -(2 ** 63), 2 ** 64 - 1  # INT64 min .. UINT64 max: every DirectML integer fits
_INT_TAG = "tag:yaml.org,2002:int"


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

    def data_at(self, key_path: KeyPath) -> Any:
        """The value at a key path of the data (the path must exist)."""
        value = self.data
        for key in key_path:
            value = value[key]
        return value

    def error(self, key_path: KeyPath, message: str) -> SpecError:
        return SpecError(self.path, self.line_of(key_path), tuple(key_path), message)


def _record_lines(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int]) -> None:
    """Line of every key path. Recursion is safe: the guard bounded depth (aliases included) and size."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _record_lines(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(item, path + (index,), lines)


# --- the event guard ----------------------------------------------------------------------------

class _Refused(Exception):
    """A limit the guard enforces; load_yaml turns it into a SpecError (the guard has no file name)."""

    def __init__(self, line: int, key_path: KeyPath, message: str):
        super().__init__(message)
        self.line, self.key_path, self.message = line, key_path, message


_NESTING_PATH_SHOWN = 8   # key path components shown for a nesting error (the full path is 64 long)
_KEY_POSITION = object()  # a mapping frame's current entry while its key is being read


@dataclass
class _Frame:
    """One open collection: where it started, how deep it goes, and which entry is being read."""

    mapping: bool
    depth: int
    start_total: int
    anchor: str | None
    deepest: int
    expect_key: bool = True
    pending_key: Any = None
    index: int = -1
    current: Any = _KEY_POSITION


@dataclass(frozen=True)
class _Anchor:
    """What an alias to this anchor adds: its expanded size, its nesting height, its scalar text."""

    size: int
    height: int  # 0 for a scalar, else the number of nested collection levels
    scalar: str | None


class _EventGuard:
    """Checks every parser event, in order, against the limits; raises _Refused at the first breach.

    Why events: they arrive before the composer recurses into a collection and before any Python
    object exists, so the check costs O(1) per event, never recurses, and stops a hostile file
    after at most MAX_NODES events. An alias is counted as the size and height of its target.
    """

    def __init__(self, resolve_scalar: Callable[[ScalarEvent], str], int_value: Callable[[str, str], int]):
        self._resolve_scalar = resolve_scalar
        self._int_value = int_value
        self._stack: list[_Frame] = []
        self._anchors: dict[str, _Anchor] = {}
        self._open_anchors: set[str] = set()
        self._total = 0

    def _path(self) -> KeyPath:
        return tuple(frame.current for frame in self._stack if frame.current is not _KEY_POSITION)

    def _refuse(self, event: Event, message: str, path_limit: int | None = None) -> _Refused:
        """The refusal at this event's line; path_limit keeps a nesting error's key path readable."""
        assert event.start_mark is not None  # the parsers mark every event they emit
        return _Refused(event.start_mark.line + 1, self._path()[:path_limit], message)

    def _count(self, event: Event, size: int) -> None:
        self._total += size
        if self._total > MAX_NODES:
            raise self._refuse(event, f"the document expands to more than {MAX_NODES:,} nodes "
                                      "(YAML aliases count as the size of what they name); refusing to load it")

    def _begin_node(self, event: Event, collection_kind: str | None) -> bool:
        """Advance the parent's entry for a new node; True when the node is a mapping key."""
        if not self._stack:
            return False
        top = self._stack[-1]
        if not top.mapping:
            top.index += 1
            top.current = top.index
            return False
        is_key = top.expect_key
        top.expect_key = not is_key
        top.current = _KEY_POSITION if is_key else top.pending_key
        if is_key and collection_kind is not None:
            raise self._refuse(event, f"a mapping key must be a plain value, found a {collection_kind} "
                                      "(complex keys such as `? [a, b]` or `{[1, 2]: x}` are not allowed)")
        return is_key

    def see(self, event: Event) -> None:
        """Check one event; called by the loader for every event the composer consumes."""
        if isinstance(event, DocumentStartEvent):
            self._anchors.clear()  # anchors are per document, as in PyYAML's composer
        elif isinstance(event, ScalarEvent):
            self._scalar(event)
        elif isinstance(event, AliasEvent):
            self._alias(event)
        elif isinstance(event, CollectionStartEvent):
            self._start(event)
        elif isinstance(event, CollectionEndEvent):
            self._end()

    def _scalar(self, event: ScalarEvent) -> None:
        is_key = self._begin_node(event, None)
        self._count(event, 1)
        if is_key:
            self._stack[-1].pending_key = event.value
        if event.anchor is not None:
            self._anchors[event.anchor] = _Anchor(1, 0, event.value)
        if self._resolve_scalar(event) == _INT_TAG:
            self._check_int(event)

    def _check_int(self, event: ScalarEvent) -> None:
        """Refuse integer literals that no data type holds, before Python converts them."""
        digits = event.value.replace("_", "").lstrip("+-")
        if len(digits) > MAX_INT_CHARS:
            raise self._refuse(event, f"integer literal of {len(digits)} characters; at most {MAX_INT_CHARS} are allowed")
        try:
            value = self._int_value(_INT_TAG, event.value)
        except (ValueError, IndexError):
            return  # not an integer after all: the constructor reports it with its line
        if not INT_MIN <= value <= INT_MAX:
            raise self._refuse(event, f"integer {value} does not fit in 64 bits ({INT_MIN} .. {INT_MAX})")

    def _alias(self, event: AliasEvent) -> None:
        name = event.anchor
        if name in self._open_anchors:
            self._begin_node(event, None)
            raise self._refuse(event, f"recursive alias *{name}: it refers to a node that contains it")
        target = None if name is None else self._anchors.get(name)
        if target is None:
            return  # undefined alias: the composer reports it with its line
        is_key = self._begin_node(event, "mapping or sequence (through an alias)" if target.height else None)
        depth = len(self._stack) + target.height
        if depth > MAX_DEPTH:
            raise self._refuse(event, f"alias *{name} nests collections {depth} levels deep; at most {MAX_DEPTH} are allowed",
                               _NESTING_PATH_SHOWN)
        self._count(event, target.size)
        if self._stack:
            self._stack[-1].deepest = max(self._stack[-1].deepest, depth)
            if is_key:
                self._stack[-1].pending_key = target.scalar

    def _start(self, event: CollectionStartEvent) -> None:
        kind = "mapping" if isinstance(event, MappingStartEvent) else "sequence"
        self._begin_node(event, kind)
        depth = len(self._stack) + 1
        if depth > MAX_DEPTH:
            raise self._refuse(event, f"collections nested more than {MAX_DEPTH} levels deep (below this key)",
                               _NESTING_PATH_SHOWN)
        self._count(event, 1)
        self._stack.append(_Frame(mapping=kind == "mapping", depth=depth, start_total=self._total - 1,
                                  anchor=event.anchor, deepest=depth))
        if event.anchor is not None:
            self._open_anchors.add(event.anchor)

    def _end(self) -> None:
        frame = self._stack.pop()
        if self._stack:
            self._stack[-1].deepest = max(self._stack[-1].deepest, frame.deepest)
        if frame.anchor is not None:
            self._open_anchors.discard(frame.anchor)
            self._anchors[frame.anchor] = _Anchor(self._total - frame.start_total, frame.deepest - frame.depth + 1, None)


# --- the loader ---------------------------------------------------------------------------------

if TYPE_CHECKING:  # _Guarded is a mixin: it always comes first in a safe loader's bases
    _LoaderBase = yaml.SafeLoader
else:
    _LoaderBase = object


class _Guarded(_LoaderBase):
    """A safe loader that refuses duplicate keys (PyYAML silently keeps the last one) and runs the guard.

    Every event the composer consumes passes through get_event, so the guard sees the document
    in order, before the composer descends into a collection or anything is constructed.
    """

    def __init__(self, stream: str):
        super().__init__(stream)
        self._guard = _EventGuard(self._resolve_scalar_event, self._int_of)

    def get_event(self) -> Event:
        event = super().get_event()
        self._guard.see(event)
        return event

    def _resolve_scalar_event(self, event: ScalarEvent) -> str:
        """The tag the composer will give this scalar (explicit, or resolved from its text)."""
        if event.tag is not None and event.tag != "!":
            return event.tag
        return self.resolve(yaml.ScalarNode, event.value, event.implicit)

    def _int_of(self, tag: str, text: str) -> int:
        return self.construct_yaml_int(yaml.ScalarNode(tag, text))

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """PyYAML's constructors raise plain Python errors on some bad values (`!!int ""`,
        `2024-13-45`, `!!bool maybe`); report them as YAML errors at the node's line."""
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"bad !!{node.tag.rsplit(':', 1)[-1]} value {node.value!r:.60}: {exc}", node.start_mark) from None


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable; the guard refuses collections as keys, so this is a tagged scalar
            raise yaml.constructor.ConstructorError(
                None, None, f"mapping key {key!r} cannot be a key (unhashable)", key_node.start_mark) from None
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {first})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class _PureLoader(_Guarded, yaml.SafeLoader):
    """The guarded loader on PyYAML's pure-Python scanner and parser."""


if getattr(yaml, "__with_libyaml__", False):
    class _LibyamlLoader(_Guarded, yaml.composer.Composer, yaml._yaml.CParser, yaml.constructor.SafeConstructor,
                         yaml.resolver.Resolver):
        """The guarded loader on libyaml's scanner and parser (C; a spec loads about three times
        faster), with PyYAML's Python composer on top, so that every event still passes through
        get_event and the guard: the C parser's own composer (get_single_node) is never used."""

        def __init__(self, stream: str):
            yaml._yaml.CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._guard = _EventGuard(self._resolve_scalar_event, self._int_of)

    _UniqueKeySafeLoader: type[_Guarded] = _LibyamlLoader
else:
    _UniqueKeySafeLoader = _PureLoader

_loaders: set[type[_Guarded]] = {_PureLoader, _UniqueKeySafeLoader}
for _loader in _loaders:
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_text(path: Path) -> str:
    """The file's text, reading no more than MAX_FILE_BYTES + 1 bytes (a huge file costs nothing)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(path, None, (), f"cannot read file: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(path, None, (), f"file larger than {MAX_FILE_BYTES:,} bytes; refusing to load it")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, None, (), f"not UTF-8 text: {exc.reason}") from None


def _compose_and_construct(text: str) -> tuple[yaml.Node | None, Any]:
    """One parse: the node graph (for the line table) and the data built from it."""
    loader = _UniqueKeySafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        return node, data
    finally:
        loader.dispose()


def _one_line(message: str) -> str:
    """PyYAML's messages may span lines; an error report is one line."""
    return " ".join(message.split())


def load_yaml(path: str | Path) -> SourcedYaml:
    """Load one YAML file safely and within the limits above; any problem is a SpecError with the line."""
    path = Path(path)
    text = _read_text(path)
    try:
        node, data = _compose_and_construct(text)
        lines: dict[KeyPath, int] = {}
        if node is not None:
            _record_lines(node, (), lines)
    except _Refused as exc:
        raise SpecError(path, exc.line, exc.key_path, exc.message) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise SpecError(path, line, (), f"invalid YAML: {_one_line(what)}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        raise SpecError(path, line, (), f"invalid YAML: character {char} is not allowed in YAML text") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, None, (), f"invalid YAML: {_one_line(str(exc))}") from None
    except (RecursionError, MemoryError) as exc:  # the guard should make this unreachable; never a traceback
        raise SpecError(path, None, (), f"document too large or too deeply nested to load ({type(exc).__name__})") from None
    return SourcedYaml(path=path, data=data, lines=lines)
