"""The C interface between the kernels' object code and its loader: each entry's arguments, the layout of the counts
one entry fills, the entries' symbol names, and the check for symbols an object leaves to the process (pure).

Below all three of ``kernels.py`` (fills the counts), ``native_build.py`` (builds the entries) and ``native.py``
(loads and calls them): none imports another to learn the contract. What an object depends on here, the entries'
arguments and the counts' layout, is in the cache key and the file's header (``native._contract``); the symbol
names an object was built with are read from its header.
"""

from __future__ import annotations

import struct

# Each entry's C arguments (after the int64 return slot); the entry returns numba's status, 0 when it ran.
# The order is a contract between NativeKernels' methods and native_build's bodies.
ENTRIES: dict[str, tuple[str, ...]] = {
    name: tuple(arguments.split())
    for name, arguments in (
        ("decode_bf16", "u16* f32* i64"),
        ("fit_bf16", "f32* i64 i64 i8* bool* f32* bool* f32* f32* i8* bool* f32* bool*"),
        ("search_bf16", "f32* i64 i64 f32* f32* i8* bool* bool* i8* bool*"),
        ("repack_bf16", "u16* i64 u8* u16* bool* f32* f32* u16*"),
        ("check_packed_bf16", "u16* i64 i64 u8* u16* i64 f32* bool* f32* f32* u16* f64* i32* f64*"),
    )
}
# The float64 counts check_packed_bf16 adds to, in this order (``grid._totals`` reads them back).
COMPARISON_COUNTS = (
    "values_bit_identical",
    "groups_bit_identical",
    "values_off_by_a_level_or_more",
    "max_abs_diff_bits",
    "sum_abs_diff",
    "values_nearest_level_differs",
)


def entry_symbol(name: str) -> str:
    return f"gemmaserve_checkpoint_{name}"


def undefined_symbols(object_code: bytes) -> list[str] | None:
    """The symbols an ELF64 little-endian object leaves to the process, or None when it is not one (or is damaged)."""
    try:
        if object_code[:6] != b"\x7fELF\x02\x01":
            return None
        (shoff,) = struct.unpack_from("<Q", object_code, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
        # (name, type, flags, addr, offset, size, link, info, addralign, entsize)
        sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + i * shentsize) for i in range(shnum)]
        names: set[str] = set()
        for section in sections:
            if section[1] != 2:  # SHT_SYMTAB
                continue
            strings = sections[section[6]][4]
            for offset in range(section[4], section[4] + section[5], 24):
                name, _, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", object_code, offset)
                if shndx == 0 and name:  # SHN_UNDEF
                    start = strings + name
                    names.add(object_code[start : object_code.index(b"\0", start)].decode())
        return sorted(names)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None
