"""Hostile inputs for the upload parsers, each built in memory (nothing shipped, nothing downloaded).

Every builder returns the bytes (or text) of one crafted file; its docstring says what it is, how large it is and
what it does to a naive parser. Building one never parses it: feeding it to pypdf, zipfile, PyYAML, `ast`, the
Markdown heading regex or BeautifulSoup is the test's business, and a test that does so runs the parse in a
subprocess with a CPU and memory limit. tests/retrieval/test_hostile_files.py checks that each builder makes what
it claims without running the dangerous parse.

The PDFs are written as raw PDF syntax with a correct cross-reference table (`_pdf`); the zips that zipfile refuses
to write (lying sizes, wrong CRC, an encryption flag without encryption, an unknown method) by `_zip_raw`.
"""

import bz2
import functools
import io
import random
import struct
import zipfile
import zlib

MIB = 1 << 20
GIB = 1 << 30

# --- PDF -------------------------------------------------------------------------------------------------------------


def _pdf(objects: list[bytes], *, root: int = 1) -> bytes:
    """A PDF file of the given object bodies, numbered 1..n, with an exact xref table (20-byte entries)."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, root, xref)
    return bytes(out)


def _stream(data: bytes, entries: bytes = b"") -> bytes:
    """A stream object body: its dictionary (with the exact /Length) and its raw data."""
    return b"<< /Length %d%s >>\nstream\n" % (len(data), b" " + entries if entries else b"") + data + b"\nendstream"


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1", "replace") + b")"


def _text_ops(text: str) -> bytes:
    """A content stream that shows `text` (one line a text line) in Helvetica 12."""
    lines = b" T* ".join(_pdf_string(line) + b" Tj" for line in text.splitlines() or [""])
    return b"BT /F1 12 Tf 14 TL 72 720 Td " + lines + b" ET"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _one_page_pdf(content: bytes, *, catalog_extra: bytes = b"", extra_objects: tuple[bytes, ...] = ()) -> bytes:
    """Objects 1 catalog, 2 pages, 3 page, 4 font, 5 the content stream (`content` is its whole body); 6.. extras."""
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R" + (b" " + catalog_extra if catalog_extra else b"") + b" >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >>"
            b" /Contents 5 0 R >>",
            FONT,
            content,
            *extra_objects,
        ]
    )


def pdf_plain(text: str = "A plain PDF page.\nIts text is extractable.") -> bytes:
    """Control, ~660 B: a normal one-page PDF with extractable text; every parser must accept it."""
    return _one_page_pdf(_stream(_text_ops(text)))


def pdf_outline_cycle() -> bytes:
    """~870 B PDF whose outline item's /Next is itself: a naive outline walk appends it forever."""
    # pypdf 5.6.0: memory grows ~80 MB/s (1.9 GB in 23 s). pypdf 7.1.1 detects the cycle.
    return _one_page_pdf(
        _stream(_text_ops("Outline cycle")),
        catalog_extra=b"/Outlines 6 0 R /PageMode /UseOutlines",
        extra_objects=(
            b"<< /Type /Outlines /First 7 0 R /Last 7 0 R /Count 1 >>",
            b"<< /Title (Loop) /Parent 6 0 R /Dest [3 0 R /Fit] /Next 7 0 R /Prev 7 0 R >>",
        ),
    )


def pdf_outline_deep(depth: int = 2000) -> bytes:
    """~130 B a level (265 KB at 2000): an outline nested `depth` deep by /First; recursive walks overflow."""
    # pypdf 5.6.0: RecursionError from ~500 levels; 7.1.1: LimitReachedError past outline_maximum_depth (100).
    first = 7  # object 6 is the /Outlines root, 7..6+depth the items, item k's child is k+1
    items = []
    for level in range(depth):
        number, parent = first + level, (first + level - 1 if level else 6)
        child = b" /First %d 0 R /Last %d 0 R /Count 1" % (number + 1, number + 1) if level < depth - 1 else b""
        items.append(b"<< /Title (L%d) /Parent %d 0 R /Dest [3 0 R /Fit]%s >>" % (level, parent, child))
    return _one_page_pdf(
        _stream(_text_ops("Deep outline")),
        catalog_extra=b"/Outlines 6 0 R",
        extra_objects=(b"<< /Type /Outlines /First 7 0 R /Last 7 0 R /Count %d >>" % depth, *items),
    )


@functools.lru_cache(maxsize=8)
def _deflate_run(size: int, byte: int = 0, *, wrap: bool = False) -> bytes:
    """`size` copies of one byte as deflate data (~1030:1), built in milliseconds without compressing `size` bytes:
    after a full flush the compressor forgets its window, so each 1 MiB chunk compresses to the same bytes, which
    are repeated. Raw deflate, or a zlib stream (header and Adler-32) when `wrap`."""
    chunk = bytes([byte]) * MIB
    count, tail = divmod(size, MIB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = []
    if count:
        first = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
        parts.append(first)
        if count > 1:
            repeated = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
            parts.append(repeated * (count - 1))
    parts.append(compressor.compress(chunk[:tail]) + compressor.flush(zlib.Z_FINISH))
    data = b"".join(parts)
    if not wrap:
        return data
    checksum = zlib.adler32(b"")
    for _ in range(count):
        checksum = zlib.adler32(chunk, checksum)
    checksum = zlib.adler32(chunk[:tail], checksum)
    return b"\x78\xda" + data + struct.pack(">I", checksum)


def pdf_flate_bomb(inflated_bytes: int = 500 * MIB, layers: int = 2) -> bytes:
    """~1.9 KB PDF (1 layer: 520 KB) whose content inflates to 500 MiB: a whole-stream decoder holds it all."""
    # zlib stops near 1030:1, so `layers` /FlateDecode filters are chained; the content is spaces, which a content
    # stream tokeniser then walks byte by byte.
    data = _deflate_run(inflated_bytes, ord(" "), wrap=True)
    for _ in range(layers - 1):
        data = zlib.compress(data, 9)
    filters = b"[" + b" ".join([b"/FlateDecode"] * layers) + b"]"
    return _one_page_pdf(_stream(data, b"/Filter " + filters))


def pdf_page_tree_malformed(kind: str = "not_dict") -> bytes:
    """~680 B PDF whose /Kids holds an integer, itself (`cycle`) or is a dict: naive page walks crash."""
    kids = {
        "not_dict": b"[6 0 R]",
        "cycle": b"[2 0 R]",
        "kids_dict": b"<< /Foo 3 0 R >>",
    }[kind]
    return _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids " + kids + b" /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >>"
            b" /Contents 5 0 R >>",
            FONT,
            _stream(_text_ops("Malformed page tree")),
            b"42",
        ]
    )


def pdf_unknown_filter() -> bytes:
    """~650 B PDF whose content stream has /Filter /NoSuchDecode: the decoder lookup raises."""
    return _one_page_pdf(_stream(_text_ops("Unknown filter"), b"/Filter /NoSuchDecode"))


def pdf_bad_lzw(size: int = 4096) -> bytes:
    """~4.7 KB PDF: /LZWDecode over random bytes whose codes overrun the table; a naive decoder indexes past it."""
    garbage = random.Random(1).randbytes(size)
    return _one_page_pdf(_stream(garbage, b"/Filter /LZWDecode"))


def pdf_negative_predictor_columns(columns: int = -5) -> bytes:
    """~710 B PDF: flate with /Predictor 12 and /Columns -5 (or 0): a row length below 2."""
    data = zlib.compress(_text_ops("Negative predictor columns"))
    return _one_page_pdf(_stream(data, b"/Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns %d >>" % columns))


def pdf_corrupt_flate(inflated_bytes: int = 32 * MIB) -> bytes:
    """~34 KB PDF: 32 MiB of flate content, then a bad Adler-32: a byte-at-a-time retry is quadratic."""
    # pypdf 5.6.0 retries `result += d.decompress(one_byte)` over the whole input: 8 MiB 2.5 s, 32 MiB 280 s.
    data = bytearray(_deflate_run(inflated_bytes, ord(" "), wrap=True))
    data[-4:] = b"\x00\x00\x00\x00"  # a wrong Adler-32: zlib raises at the very end
    return _one_page_pdf(_stream(bytes(data), b"/Filter /FlateDecode"))


def pdf_many_pages(n: int = 10_000) -> bytes:
    """~95 B a page (950 KB at 10,000, 9.7 MB at 100,000): `n` tiny pages, each one parsed and extracted."""
    first_page = 5  # 1 catalog, 2 pages, 3 font, 4 content, 5..4+n the pages
    kids = b" ".join(b"%d 0 R" % (first_page + i) for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + kids
        + b"] /Count %d /MediaBox [0 0 100 100]" % n
        + b" /Resources << /Font << /F1 3 0 R >> >> >>",
        FONT,
        _stream(b"BT /F1 8 Tf 10 50 Td (p) Tj ET"),
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>"] * n
    return _pdf(objects)


# --- zip -------------------------------------------------------------------------------------------------------------

FIXED_DATE = (2024, 1, 1, 0, 0, 0)  # every member's date: a builder returns the same bytes each time
DOS_TIME, DOS_DATE = 0, (2024 - 1980) << 9 | 1 << 5 | 1


def _zip_raw(entries: list[dict]) -> bytes:
    """A zip written field by field, for what zipfile refuses to write. Each entry: name, data (the stored bytes as
    they are), method, crc, size (the declared uncompressed size), flags (default 0)."""
    out = bytearray()
    central = bytearray()
    for entry in entries:
        name = entry["name"].encode()
        data, flags, method = entry["data"], entry.get("flags", 0), entry["method"]
        fields = (20, flags, method, DOS_TIME, DOS_DATE, entry["crc"], len(data), entry["size"], len(name))
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields, 0) + name + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, *fields, 0, 0, 0, 0, 0o644 << 16, offset) + name
    count = len(entries)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(central), len(out), 0)
    return bytes(out + central + eocd)


def zip_plain(files: dict[str, bytes] | None = None) -> bytes:
    """Control, ~240 B: an ordinary deflated zip of `files` (default two Markdown files), written by zipfile."""
    files = files if files is not None else {"docs/a.md": b"# A\n\nalpha\n", "docs/b.md": b"# B\n\nbeta\n"}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(zipfile.ZipInfo(name, FIXED_DATE), data, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def zip_bomb_deflate(inflated_bytes: int = GIB, declared_size: int = 16) -> bytes:
    """~1.06 MB zip: a deflate member declaring 16 bytes that inflates to 1 GiB; trusting sizes is fatal."""
    # The headers carry the CRC of the 16 declared zero bytes: zipfile's read() inflates the whole GiB (its max_length
    # is 2**31-1), keeps 16 bytes and finds the CRC right.
    data = _deflate_run(inflated_bytes)
    crc = zlib.crc32(bytes(declared_size))
    return _zip_raw(
        [{"name": "bomb.md", "data": data, "method": zipfile.ZIP_DEFLATED, "crc": crc, "size": declared_size}]
    )


# Bit patterns: a bzip2 block starts with the first, the stream ends with the second.
BZ2_BLOCK_MAGIC = f"{0x314159265359:048b}"
BZ2_END_MAGIC = f"{0x177245385090:048b}"


def _bits(data: bytes) -> str:
    return "".join(f"{byte:08b}" for byte in data)


def _bits_to_bytes(text: str) -> bytes:
    text += "0" * (-len(text) % 8)
    return int(text, 2).to_bytes(len(text) // 8, "big")


def _bz2_blocks(stream: bytes) -> list[tuple[str, int]]:
    """The blocks of a (small) bzip2 stream as (their bits, their CRC), between `BZh9` and the end-of-stream mark."""
    text = _bits(stream)[32:]
    end = text.rindex(BZ2_END_MAGIC)
    starts, at = [], text.find(BZ2_BLOCK_MAGIC)
    while 0 <= at < end:
        starts.append(at)
        at = text.find(BZ2_BLOCK_MAGIC, at + 1)
    return [(text[a:b], int(text[a + 48 : a + 80], 2)) for a, b in zip(starts, [*starts[1:], end], strict=True)]


def _bz2_stream(blocks: list[tuple[str, int]]) -> bytes:
    """A bzip2 stream of the given blocks, with their combined CRC."""
    combined = 0
    for _, crc in blocks:
        combined = (((combined << 1) | (combined >> 31)) & 0xFFFFFFFF) ^ crc
    return _bits_to_bytes(_bits(b"BZh9") + "".join(bits for bits, _ in blocks) + BZ2_END_MAGIC + f"{combined:032b}")


@functools.lru_cache(maxsize=4)
def _bzip2_zeros(size: int) -> bytes:
    """A bzip2 stream of `size` zero bytes, spliced from blocks (bzip2 of 1 GiB takes ~8 s, this ~0.4 s): every full
    900k block of zeros holds the same input (45,899,235 bytes) and has the same bits, so the stream is the full
    block n times, then the block of the remaining zeros, then the end mark and the combined CRC."""
    full = _bz2_blocks(bz2.compress(bytes(44 * MIB), 9))[0]  # 44 MiB is a full block and a little more
    per_block = len(bz2.decompress(_bz2_stream([full])))
    count, tail = divmod(size, per_block)
    return _bz2_stream([full] * count + (_bz2_blocks(bz2.compress(bytes(tail), 9)) if tail else []))


def zip_bomb_bzip2(inflated_bytes: int = GIB, declared_size: int = 16) -> bytes:
    """~900 B zip: a bzip2 member declaring 16 bytes that inflates to 1 GiB; zipfile's read() is unbounded."""
    # zipfile's bzip2 path calls decompress(data) with no max_length: the GiB is allocated before the 16 bytes are kept.
    data = _bzip2_zeros(inflated_bytes)
    crc = zlib.crc32(bytes(declared_size))
    return _zip_raw([{"name": "bomb.md", "data": data, "method": zipfile.ZIP_BZIP2, "crc": crc, "size": declared_size}])


def zip_many_members(n: int = 50_000) -> bytes:
    """~107 B a member (5.35 MB at 50,000): `n` one-byte members; opening builds `n` ZipInfos at once."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for i in range(n):
            archive.writestr(zipfile.ZipInfo(f"many/f{i:06d}.md", FIXED_DATE), b"x")
    return buffer.getvalue()


def zip_honest_large(member_bytes: int = 64 * MIB, count: int = 4) -> bytes:
    """~265 KB zip of 4 x 64 MiB of zeros with honest sizes: a declared-size check must refuse it unread."""
    data = _deflate_run(member_bytes)
    crc, chunk = 0, bytes(MIB)
    whole, tail = divmod(member_bytes, MIB)
    for _ in range(whole):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(chunk[:tail], crc)
    entry = {"data": data, "method": zipfile.ZIP_DEFLATED, "crc": crc, "size": member_bytes}
    return _zip_raw([entry | {"name": f"large/part{i}.md"} for i in range(count)])


def _one_member(data: bytes = b"# Note\n\nplain text\n", **fields) -> bytes:
    entry = {"name": "note.md", "data": data, "method": zipfile.ZIP_STORED, "crc": zlib.crc32(data), "size": len(data)}
    return _zip_raw([entry | fields])


def zip_bad_crc() -> bytes:
    """~130 B zip: one stored member with a wrong CRC-32 in its headers; zipfile's read() raises BadZipFile."""
    data = b"# Note\n\nplain text\n"
    return _one_member(data, crc=zlib.crc32(data) ^ 0xFFFFFFFF)


def zip_encrypted_member() -> bytes:
    """~130 B zip: a plain member with the encryption flag set; zipfile's read() wants a password."""
    return _one_member(flags=0x1)


def zip_unknown_method() -> bytes:
    """~130 B zip: a member with compression method 99; zipfile's read() raises NotImplementedError."""
    return _one_member(method=99)


def zip_corrupt_deflate() -> bytes:
    """~180 B zip: a deflate member of 64 0xFF bytes (reserved block type); read() raises zlib.error."""
    return _one_member(b"\xff" * 64, method=zipfile.ZIP_DEFLATED, crc=0, size=100)


def zip_skill_two_roots() -> bytes:
    """~540 B skill zip: alpha/ (with SKILL.md) and beta/; files outside the skill's folder break it."""
    return zip_plain(
        {
            "alpha/SKILL.md": b"---\nname: alpha\ndescription: the first root\n---\n\n# Alpha\n",
            "alpha/notes.md": b"# Notes\n",
            "beta/README.md": b"# Beta\n\nA second root.\n",
            "beta/guide.md": b"# Guide\n",
        }
    )


# --- text ------------------------------------------------------------------------------------------------------------


def yaml_deep_front_matter(depth: int = 2000, style: str = "flow") -> str:
    """~4 KB Markdown whose front matter nests `depth` lists (flow or block): PyYAML's composer recurses."""
    if style == "flow":
        value = "[" * depth + "1" + "]" * depth
    elif style == "block":
        value = "\n  " + "- " * depth + "1"
    else:
        raise ValueError(style)
    return f"---\ntitle: deep\nvalue: {value}\n---\n\n# Body\n\ntext\n"


def yaml_billion_laughs(levels: int = 9, refs: int = 9) -> str:
    """~370 B SKILL.md: `description:` of 9 anchors x 9 aliases = 9**9 leaves, exploding when walked."""
    # yaml.safe_load shares the aliased lists (quick); json.dumps, str() or any walk of the result expands them.
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = ["---", "name: laughs", f"l0: &{names[0]} [" + ",".join(["lol"] * refs) + "]"]
    for level in range(1, levels - 1):
        lines.append(f"l{level}: &{names[level]} [" + ",".join([f"*{names[level - 1]}"] * refs) + "]")
    lines.append("description: [" + ",".join([f"*{names[levels - 2]}"] * refs) + "]")
    return "\n".join(lines) + "\n---\n\n# Laughs\n"


def python_deep_expression(depth: int = 200_000, kind: str = "unary") -> str:
    """~200-400 KB .py: one 200,000-deep expression; `ast.parse` raises MemoryError or RecursionError."""
    # Kinds: `unary` x = ---...1, `parens` x = ((...1...)) (the tokenizer stops at 200 with a SyntaxError),
    # `binop` x = a+a+...+a (left-nested BinOps), `attribute` x = a.a.a... (left-nested Attributes).
    if kind == "unary":
        expression = "-" * depth + "1"
    elif kind == "parens":
        expression = "(" * depth + "1" + ")" * depth
    elif kind == "binop":
        expression = "a+" * depth + "a"
    elif kind == "attribute":
        expression = "a" + ".a" * depth
    else:
        raise ValueError(kind)
    return f'"""Deep."""\n\n\ndef f():\n    return 1\n\n\nx = {expression}\n'


MARKDOWN_HEADING = r"^(#{1,6})\s+(.+?)\s*#*\s*$"  # retrieval/documents/markdown.py's _HEADING, matched line by line


def markdown_redos_heading(length: int = 10_000) -> str:
    """A `length`-char heading `# a<spaces>a`: MARKDOWN_HEADING backtracks cubically (1,000 chars: 1.3 s)."""
    # The lazy (.+?) stops before each space, and \s*#*\s*$ then tries every split of the spaces left: O(n) stops
    # times O(n**2) splits, since the final `a` fails `$` each time.
    return "# a" + " " * (length - 4) + "a"


def html_deep_nesting(depth: int = 50_000, every_level: bool = False) -> str:
    """~11 B a level (550 KB at 50,000): nested <div>s; `every_level` adds a <p> to each (quadratic)."""
    # With a <p> in every div (~19 B a level), each <p>'s find_parent(BLOCKS) walks all its ancestor divs.
    opening = "<div><p>x</p>" if every_level else "<div>"
    return "<html><body>" + opening * depth + "<p>deep</p>" + "</div>" * depth + "</body></html>"
