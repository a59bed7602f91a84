"""Hypothesis strategies for the fuzzer.

Params come from the published schemas: objects are built here (required and optional
members, ``minProperties``) and every other schema is handed to hypothesis-jsonschema.
Generated params are then grounded in the fuzzer's world (workspace roots inside a
temporary folder, the mock provider's URL, ids that exist), mutated into hostile
variants, or replaced by byte-level garbage.

Every draw has the same kind and bounds whatever the host did before, so that hypothesis
sees a consistent search space even though the ids the host hands out change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from hypothesis_jsonschema import from_schema

from conformance.fuzz.frames import BIG_INTEGER, DEEP_NESTING, NON_FINITE, Raw, request_line
from conformance.fuzz.schemas import definitions, params_schema

MUTATIONS: Final = (
    "missing-field",
    "extra-field",
    "wrong-type",
    "not-an-object",
    "huge-string",
    "lone-surrogate",
    "deep-nesting",
    "big-integer",
    "non-finite",
    "out-of-range",
    "null-value",
)
VALID: Final = "valid"
ID_POOLS: Final = {
    "sessionId": "sessions",
    "approvalId": "approvals",
    "taskId": "tasks",
    "requestId": "requests",
    "shellId": "shells",
}
_INDEX = st.integers(min_value=0, max_value=63)
_ANY_JSON: Final = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)


@dataclass
class Places:
    """Where generated params may point: folders inside the fuzzer's temporary workspace,
    the mock provider, and ids the host handed out (filled while fuzzing)."""

    roots: list[str]
    base_url: str
    pools: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    """One request to send: its method, how its params were made, and the params."""

    method: str
    kind: str  # "valid" or one of MUTATIONS
    params: Any

    def line(self, request_id: str) -> bytes:
        """The request frame, newline excluded."""
        return request_line(request_id, self.method, self.params)


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = definitions()[node["$ref"].rsplit("/", 1)[-1]]
    return node


def from_node(node: dict[str, Any]) -> SearchStrategy[Any]:
    """Values that fit one schema node of the types schema."""
    node = _resolve(node)
    if node.get("type") == "object":
        properties = node.get("properties", {})
        required = set(node.get("required", []))
        members = {name: from_node(sub) for name, sub in properties.items()}
        strategy: SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
            {k: v for k, v in members.items() if k in required},
            optional={k: v for k, v in members.items() if k not in required},
        )
        least = int(node.get("minProperties", 0))
        return strategy.filter(lambda value: len(value) >= least) if least else strategy
    for combinator in ("oneOf", "anyOf"):
        if combinator in node:
            return st.one_of([from_node(branch) for branch in node[combinator]])
    return from_schema({**node, "$defs": definitions()})


_PARAMS_CACHE: dict[str, SearchStrategy[Any]] = {}


def valid_params(method: str) -> SearchStrategy[Any]:
    """Params that fit ``method``'s published schema."""
    if method not in _PARAMS_CACHE:
        _PARAMS_CACHE[method] = from_node(params_schema(method))
    return _PARAMS_CACHE[method]


def _ground(draw: st.DrawFn, value: Any, places: Places, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {name: _ground(draw, item, places, name) for name, item in value.items()}
    if isinstance(value, list):
        return [_ground(draw, item, places) for item in value]
    # Drawn whatever the value, so the search space does not depend on the host's state.
    reuse, index = draw(st.booleans()), draw(_INDEX)
    if isinstance(value, str) and key == "workspaceRoot":
        return places.roots[index % len(places.roots)]
    if isinstance(value, str) and key == "baseUrl":
        return places.base_url
    pool = places.pools.get(ID_POOLS.get(key or "", ""), [])
    if isinstance(value, str) and reuse and pool:
        return pool[index % len(pool)]
    if key == "protocolVersion" and isinstance(value, int) and reuse:
        return 9
    return value


@st.composite
def cases(draw: st.DrawFn, methods: tuple[str, ...], places: Places) -> Case:
    """A request with valid params (a third of the time) or hostile ones."""
    method = draw(st.sampled_from(methods), label="method")
    params = _ground(draw, draw(valid_params(method)), places)
    kind = draw(st.sampled_from((VALID, VALID, VALID, VALID, VALID, *MUTATIONS)), label="kind")
    if kind == VALID:
        return Case(method, kind, params)
    return Case(method, kind, _mutate(draw, kind, params, params_schema(method)))


def _target(draw: st.DrawFn, params: dict[str, Any]) -> str | None:
    keys = sorted(params)
    index = draw(_INDEX)
    return keys[index % len(keys)] if keys else None


def _mutate(draw: st.DrawFn, kind: str, params: Any, schema: dict[str, Any]) -> Any:
    if kind == "not-an-object":
        return draw(st.sampled_from(([], [1, 2], "params", 7, None, True)))
    assert isinstance(params, dict)
    changed = dict(params)
    target = _target(draw, changed)
    if kind == "missing-field":
        required = sorted(set(schema.get("required", [])) & set(changed))
        index = draw(_INDEX)
        if required:
            del changed[required[index % len(required)]]
            return changed
        kind = "extra-field"
    if kind == "extra-field" or target is None:
        name = draw(st.sampled_from(("unexpected", "feedback", "proposedCommands", "steps", "")))
        changed[name] = draw(_ANY_JSON)
        return changed
    current = changed[target]
    changed[target] = draw(_hostile_value(kind, current))
    return changed


def _big(shape: tuple[int, bool]) -> Raw:
    digits, negative = shape
    sign = "-" if negative else ""
    return Raw(sign + "9" * digits, BIG_INTEGER, -(10**30) if negative else 10**30)


def _hostile_value(kind: str, current: Any) -> SearchStrategy[Any]:
    if kind == "wrong-type":
        choices: tuple[Any, ...] = (7, -1, 1.5, "text", True, None, [], {}, [1, 2], {"a": 1})
        return st.sampled_from([c for c in choices if type(c) is not type(current)])
    if kind == "huge-string":
        return st.sampled_from((5_000, 70_000, 1_000_000)).map(lambda n: "x" * n)
    if kind == "lone-surrogate":
        return st.sampled_from(("\ud800", "plan\udfffed", "\udc00\ud800"))
    if kind == "deep-nesting":
        return st.sampled_from((10_000, 100_000)).map(
            lambda d: Raw("[" * d + "]" * d, DEEP_NESTING, [])
        )
    if kind == "big-integer":
        return st.tuples(st.sampled_from((20, 400, 4301, 20_000)), st.booleans()).map(
            lambda p: Raw(
                ("-" if p[1] else "") + "9" * p[0], BIG_INTEGER, -(10**30) if p[1] else 10**30
            )
        )
    if kind == "non-finite":
        return st.sampled_from(("NaN", "Infinity", "-Infinity", "1e400", "-1e999")).map(
            lambda text: Raw(text, NON_FINITE, 0.5)
        )
    if kind == "out-of-range":
        if isinstance(current, int) and not isinstance(current, bool):
            return st.sampled_from((-1, 2**63, 2**64, 10**20, 8_640_000_000_000_001))
        return st.sampled_from(("", "x" * 201, "relative/path", "http://", "\x00", "ftp://a/b"))
    return st.none()  # null-value


# -- byte-level garbage -------------------------------------------------------------------

_SAMPLE = b'{"jsonrpc":"2.0","id":"garbage","method":"session/list","params":{}}'
_BAD_ENVELOPES: Final = (
    b'{"id":"garbage","method":"session/list"}',
    b'{"jsonrpc":"1.0","id":"garbage","method":"session/list"}',
    b'{"jsonrpc":2.0,"id":"garbage","method":"session/list"}',
    b'{"jsonrpc":"2.0","id":"garbage","method":7}',
    b'{"jsonrpc":"2.0","id":"garbage","method":""}',
    b'{"jsonrpc":"2.0","id":{},"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":true,"method":"session/list"}',
    b'{"jsonrpc":"2.0","id":"","method":"session/list"}',
    b'{"jsonrpc":"2.0","id":"garbage","method":"session/list","extra":1}',
    b'{"jsonrpc":"2.0","id":"garbage","method":"session/list","params":[]}',
    b'{"jsonrpc":"2.0","id":"garbage","method":"session/list","params":"x"}',
    b'{"jsonrpc":"2.0","id":"garbage","result":{}}',
    b'{"jsonrpc":"2.0","id":"garbage","method":"session/list","id":"again"}',
)
_NOT_OBJECTS: Final = (b"[]", b"[1,2]", b"1", b'"x"', b"null", b"true", b"[" + _SAMPLE + b"]")
_BAD_UTF8: Final = (b"\xff\xfe", b"\xc0\xaf", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")
GARBAGE_KINDS: Final = (
    "random-bytes",
    "random-text",
    "truncated",
    "flipped-byte",
    "bad-utf8",
    "not-an-object",
    "bad-envelope",
    "byte-order-mark",
    "control-character",
    "blank",
    "big-id",
    "non-finite-id",
    "deep-nesting",
    "trailing-cr",
    "oversized",
)

# An oversized line costs the host a read of its whole frame limit: keep it rare.
_WEIGHTED_GARBAGE: Final = tuple(
    kind for kind in GARBAGE_KINDS for _ in range(1 if kind == "oversized" else 8)
)


@st.composite
def garbage(draw: st.DrawFn, max_frame_bytes: int) -> tuple[str, bytes]:
    """A hostile line (no newline inside) and what kind of garbage it is."""
    kind = draw(st.sampled_from(_WEIGHTED_GARBAGE), label="garbage")
    line = draw(_garbage_of(kind, max_frame_bytes))
    return kind, line.replace(b"\n", b"")


def _garbage_of(kind: str, max_frame_bytes: int) -> SearchStrategy[bytes]:
    if kind == "random-bytes":
        return st.binary(min_size=1, max_size=300)
    if kind == "random-text":
        return st.text(min_size=1, max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass"))
    if kind == "truncated":
        return st.integers(1, len(_SAMPLE) - 1).map(lambda cut: _SAMPLE[:cut])
    if kind == "flipped-byte":
        return st.tuples(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 255)).map(
            lambda p: _SAMPLE[: p[0]] + bytes([p[1]]) + _SAMPLE[p[0] + 1 :]
        )
    if kind == "bad-utf8":
        return st.sampled_from(_BAD_UTF8).map(lambda bad: _SAMPLE.replace(b"garbage", bad))
    if kind == "not-an-object":
        return st.sampled_from(_NOT_OBJECTS)
    if kind == "bad-envelope":
        return st.sampled_from(_BAD_ENVELOPES)
    if kind == "byte-order-mark":
        return st.just(b"\xef\xbb\xbf" + _SAMPLE)
    if kind == "control-character":
        return st.sampled_from((b"\x00", b"\x01", b"\x1b", b"\x7f", b"\t")).map(
            lambda c: _SAMPLE.replace(b"garbage", b"gar" + c + b"bage")
        )
    if kind == "blank":
        return st.sampled_from((b"", b" ", b"\t", b"\r", b" \t \r "))
    if kind == "big-id":
        return st.sampled_from((20, 4301, 50_000)).map(
            lambda n: _SAMPLE.replace(b'"garbage"', b"9" * n)
        )
    if kind == "non-finite-id":
        return st.sampled_from((b"NaN", b"Infinity", b"-Infinity", b"1e400")).map(
            lambda value: _SAMPLE.replace(b'"garbage"', value)
        )
    if kind == "deep-nesting":
        return st.sampled_from((1_000, 100_000)).map(lambda d: b"[" * d + b"]" * d)
    if kind == "trailing-cr":
        return st.just(_SAMPLE + b"\r")
    return st.just(b"x" * (max_frame_bytes + 1))  # oversized
