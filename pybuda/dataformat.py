"""Data formats and math fidelities of the Buda backend (netlist-format.md §1.5)."""
from __future__ import annotations

import enum
import functools

from .errors import UserInputError


class DataFormat(enum.Enum):
    """Tensor storage formats; values are the netlist spellings."""

    Float32 = "Float32"
    Float16 = "Float16"
    Float16_b = "Float16_b"
    Bfp8 = "Bfp8"
    Bfp8_b = "Bfp8_b"
    Bfp4 = "Bfp4"
    Bfp4_b = "Bfp4_b"
    Bfp2 = "Bfp2"
    Bfp2_b = "Bfp2_b"
    Lf8 = "Lf8"
    Fp8_e4m3 = "Fp8_e4m3"
    UInt16 = "UInt16"
    Int8 = "Int8"
    UInt8 = "UInt8"
    Int32 = "Int32"
    RawUInt8 = "RawUInt8"
    RawUInt16 = "RawUInt16"
    RawUInt32 = "RawUInt32"

    @classmethod
    def parse(cls, value: "str | DataFormat") -> "DataFormat":
        """Accept a DataFormat or its name; raise ValueError listing the legal names."""
        if isinstance(value, DataFormat):
            return value
        try:
            return cls(value)
        except ValueError:
            legal = ", ".join(f.value for f in cls)
            raise UserInputError(f"unknown data format {value!r}; legal: {legal}") from None

    @property
    def is_bfp(self) -> bool:
        return self.value.startswith("Bfp")

    @property
    def is_integer(self) -> bool:
        return self in _INTEGER

    @property
    def exponent_family(self) -> str:
        """'a' (5-bit exponent), 'b' (8-bit exponent) or '' for formats outside both families."""
        if self in _A_FORMATS:
            return "a"
        if self in _B_FORMATS:
            return "b"
        return ""

    @property
    def tile_bytes(self) -> int:
        """Bytes of one tilized 32x32 tile including header and padding (netlist-format.md §1.5)."""
        return tile_bytes(self)

    @property
    def mantissa_bits(self) -> int:
        """Explicit mantissa bits of the format (for fidelity and rounding models)."""
        return _MANTISSA_BITS.get(self, 23)


_A_FORMATS = {DataFormat.Float16, DataFormat.Bfp8, DataFormat.Bfp4, DataFormat.Bfp2}
_B_FORMATS = {DataFormat.Float16_b, DataFormat.Bfp8_b, DataFormat.Bfp4_b, DataFormat.Bfp2_b}
_INTEGER = {DataFormat.Int8, DataFormat.UInt8, DataFormat.Int32, DataFormat.UInt16,
            DataFormat.RawUInt8, DataFormat.RawUInt16, DataFormat.RawUInt32}
_BYTES_PER_DATUM = {
    DataFormat.Float32: 4, DataFormat.Int32: 4, DataFormat.RawUInt32: 4,
    DataFormat.Float16: 2, DataFormat.Float16_b: 2, DataFormat.UInt16: 2, DataFormat.RawUInt16: 2,
    DataFormat.Bfp8: 1, DataFormat.Bfp8_b: 1, DataFormat.Int8: 1, DataFormat.UInt8: 1, DataFormat.Lf8: 1,
    DataFormat.Fp8_e4m3: 1, DataFormat.RawUInt8: 1,
    DataFormat.Bfp4: 0.5, DataFormat.Bfp4_b: 0.5, DataFormat.Bfp2: 0.25, DataFormat.Bfp2_b: 0.25,
}
TILE_HEADER_BYTES = 16
NOC_ALIGN = 32


@functools.lru_cache(maxsize=None)
def tile_bytes(df: DataFormat, tile_dim: tuple = (32, 32), tilized: bool = True) -> int:
    """Bytes of one tile: data (+ one shared exponent byte per 16 values for Bfp) + 16 B header, padded to
    32 B when tilized (the backend's `get_tile_size_in_bytes`); bare data when untilized."""
    h, w = tile_dim
    data = int(h * w * _BYTES_PER_DATUM[df])
    if not tilized:
        return data
    exps = -(-(h * w) // 256) * 16 if df.is_bfp else 0   # one exponent per 16 values, 16 B granules
    return -(-(data + exps + TILE_HEADER_BYTES) // NOC_ALIGN) * NOC_ALIGN


_MANTISSA_BITS = {
    DataFormat.Float32: 23, DataFormat.Float16: 10, DataFormat.Float16_b: 7,
    DataFormat.Bfp8: 7, DataFormat.Bfp8_b: 7, DataFormat.Bfp4: 3, DataFormat.Bfp4_b: 3,
    DataFormat.Bfp2: 1, DataFormat.Bfp2_b: 1, DataFormat.Lf8: 2, DataFormat.Fp8_e4m3: 3,
}


class MathFidelity(enum.Enum):
    """Multiplier fidelity; `phases` is the number of multiplier passes (netlist-format.md §5.3)."""

    LoFi = "LoFi"
    HiFi2 = "HiFi2"
    HiFi2_A = "HiFi2_A"
    HiFi2_B = "HiFi2_B"
    HiFi3 = "HiFi3"
    HiFi4 = "HiFi4"

    @classmethod
    def parse(cls, value: "str | MathFidelity") -> "MathFidelity":
        if isinstance(value, MathFidelity):
            return value
        try:
            return cls(value)
        except ValueError:
            legal = ", ".join(f.value for f in cls)
            raise UserInputError(f"unknown math fidelity {value!r}; legal: {legal}") from None

    @property
    def phases(self) -> int:
        return {"LoFi": 1, "HiFi2": 2, "HiFi2_A": 2, "HiFi2_B": 2, "HiFi3": 3, "HiFi4": 4}[self.value]
