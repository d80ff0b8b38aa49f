"""The run manifest: where the data of every host-facing netlist queue comes from, so that a runtime runs the
netlist from the netlist, this manifest and named arrays alone (`pybuda.runtime`), without the compiler's graphs.

Per queue (by netlist queue name) one `QueueFeed`:
    parameter, constant       `array`: the name of the array loaded into the ram
    sparse_tiles, encoding    `array`: the identity-matmul operands of a sparse matmul (`<op>.sparse_tiles`, ...)
    input                     `feed`: the model input (or host-program value) pushed, its `host_transforms`,
                              `logical_shape` (after the transforms) and 4-D tile-padded `device_shape`
    output                    `position` among the model outputs, `logical_shape` and `host_transforms` applied
                              after the tile padding is removed
The host program (CPU fallback: ops run on the host before the device) is a list of registry ops in evaluation
order; its outputs are named after the device feeds they compute.

`build_manifest` is the one place that reads the compiler's io node fields for this; `RunManifest.to_json` /
`from_json` are its file form (op attributes keep tuples, numpy scalars and arrays exactly).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from ..balancer.policy import Placement
from ..ir import Graph
from ..netlist import Netlist
from .netlist_builder import sparse_queue_values

MANIFEST_VERSION = 1
ARRAY_KINDS = ("parameter", "constant", "sparse_tiles", "encoding")
FEED_KINDS = ARRAY_KINDS + ("input", "output")
HOST_ARRAY_PREFIX = "host:"   # arrays of the host program's parameters and constants


class ManifestError(ValueError):
    """A run manifest that cannot be written, read or does not match its netlist; the message names the field."""


@dataclasses.dataclass(frozen=True)
class ModelInput:
    """One model input as compiled: the name, the shape of a whole microbatch and the framework dtype."""

    name: str
    shape: tuple
    dtype: str


@dataclasses.dataclass(frozen=True)
class QueueFeed:
    """What feeds (or drains) one netlist queue; which fields are set depends on `kind` (module docstring)."""

    kind: str
    array: str | None = None
    feed: str | None = None
    position: int | None = None
    host_transforms: tuple = ()
    logical_shape: tuple | None = None
    device_shape: tuple | None = None


@dataclasses.dataclass(frozen=True)
class HostOperand:
    """A value of the host program (an input, array or op name) and the TMs applied on the way."""

    src: str
    tms: tuple = ()


@dataclasses.dataclass(frozen=True)
class HostOp:
    name: str
    op_type: str
    attrs: dict
    operands: tuple


@dataclasses.dataclass(frozen=True)
class HostProgram:
    """Ops run on the host before the device: they read model `inputs` and `arrays` (value name -> array
    name); `outputs` maps each device feed they compute to its value."""

    inputs: tuple
    arrays: dict
    ops: tuple
    outputs: dict

    def op_names(self) -> list[str]:
        return [op.name for op in self.ops]


@dataclasses.dataclass(frozen=True)
class RunManifest:
    """Everything a runtime needs besides the netlist and the arrays; `queues` in netlist queue order."""

    model: str
    device: str
    microbatch: int
    inputs: tuple
    outputs: tuple          # output queue names, in model output order
    queues: dict
    host: HostProgram | None = None
    output_structure: dict | None = None   # how the torch model nests its outputs (`pybuda.frontend.outputs`)

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def array_names(self) -> list[str]:
        """Every array the manifest refers to (queue data, then host-program data)."""
        names = [f.array for f in self.queues.values() if f.array is not None]
        return names + (list(self.host.arrays.values()) if self.host else [])

    def to_json(self) -> str:
        """The manifest as JSON text (deterministic)."""
        data = {
            "version": MANIFEST_VERSION, "model": self.model, "device": self.device, "microbatch": self.microbatch,
            "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in self.inputs],
            "outputs": list(self.outputs),
            "queues": {name: _feed_data(feed) for name, feed in self.queues.items()},
            "host": _host_data(self.host) if self.host else None,
            "output_structure": self.output_structure,
        }
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "RunManifest":
        """Parse `to_json` output; ManifestError naming the missing or bad field."""
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ManifestError(f"run manifest is not valid JSON: {e}") from None
        try:
            if data["version"] != MANIFEST_VERSION:
                raise ManifestError(f"run manifest version {data['version']!r}; this pybuda reads version "
                                    f"{MANIFEST_VERSION}")
            return cls(model=str(data["model"]), device=str(data["device"]), microbatch=int(data["microbatch"]),
                       inputs=tuple(ModelInput(str(i["name"]), tuple(int(d) for d in i["shape"]), str(i["dtype"]))
                                    for i in data["inputs"]),
                       outputs=tuple(str(o) for o in data["outputs"]),
                       queues={str(name): _feed(name, f) for name, f in data["queues"].items()},
                       host=_host(data["host"]) if data["host"] is not None else None,
                       output_structure=data.get("output_structure"))
        except ManifestError:
            raise
        except KeyError as e:
            raise ManifestError(f"run manifest: missing field {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise ManifestError(f"run manifest: malformed ({type(e).__name__}: {e})") from None


def build_manifest(name: str, device: str, microbatch: int, inputs: list[ModelInput], bgraph: Graph,
                   placement: Placement, host_graph: Graph | None,
                   netlist: Netlist, output_structure: dict | None = None) -> tuple[RunManifest, dict[str, np.ndarray]]:
    """The manifest of a placed Buda graph's netlist and the arrays it names (by reference, as pushed);
    `output_structure` is how the framework model nests its outputs (None: one tensor or a tuple)."""
    arrays: dict[str, np.ndarray] = {}
    feeds: dict[str, QueueFeed] = {}
    for node in bgraph.nodes():
        if node.kind in ("parameter", "constant") and node.name in netlist.queues:
            arrays[node.name] = node.value.reshape(1, *node.value.shape[-3:])
            feeds[node.name] = QueueFeed(node.kind, array=node.name)
    for queue, value in sparse_queue_values(bgraph, placement).items():
        arrays[queue] = value.reshape(1, *value.shape[-3:])
        feeds[queue] = QueueFeed(queue.rsplit(".", 1)[1], array=queue)
    for node in bgraph.inputs():
        feeds[node.name] = QueueFeed("input", feed=node.name, host_transforms=_transforms(node, "input"),
                                     logical_shape=tuple(node.logical_shape), device_shape=node.shape)
    outputs = tuple(out.name for out in bgraph.outputs())
    for position, out in enumerate(bgraph.outputs()):
        feeds[out.name] = QueueFeed("output", position=position, host_transforms=_transforms(out, "output"),
                                    logical_shape=tuple(out.logical_shape), device_shape=out.shape)
    missing = [q for q, queue in netlist.queues.items() if queue.input == "HOST" and q not in feeds]
    if missing:
        raise ManifestError(f"netlist queues fed by the host with no known data (compiler bug): {', '.join(missing)}")
    host = _host_program(host_graph, arrays) if host_graph is not None else None
    manifest = RunManifest(model=name, device=device, microbatch=microbatch, inputs=tuple(inputs), outputs=outputs,
                           queues={q: feeds[q] for q in netlist.queues if q in feeds}, host=host,
                           output_structure=output_structure)
    return manifest, arrays


def _transforms(node, where: str) -> tuple:
    transforms = tuple((op_type, attrs) for op_type, attrs in node.host_transforms)
    for op_type, attrs in transforms:
        encode(attrs, f"host transform {op_type!r} of {where} {node.name!r}")
    return transforms


def _host_program(host: Graph, arrays: dict[str, np.ndarray]) -> HostProgram:
    inputs, values, ops, outputs = [], {}, [], {}
    for name in host.topo_order():
        node = host.node(name)
        if node.kind == "input":
            inputs.append(name)
        elif node.kind in ("parameter", "constant"):
            values[name] = HOST_ARRAY_PREFIX + name
            arrays[values[name]] = node.value
        elif node.kind == "op":
            encode(node.attrs, f"host op {name!r} ({node.op_type})")
            ops.append(HostOp(name, node.op_type, node.attrs,
                              tuple(HostOperand(o.src, tuple(o.tms)) for o in host.operands(name))))
        else:
            (operand,) = host.operands(name)
            outputs[node.device_input] = HostOperand(operand.src, tuple(operand.tms))
    return HostProgram(tuple(inputs), values, tuple(ops), outputs)


# --- JSON form --------------------------------------------------------------------------------------------------

def _feed_data(feed: QueueFeed) -> dict:
    data = {"kind": feed.kind}
    for field in ("array", "feed", "position"):
        if getattr(feed, field) is not None:
            data[field] = getattr(feed, field)
    if feed.kind in ("input", "output"):
        data.update(host_transforms=encode(feed.host_transforms, "host_transforms"),
                    logical_shape=list(feed.logical_shape), device_shape=list(feed.device_shape))
    return data


def _feed(name: str, data: dict) -> QueueFeed:
    kind = data["kind"]
    if kind not in FEED_KINDS:
        raise ManifestError(f"run manifest: queue {name!r} has kind {kind!r}; legal kinds: {', '.join(FEED_KINDS)}")
    return QueueFeed(kind, array=data.get("array"), feed=data.get("feed"), position=data.get("position"),
                     host_transforms=decode(data.get("host_transforms", {"tuple": []})),
                     logical_shape=_shape(data, "logical_shape"), device_shape=_shape(data, "device_shape"))


def _shape(data: dict, key: str) -> tuple | None:
    return tuple(int(d) for d in data[key]) if key in data else None


def _operand_data(operand: HostOperand) -> dict:
    return {"src": operand.src, "tms": encode(operand.tms, f"TMs of {operand.src!r}")}


def _operand(data: dict) -> HostOperand:
    return HostOperand(str(data["src"]), decode(data["tms"]))


def _host_data(host: HostProgram) -> dict:
    return {"inputs": list(host.inputs), "arrays": dict(host.arrays),
            "ops": [{"name": op.name, "op_type": op.op_type, "attrs": encode(op.attrs, f"host op {op.name!r}"),
                     "operands": [_operand_data(o) for o in op.operands]} for op in host.ops],
            "outputs": {feed: _operand_data(o) for feed, o in host.outputs.items()}}


def _host(data: dict) -> HostProgram:
    return HostProgram(inputs=tuple(str(i) for i in data["inputs"]), arrays=dict(data["arrays"]),
                       ops=tuple(HostOp(str(op["name"]), str(op["op_type"]), decode(op["attrs"]),
                                        tuple(_operand(o) for o in op["operands"])) for op in data["ops"]),
                       outputs={str(feed): _operand(o) for feed, o in data["outputs"].items()})


def encode(value: Any, where: str) -> Any:
    """A JSON-able form of an op attribute value that `decode` turns back into an equal value of the same types:
    JSON scalars and lists as themselves; tuples, dicts, numpy scalars and arrays as one-key tagged objects."""
    if value is None or isinstance(value, (bool, int, float, str)) and not isinstance(value, np.generic):
        return value
    if isinstance(value, list):
        return [encode(v, where) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, where) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k, where), encode(v, where)] for k, v in value.items()]}
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"numpy": [value.dtype.str, value.item()]}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return {"ndarray": [value.dtype.str, list(value.shape), value.ravel().tolist()]}
    raise ManifestError(f"{where}: a value of type {type(value).__name__} cannot be written to the run manifest "
                        "(supported: None, bool, int, float, str, list, tuple, dict, numpy numbers and arrays)")


def decode(value: Any) -> Any:
    """The inverse of `encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ManifestError(f"run manifest: malformed attribute value {value!r}")
    (tag, body), = value.items()
    if tag == "tuple":
        return tuple(decode(v) for v in body)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in body}
    if tag == "numpy":
        return np.dtype(body[0]).type(body[1])
    if tag == "ndarray":
        return np.array(body[2], dtype=np.dtype(body[0])).reshape(body[1])
    raise ManifestError(f"run manifest: unknown attribute tag {tag!r}")
