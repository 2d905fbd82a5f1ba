"""What teeny_tx reads from the ELF images (cubins) NVRTC makes: how long an image must be,
CuPy's stripped last byte restored, and the registers and stack frame ptxas recorded.

Input: cubin bytes (a 64-bit little-endian ELF). Output: sizes and counts; nothing is loaded.
"""

from __future__ import annotations

import struct

# ELF64 header fields: e_phoff, e_shoff at 0x20; e_phentsize, e_phnum, e_shentsize, e_shnum at 0x36.
_ELF_MAGIC = b"\x7fELF"
_ELF_HEADER_SIZE = 64
_SECTION_HEADER_SIZE = 64  # sh_type at +4, sh_offset and sh_size at +0x18
_SHT_NOBITS = 8


def _header_table_ends(image: bytes) -> tuple[int, int] | None:
    """Ends of the program and section header tables of a 64-bit little-endian ELF image."""
    if len(image) < _ELF_HEADER_SIZE or image[:4] != _ELF_MAGIC or image[4:6] != b"\x02\x01":
        return None
    phoff, shoff = struct.unpack_from("<QQ", image, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", image, 0x36)
    return phoff + phentsize * phnum, shoff + shentsize * shnum


def elf_extent(image: bytes) -> int | None:
    """Bytes a 64-bit little-endian ELF image must span (end of its last header table or
    section), or None if ``image`` is not one."""
    tables = _header_table_ends(image)
    if tables is None:
        return None
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    ends = [_ELF_HEADER_SIZE, *tables]
    if shentsize >= _SECTION_HEADER_SIZE:
        last = min(shoff + shentsize * shnum, len(image) - _SECTION_HEADER_SIZE + 1)
        for entry in range(shoff, last, shentsize):
            (kind,) = struct.unpack_from("<I", image, entry + 4)
            offset, size = struct.unpack_from("<QQ", image, entry + 0x18)
            if kind != _SHT_NOBITS:  # .bss-like sections occupy no file space
                ends.append(offset + size)
    return max(ends)


def repair_cubin(image: bytes) -> bytes:
    """Restore the last byte that CuPy's ``getCUBIN`` strips as if it were a string's NUL.

    NVRTC's cubins end with a header table, whose last byte is the high byte of a small
    integer (an alignment or entry size): the missing byte is a zero. Other images pass as is.
    """
    tables = _header_table_ends(image)
    if tables is not None and max(tables) == len(image) + 1 == elf_extent(image):
        return image + b"\x00"
    return image


_EIATTR_FRAME_SIZE, _EIATTR_REGCOUNT = 0x11, 0x2F


def cubin_resources(cubin: bytes) -> tuple[int, int]:
    """(registers per thread, stack frame bytes) that a cubin's ``.nv.info`` section records
    for its kernel ((0, 0) when it cannot be read): ptxas's ``EIATTR_REGCOUNT`` and
    ``EIATTR_FRAME_SIZE`` attributes, each a (symbol, value) pair of u32."""
    found = {_EIATTR_FRAME_SIZE: 0, _EIATTR_REGCOUNT: 0}
    try:
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        names_at = struct.unpack_from("<Q", cubin, shoff + shstrndx * shentsize + 0x18)[0]
        for entry in range(shoff, shoff + shnum * shentsize, shentsize):
            (name,) = struct.unpack_from("<I", cubin, entry)
            offset, size = struct.unpack_from("<QQ", cubin, entry + 0x18)
            end = cubin.index(b"\0", names_at + name)
            if cubin[names_at + name : end] != b".nv.info":
                continue
            pos = offset
            while pos + 4 <= offset + size:
                fmt, attr, length = struct.unpack_from("<BBH", cubin, pos)
                if fmt != 4:  # EIFMT_SVAL carries `length` bytes; the others fit in 4
                    pos += 4
                    continue
                if attr in found and length == 8:
                    found[attr] = max(found[attr], struct.unpack_from("<I", cubin, pos + 8)[0])
                pos += 4 + length
    except (struct.error, ValueError):
        return 0, 0
    return found[_EIATTR_REGCOUNT], found[_EIATTR_FRAME_SIZE]
