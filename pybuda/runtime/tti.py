"""TTI images: a compiled model in one file that runs without the framework model and without recompiling.

A TTI image is a zip archive (no pickled objects):
    pybuda-tti.json    {"format": "pybuda-tti", "version": 2, "netlists": [entry, ...], "arrays": {array name: entry}}
    netlist.yaml       the first netlist exactly as compile wrote it (netlist_<k>.yaml: the k-th after it)
    manifest.json      the run manifest (model name, device, microbatch, inputs, outputs, parts: host programs
                       and device parts with their queue feeds)
    arrays/NNNNN.npy   parameters, constants, sparse-matmul operands and host-program data (numpy .npy, stored)
It is written atomically (a temporary file in the same directory, then a rename); entries carry fixed
timestamps, so the same compiled model gives a byte-identical file. Reading checks every entry's CRC and
raises `TTIError` naming the file and what is wrong.
"""
from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..codegen.manifest import ManifestError, RunManifest
from ..errors import UserInputError
from ..files import write_atomically
from ..netlist import NetlistError
from ..netlist import load as load_netlist
from .model import RuntimeModel

TTI_FORMAT = "pybuda-tti"
TTI_VERSION = 2
HEADER = "pybuda-tti.json"
NETLIST = "netlist.yaml"
MANIFEST = "manifest.json"
_ZIP_MAGIC = b"PK\x03\x04"
_TIMESTAMP = (1980, 1, 1, 0, 0, 0)


class TTIError(UserInputError):
    """A file that is not a readable TTI image of this version; the message names the file and the problem."""


def _netlist_entry(k: int) -> str:
    return NETLIST if k == 0 else f"netlist_{k}.yaml"


def save_tti(path: str | Path, netlist_texts: list[str], manifest: RunManifest,
             arrays: dict[str, np.ndarray]) -> Path:
    """Write a TTI image of the netlists, their run manifest and the arrays the manifest names."""
    entries = {name: f"arrays/{i:05d}.npy" for i, name in enumerate(dict.fromkeys(manifest.array_names()))}
    netlists = {_netlist_entry(k): text for k, text in enumerate(netlist_texts)}
    header = {"format": TTI_FORMAT, "version": TTI_VERSION, "netlists": list(netlists), "arrays": entries}

    def write(f) -> None:
        with zipfile.ZipFile(f, "w") as zf:
            for entry, text in ((HEADER, json.dumps(header, indent=1) + "\n"), *netlists.items(),
                                (MANIFEST, manifest.to_json())):
                zf.writestr(_info(entry, zipfile.ZIP_DEFLATED), text.encode())
            for name, entry in entries.items():
                with zf.open(_info(entry, zipfile.ZIP_STORED), "w", force_zip64=True) as out:
                    np.lib.format.write_array(out, np.ascontiguousarray(arrays[name]), allow_pickle=False)

    return write_atomically(path, write)


def load(path: str | Path) -> RuntimeModel:
    """The model saved in a TTI image, ready to run (`model(*inputs)`), with its netlist and estimate."""
    path = Path(path)
    netlist_texts, manifest, arrays = read_tti(path)
    try:
        netlists = [load_netlist(text) for text in netlist_texts]
    except NetlistError as e:
        raise TTIError(f"{path}: a netlist in the image does not load: {e}") from None
    try:
        model = RuntimeModel(netlists, netlist_texts, manifest, arrays, source=path)
    except ValueError as e:   # the manifest does not match the netlist, or names an unknown device
        raise TTIError(f"{path}: {e}") from None
    model.tti_path = path
    return model


def read_tti(path: str | Path, arrays: bool = True) -> tuple[list[str], RunManifest, dict[str, np.ndarray]]:
    """The netlist texts, run manifest and arrays (none read unless `arrays`) of a TTI image (TTIError if it is
    not one or is damaged)."""
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(len(_ZIP_MAGIC))
    if magic != _ZIP_MAGIC:
        raise TTIError(f"{path}: not a pybuda TTI image ({'the file is empty' if not magic else 'not a zip archive'})")
    try:
        with zipfile.ZipFile(path) as zf:
            present = set(zf.namelist())
            if HEADER not in present:
                raise TTIError(f"{path}: not a pybuda TTI image (a zip archive without {HEADER})")
            header = json.loads(zf.read(HEADER))
            if not isinstance(header, dict) or header.get("format") != TTI_FORMAT:
                raise TTIError(f"{path}: not a pybuda TTI image ({HEADER} does not say format {TTI_FORMAT!r})")
            if header.get("version") != TTI_VERSION:
                raise TTIError(f"{path}: TTI format version {header.get('version')!r}; this pybuda reads version "
                               f"{TTI_VERSION} (recompile the model and save it again)")
            missing = [e for e in (*header["netlists"], MANIFEST, *header["arrays"].values()) if e not in present]
            if missing:
                raise TTIError(f"{path}: the TTI image is incomplete: no {', '.join(missing)}")
            netlist_texts = [zf.read(entry).decode() for entry in header["netlists"]]
            manifest = RunManifest.from_json(zf.read(MANIFEST).decode())
            arrays = {name: _read_array(zf, entry) for name, entry in header["arrays"].items()} if arrays else {}
    except TTIError:
        raise
    except ManifestError as e:
        raise TTIError(f"{path}: {e}") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, UnicodeDecodeError, ValueError, KeyError, TypeError,
            AttributeError) as e:
        raise TTIError(f"{path}: the TTI image is truncated or corrupt ({type(e).__name__}: {e})") from None
    return netlist_texts, manifest, arrays


def netlist_sources(path: str | Path) -> list[tuple[str, str | Path]]:
    """(label, netlist source) of a netlist YAML file (the path itself) or of each netlist of a TTI image (its
    text; the image's arrays are not read), for tools that look at netlists alone."""
    path = Path(path)
    if path.suffix != ".tti":
        return [(path.name, path)]
    texts, _, _ = read_tti(path, arrays=False)
    return [(f"{path.name}[{k}]" if len(texts) > 1 else path.name, text) for k, text in enumerate(texts)]


def _info(entry: str, compression: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(entry, date_time=_TIMESTAMP)
    info.compress_type = compression
    return info


def _read_array(zf: zipfile.ZipFile, entry: str) -> np.ndarray:
    """One .npy entry; reading to its end makes zipfile check the CRC."""
    with zf.open(entry) as f:
        array = np.lib.format.read_array(f, allow_pickle=False)
        if f.read(1):
            raise ValueError(f"entry {entry}: bytes after the array data")
    return array
