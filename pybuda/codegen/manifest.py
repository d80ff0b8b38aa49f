"""The run manifest: where the data of every host-facing netlist queue comes from, so that a runtime runs the
netlists from the netlists, this manifest and named arrays alone (`pybuda.runtime`), without the compiler's graphs.

The model runs as `parts`, in order, over named values (the model inputs, then what each part writes; the model
outputs are values too): a `HostProgram` (CPU fallback ops, a list of registry ops in evaluation order) or a
`DevicePart` (netlist `netlist` of the compiled model's netlists). Per queue of a device part (by netlist queue
name) one `QueueFeed`:
    parameter, constant       `array`: the name of the array loaded into the ram
    sparse_tiles, encoding    `array`: the identity-matmul operands of a sparse matmul (`<op>.sparse_tiles`, ...)
    input                     `feed`: the value pushed, its `host_transforms`, `logical_shape` (after the
                              transforms) and 4-D tile-padded `device_shape`
    output                    `feed`: the value it gives, `logical_shape` and `host_transforms` applied after the
                              tile padding is removed
`intermediates` lists (op, value) for each op output `op_intermediates_to_save` saves (the value an output queue
gives, as a model output's). Training adds: `trained` (a parameter the optimizer updates: `array` and
`logical_shape`, read back for the state dict), `optimizer_state`, `parameter_residual` (a trained parameter's
compensation term, `<p>.residual`), `gradient_accumulator` (`array`: zeros; the accumulator also has its
parameter's `logical_shape`), `optimizer_parameter` (`array`: the first step's value of a per-step scalar, written
by the host into the whole tile before each step), `loss_gradient` (`feed`: the model output whose loss gradient it takes,
shapes and transforms as an input) and `gradient` (an output `run_bwd` writes: a backward value a host program
reads). A training model's host programs have an `epoch_type`: forward ones run per sample before the loss,
backward ones per sample after `run_bwd`, optimizer ones once per step; `writes` maps each output that writes a
value back to the node it writes (a gradient accumulator sums into it), `roles` gives the training role of their
parameter-like nodes and `transforms` the host transforms taking a trained parameter to the framework's layout.
Arrays of the first netlist are named after their queues, those of netlist k > 0 `<k>:<queue>`, those of host
programs `host:<node>`.

`build_manifest` is the one place that reads the compiler's io node fields for this; `RunManifest.to_json` /
`from_json` are its file form (op attributes keep tuples, numpy scalars and arrays exactly).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from ..balancer.policy import Placement
from ..errors import InternalError, UserInputError
from ..ir import GRADIENT_OUTPUT, INTERMEDIATE_OUTPUT, Graph, ShapeOnly, loss_gradient_output
from ..netlist import Netlist
from ..passes.cpu_fallback import Segment
from ..passes.intermediates import saved_op
from .netlist_builder import sparse_queue_values

MANIFEST_VERSION = 3
READABLE_VERSIONS = (2, 3)   # version 2: no training host programs (their fields take their defaults)
ARRAY_KINDS = ("parameter", "constant", "sparse_tiles", "encoding", "trained", "optimizer_state",
               "parameter_residual", "gradient_accumulator", "optimizer_parameter", "state")
FEED_KINDS = ARRAY_KINDS + ("input", "output", "loss_gradient", "gradient")
HOST_ARRAY_PREFIX = "host:"   # arrays of the host program's parameters and constants


class ManifestError(UserInputError):
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
    """Ops run on the host: they read named values `inputs` and `arrays` (node name -> array name); `outputs`
    maps each value they write to its operand. Training fields: module docstring."""

    inputs: tuple
    arrays: dict
    ops: tuple
    outputs: dict
    epoch_type: str = "forward"
    writes: dict = dataclasses.field(default_factory=dict)       # output -> the node it writes back
    roles: dict = dataclasses.field(default_factory=dict)        # parameter-like node -> its training role
    transforms: dict = dataclasses.field(default_factory=dict)   # trained node -> host transforms

    def array_names(self) -> list[str]:
        return list(self.arrays.values())


@dataclasses.dataclass(frozen=True)
class DevicePart:
    """One netlist run on the device: `netlist` indexes the compiled model's netlists; `queues` in netlist
    queue order."""

    netlist: int
    queues: dict

    def array_names(self) -> list[str]:
        return [f.array for f in self.queues.values() if f.array is not None]


@dataclasses.dataclass(frozen=True)
class RunManifest:
    """Everything a runtime needs besides the netlists and the arrays."""

    model: str
    device: str
    microbatch: int
    inputs: tuple
    outputs: tuple          # the values of the model outputs, in model output order
    parts: tuple            # HostProgram and DevicePart, in run order
    output_structure: dict | None = None   # how the torch model nests its outputs (`pybuda.frontend.outputs`)
    intermediates: tuple = ()  # (op, value) of each op output saved (`op_intermediates_to_save`)
    generation: dict | None = None   # a decode step's (`PagedStep.generation`); None: no decode step

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def device_parts(self) -> list[DevicePart]:
        return [p for p in self.parts if isinstance(p, DevicePart)]

    @property
    def queues(self) -> dict:
        """The queues of the first netlist (none for a model that runs on the host alone)."""
        return self.device_parts[0].queues if self.device_parts else {}

    def host_ops(self) -> list[HostOp]:
        """Every op run on the host, in run order."""
        return [op for p in self.parts if isinstance(p, HostProgram) for op in p.ops]

    def array_names(self) -> list[str]:
        """Every array the manifest refers to, part by part."""
        return [name for p in self.parts for name in p.array_names()]

    def to_json(self) -> str:
        """The manifest as JSON text (deterministic)."""
        data = {
            "version": MANIFEST_VERSION, "model": self.model, "device": self.device, "microbatch": self.microbatch,
            "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in self.inputs],
            "outputs": list(self.outputs),
            "parts": [_part_data(p) for p in self.parts],
            "output_structure": self.output_structure,
            "intermediates": [list(pair) for pair in self.intermediates],
            "generation": self.generation,
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
            if data["version"] not in READABLE_VERSIONS:
                raise ManifestError(f"run manifest version {data['version']!r}; this pybuda reads versions "
                                    f"{', '.join(map(str, READABLE_VERSIONS))}")
            return cls(model=str(data["model"]), device=str(data["device"]), microbatch=int(data["microbatch"]),
                       inputs=tuple(ModelInput(str(i["name"]), tuple(int(d) for d in i["shape"]), str(i["dtype"]))
                                    for i in data["inputs"]),
                       outputs=tuple(str(o) for o in data["outputs"]),
                       parts=tuple(_part(p) for p in data["parts"]),
                       output_structure=data.get("output_structure"),
                       intermediates=tuple((str(op), str(value)) for op, value in data.get("intermediates", [])),
                       generation=data.get("generation"))
        except ManifestError:
            raise
        except KeyError as e:
            raise ManifestError(f"run manifest: missing field {e}") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise ManifestError(f"run manifest: malformed ({type(e).__name__}: {e})") from None


def build_manifest(name: str, device: str, microbatch: int, inputs: list[ModelInput], outputs: list[str],
                   segments: tuple[Segment, ...], placements: tuple[Placement, ...],
                   netlists: list[Netlist], output_structure: dict | None = None, generation: dict | None = None
                   ) -> tuple[RunManifest, dict[str, np.ndarray | ShapeOnly]]:
    """The manifest of a compiled model's segments (device segments as placed Buda graphs, with their placements
    and netlists in order) and the arrays it names (by reference, as pushed; `ShapeOnly` where the compile has no
    numbers); `output_structure` is how the framework model nests its outputs (None: one tensor or a tuple);
    `generation` how a decode step is driven."""
    arrays: dict[str, np.ndarray | ShapeOnly] = {}
    parts: list = []
    placed = iter(enumerate(zip(placements, netlists)))
    for segment in segments:
        if segment.on_device:
            k, (placement, netlist) = next(placed)
            parts.append(_device_part(k, segment.graph, placement, netlist, arrays))
        else:
            parts.append(_host_program(segment.graph, arrays, segment.epoch_type or "forward"))
    intermediates = tuple((saved_op(out.name), out.name) for segment in segments if segment.on_device
                          for out in segment.graph.outputs() if out.role == INTERMEDIATE_OUTPUT)
    manifest = RunManifest(model=name, device=device, microbatch=microbatch, inputs=tuple(inputs),
                           outputs=tuple(outputs), parts=tuple(parts), output_structure=output_structure,
                           intermediates=intermediates, generation=generation)
    return manifest, arrays


def array_name(netlist: int, queue: str) -> str:
    """The array of a queue of netlist `netlist` (module docstring)."""
    return f"{netlist}:{queue}" if netlist else queue


def _device_part(k: int, bgraph: Graph, placement: Placement, netlist: Netlist,
                 arrays: dict[str, np.ndarray | ShapeOnly]) -> DevicePart:
    feeds: dict[str, QueueFeed] = {}
    for node in bgraph.nodes():
        if node.kind in ("parameter", "constant") and node.name in netlist.queues:
            arrays[array_name(k, node.name)] = _queue_array(node.value)
            logical = tuple(node.logical_shape) if node.role in ("trained", "gradient_accumulator") else None
            feeds[node.name] = QueueFeed(node.role or node.kind, array=array_name(k, node.name),
                                         host_transforms=_transforms(node, "parameter") if logical else (),
                                         logical_shape=logical, device_shape=node.shape if logical else None)
    for queue, value in sparse_queue_values(bgraph, placement).items():
        arrays[array_name(k, queue)] = value.reshape(1, *value.shape[-3:])
        feeds[queue] = QueueFeed(queue.rsplit(".", 1)[1], array=array_name(k, queue))
    for node in bgraph.inputs():
        loss = node.role == "loss_gradient"
        feeds[node.name] = QueueFeed("loss_gradient" if loss else "input",
                                     feed=loss_gradient_output(node.name) if loss else node.name,
                                     host_transforms=_transforms(node, "input"),
                                     logical_shape=tuple(node.logical_shape), device_shape=node.shape)
    for out in bgraph.outputs():
        if out.loopback is not None:
            continue
        feeds[out.name] = QueueFeed("gradient" if out.role == GRADIENT_OUTPUT else "output", feed=out.name,
                                    host_transforms=_transforms(out, "output"),
                                    logical_shape=tuple(out.logical_shape), device_shape=out.shape)
    missing = [q for q, queue in netlist.queues.items() if queue.input == "HOST" and q not in feeds]
    if missing:
        raise InternalError(f"netlist queues fed by the host with no known data: {', '.join(missing)}")
    return DevicePart(k, {q: feeds[q] for q in netlist.queues if q in feeds})


def _queue_array(value: np.ndarray | ShapeOnly) -> np.ndarray | ShapeOnly:
    """A parameter's or constant's device value as its queue holds it (entries, z, R, C: one entry, or a paged
    state's one per sample); unknown numbers stay so."""
    if isinstance(value, ShapeOnly):
        return ShapeOnly((1, *value.shape[-3:]))
    return value.reshape(-1, *value.shape[-3:])


def _transforms(node, where: str) -> tuple:
    transforms = tuple((op_type, attrs) for op_type, attrs in node.host_transforms)
    for op_type, attrs in transforms:
        encode(attrs, f"host transform {op_type!r} of {where} {node.name!r}")
    return transforms


def _host_program(host: Graph, arrays: dict[str, np.ndarray | ShapeOnly], epoch_type: str) -> HostProgram:
    inputs, values, ops, outputs, writes, roles, transforms = [], {}, [], {}, {}, {}, {}
    for name in host.topo_order():
        node = host.node(name)
        if node.kind == "input":
            inputs.append(name)
        elif node.kind in ("parameter", "constant"):
            values[name] = HOST_ARRAY_PREFIX + name
            arrays[values[name]] = node.value
            if node.role:
                roles[name] = node.role
            if node.role in ("trained", "gradient_accumulator") and node.host_transforms:
                transforms[name] = _transforms(node, "parameter")
        elif node.kind == "op":
            encode(node.attrs, f"host op {name!r} ({node.op_type})")
            ops.append(HostOp(name, node.op_type, node.attrs,
                              tuple(HostOperand(o.src, tuple(o.tms)) for o in host.operands(name))))
        else:
            (operand,) = host.operands(name)
            outputs[name] = HostOperand(operand.src, tuple(operand.tms))
            if node.loopback is not None:
                writes[name] = node.loopback
    return HostProgram(tuple(inputs), values, tuple(ops), outputs, epoch_type, writes, roles, transforms)


# --- JSON form --------------------------------------------------------------------------------------------------

def _feed_data(feed: QueueFeed) -> dict:
    data = {"kind": feed.kind}
    for field in ("array", "feed"):
        if getattr(feed, field) is not None:
            data[field] = getattr(feed, field)
    if feed.logical_shape is not None:
        data.update(host_transforms=encode(feed.host_transforms, "host_transforms"),
                    logical_shape=list(feed.logical_shape), device_shape=list(feed.device_shape))
    return data


def _feed(name: str, data: dict) -> QueueFeed:
    kind = data["kind"]
    if kind not in FEED_KINDS:
        raise ManifestError(f"run manifest: queue {name!r} has kind {kind!r}; legal kinds: {', '.join(FEED_KINDS)}")
    return QueueFeed(kind, array=data.get("array"), feed=data.get("feed"),
                     host_transforms=decode(data.get("host_transforms", {"tuple": []})),
                     logical_shape=_shape(data, "logical_shape"), device_shape=_shape(data, "device_shape"))


def _shape(data: dict, key: str) -> tuple | None:
    return tuple(int(d) for d in data[key]) if key in data else None


def _operand_data(operand: HostOperand) -> dict:
    return {"src": operand.src, "tms": encode(operand.tms, f"TMs of {operand.src!r}")}


def _operand(data: dict) -> HostOperand:
    return HostOperand(str(data["src"]), decode(data["tms"]))


def _part_data(part: HostProgram | DevicePart) -> dict:
    if isinstance(part, HostProgram):
        return _host_data(part)
    return {"netlist": part.netlist, "queues": {name: _feed_data(f) for name, f in part.queues.items()}}


def _part(data: dict) -> HostProgram | DevicePart:
    if "netlist" in data:
        return DevicePart(int(data["netlist"]), {str(name): _feed(name, f) for name, f in data["queues"].items()})
    return _host(data)


def _host_data(host: HostProgram) -> dict:
    return {"inputs": list(host.inputs), "arrays": dict(host.arrays),
            "ops": [{"name": op.name, "op_type": op.op_type, "attrs": encode(op.attrs, f"host op {op.name!r}"),
                     "operands": [_operand_data(o) for o in op.operands]} for op in host.ops],
            "outputs": {feed: _operand_data(o) for feed, o in host.outputs.items()},
            "epoch_type": host.epoch_type, "writes": dict(host.writes), "roles": dict(host.roles),
            "transforms": {name: encode(t, f"host transforms of {name!r}") for name, t in host.transforms.items()}}


def _host(data: dict) -> HostProgram:
    return HostProgram(inputs=tuple(str(i) for i in data["inputs"]), arrays=dict(data["arrays"]),
                       ops=tuple(HostOp(str(op["name"]), str(op["op_type"]), decode(op["attrs"]),
                                        tuple(_operand(o) for o in op["operands"])) for op in data["ops"]),
                       outputs={str(feed): _operand(o) for feed, o in data["outputs"].items()},
                       epoch_type=str(data.get("epoch_type", "forward")), writes=dict(data.get("writes", {})),
                       roles=dict(data.get("roles", {})),
                       transforms={str(n): decode(t) for n, t in data.get("transforms", {}).items()})


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
