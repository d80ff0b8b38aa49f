"""Code generation: a placed Buda graph to the netlist model and the run manifest (the data its queues are loaded
with and where inputs and outputs go)."""
from .manifest import ManifestError, ModelInput, RunManifest, build_manifest
from .netlist_builder import build_netlist, sparse_queue_values

__all__ = ["build_netlist", "sparse_queue_values", "build_manifest", "RunManifest", "ModelInput", "ManifestError"]
