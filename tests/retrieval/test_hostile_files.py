"""The hostile-input builders (tests/hostile_files.py) make what they claim, checked without the dangerous parse:
PDFs by their xref table and object bodies, zips by their headers and a capped streaming inflate, text by counting
and by parsing a shallow variant. No database: these run in the `unit` lane."""

import bz2
import io
import re
import struct
import zipfile
import zlib

import pytest
import yaml

from tests import hostile_files as h

pytestmark = pytest.mark.unit

UPLOAD_CAP = 10 * 1024 * 1024
CAP = 64 * h.MIB  # a streaming inflate stops here: enough to show a 16-byte declaration is a lie


# --- helpers: read what was built without handing it to the parser under test ---------------------------------------


def pdf_objects(data: bytes) -> dict[int, bytes]:
    """The object bodies of a PDF by number, found through its xref table (which must point at each `n 0 obj`)."""
    assert data.startswith(b"%PDF-1.7\n") and data.endswith(b"%%EOF\n")
    startxref = int(data[data.rindex(b"startxref") :].split()[1])
    assert data[startxref:].startswith(b"xref\n")
    header, _, rest = data[startxref + 5 :].partition(b"\n")
    first, count = map(int, header.split())
    assert first == 0
    entries = [rest[i * 20 : i * 20 + 20] for i in range(count)]
    assert entries[0] == b"0000000000 65535 f \n"
    trailer = rest[count * 20 :]
    assert trailer.startswith(b"trailer\n<< /Size %d /Root 1 0 R >>" % count)
    objects = {}
    for number, entry in enumerate(entries[1:], 1):
        assert len(entry) == 20 and entry.endswith(b" 00000 n \n"), entry
        offset = int(entry[:10])
        prefix = b"%d 0 obj\n" % number
        assert data[offset:].startswith(prefix), (number, data[offset : offset + 20])
        end = data.index(b"\nendobj\n", offset)
        objects[number] = data[offset + len(prefix) : end]
    return objects


def stream_parts(body: bytes) -> tuple[bytes, bytes]:
    """(dictionary, data) of a stream object body; the data's length is the declared /Length."""
    dictionary, _, rest = body.partition(b"\nstream\n")
    length = int(re.search(rb"/Length (\d+)", dictionary).group(1))
    assert rest[length:] == b"\nendstream"
    return dictionary, rest[:length]


def inflated_size(data: bytes, *, wbits: int = zlib.MAX_WBITS, cap: int = CAP) -> int:
    """Bytes a deflate/zlib stream inflates to, counted 1 MiB at a time and never more than `cap`."""
    decompressor, total, pending = zlib.decompressobj(wbits), 0, data
    while not decompressor.eof and total < cap:
        piece = decompressor.decompress(pending, h.MIB)
        pending = decompressor.unconsumed_tail
        total += len(piece)
        if not piece and not pending:
            break
    return min(total, cap)


def bz2_inflated_size(data: bytes, *, cap: int = CAP) -> int:
    decompressor, total, pending = bz2.BZ2Decompressor(), 0, data
    while not decompressor.eof and total < cap:
        piece = decompressor.decompress(pending, h.MIB)
        pending = b""
        total += len(piece)
        if not piece and decompressor.needs_input:
            break
    return min(total, cap)


def local_header(data: bytes, offset: int = 0) -> dict:
    """The fields of the local file header at `offset` and the member's raw (compressed) bytes."""
    fields = struct.unpack("<IHHHHHIIIHH", data[offset : offset + 30])
    assert fields[0] == 0x04034B50
    name_end = offset + 30 + fields[9]
    start = name_end + fields[10]
    return {
        "flags": fields[2],
        "method": fields[3],
        "crc": fields[6],
        "compress_size": fields[7],
        "file_size": fields[8],
        "name": data[offset + 30 : name_end].decode(),
        "data": data[start : start + fields[7]],
    }


def only_member(data: bytes) -> tuple[zipfile.ZipInfo, dict]:
    """The central-directory entry (zipfile only reads the directory here) and the local header of a 1-member zip."""
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    assert len(infos) == 1
    return infos[0], local_header(data, infos[0].header_offset)


# --- sizes -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "bound"),
    [
        (h.pdf_plain, 1_000),
        (h.pdf_outline_cycle, 1_200),
        (h.pdf_outline_deep, 300_000),
        (h.pdf_flate_bomb, 4_000),
        (lambda: h.pdf_flate_bomb(layers=1), 600_000),
        (h.pdf_page_tree_malformed, 1_000),
        (h.pdf_unknown_filter, 1_000),
        (h.pdf_bad_lzw, 6_000),
        (h.pdf_negative_predictor_columns, 1_000),
        (h.pdf_corrupt_flate, 40_000),
        (h.pdf_many_pages, 1_000_000),
        (h.zip_plain, 1_000),
        (h.zip_bomb_deflate, 1_100_000),
        (h.zip_bomb_bzip2, 1_024),
        (h.zip_many_members, 6_000_000),
        (h.zip_honest_large, 300_000),
        (h.zip_bad_crc, 200),
        (h.zip_encrypted_member, 200),
        (h.zip_unknown_method, 200),
        (h.zip_corrupt_deflate, 300),
        (h.zip_skill_two_roots, 1_000),
        (h.yaml_deep_front_matter, 5_000),
        (h.yaml_billion_laughs, 400),
        (h.python_deep_expression, 210_000),
        (h.markdown_redos_heading, 10_000),
        (h.html_deep_nesting, 600_000),
    ],
)
def test_each_builder_is_small_and_deterministic(build, bound):
    first = build()
    assert len(first) <= bound <= UPLOAD_CAP
    assert build() == first


def test_the_largest_parameters_stay_under_the_upload_cap():
    assert len(h.pdf_many_pages(100_000)) < UPLOAD_CAP
    assert len(h.python_deep_expression(kind="binop")) < 1_000_000
    assert len(h.html_deep_nesting(every_level=True)) < 1_000_000


# --- PDF -------------------------------------------------------------------------------------------------------------


def test_plain_pdf_is_a_readable_control():
    from pypdf import PdfReader  # the control is safe to parse in-process

    data = h.pdf_plain("Hello (hostile) world\nsecond line")
    pdf_objects(data)
    reader = PdfReader(io.BytesIO(data))
    assert len(reader.pages) == 1
    text = reader.pages[0].extract_text()
    assert "Hello (hostile) world" in text and "second line" in text


def test_outline_cycle_points_next_at_itself():
    objects = pdf_objects(h.pdf_outline_cycle())
    assert b"/Outlines 6 0 R" in objects[1]
    assert b"/First 7 0 R" in objects[6]
    assert re.search(rb"/Next (\d+) 0 R", objects[7]).group(1) == b"7"


@pytest.mark.parametrize("depth", [1, 2, 2000])
def test_outline_nests_depth_levels_by_first(depth):
    objects = pdf_objects(h.pdf_outline_deep(depth))
    number, levels = 6, 0
    while match := re.search(rb"/First (\d+) 0 R", objects[number]):
        child = int(match.group(1))
        assert b"/Parent %d 0 R" % number in objects[child]
        number, levels = child, levels + 1
    assert levels == depth


def test_flate_bomb_chains_two_filters_and_inflates_past_the_cap():
    dictionary, data = stream_parts(pdf_objects(h.pdf_flate_bomb())[5])
    assert b"/Filter [/FlateDecode /FlateDecode]" in dictionary
    inner = zlib.decompressobj().decompress(data, 2 * h.MIB)  # the outer layer: ~520 KB
    assert 400_000 < len(inner) < 2 * h.MIB
    assert inflated_size(inner) == CAP  # and on: 500 MiB (exact count below, on a smaller bomb)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_flate_bomb_inflates_to_exactly_the_asked_size(layers):
    size = 3 * h.MIB + 5
    dictionary, data = stream_parts(pdf_objects(h.pdf_flate_bomb(size, layers))[5])
    assert dictionary.count(b"/FlateDecode") == layers
    for _ in range(layers - 1):
        data = zlib.decompress(data)
    assert zlib.decompress(data) == b" " * size  # 3 MiB: small enough to hold, and zlib checks the Adler-32


def test_flate_bomb_ratios():
    """One layer stays near zlib's ~1030:1; two layers reach ~280,000:1."""
    assert len(h.pdf_flate_bomb(layers=1)) * 900 < 500 * h.MIB
    assert len(h.pdf_flate_bomb()) * 200_000 < 500 * h.MIB


@pytest.mark.parametrize(
    ("kind", "kids"), [("not_dict", b"[6 0 R]"), ("cycle", b"[2 0 R]"), ("kids_dict", b"<< /Foo 3 0 R >>")]
)
def test_page_tree_malformed(kind, kids):
    objects = pdf_objects(h.pdf_page_tree_malformed(kind))
    assert b"/Kids " + kids in objects[2]
    assert objects[6] == b"42"  # what `not_dict` points at: an integer, not a page dictionary


def test_unknown_filter():
    dictionary, data = stream_parts(pdf_objects(h.pdf_unknown_filter())[5])
    assert b"/Filter /NoSuchDecode" in dictionary
    assert data.startswith(b"BT ")


def test_bad_lzw_is_garbage_under_lzw():
    dictionary, data = stream_parts(pdf_objects(h.pdf_bad_lzw())[5])
    assert b"/Filter /LZWDecode" in dictionary
    assert len(data) == 4096 and len(set(data)) > 200


@pytest.mark.parametrize("columns", [-5, 0])
def test_predictor_columns(columns):
    dictionary, data = stream_parts(pdf_objects(h.pdf_negative_predictor_columns(columns))[5])
    assert b"/DecodeParms << /Predictor 12 /Columns %d >>" % columns in dictionary
    assert zlib.decompress(data).startswith(b"BT ")


def test_corrupt_flate_inflates_then_fails_its_checksum():
    dictionary, data = stream_parts(pdf_objects(h.pdf_corrupt_flate(h.MIB))[5])
    assert b"/Filter /FlateDecode" in dictionary
    decompressor = zlib.decompressobj()
    assert decompressor.decompress(data[:-4]) == b" " * h.MIB  # all the content, then the damaged Adler-32
    with pytest.raises(zlib.error, match="incorrect data check"):
        decompressor.decompress(data[-4:])


@pytest.mark.parametrize("n", [1, 3, 10_000])
def test_many_pages(n):
    objects = pdf_objects(h.pdf_many_pages(n))
    assert len(objects) == n + 4
    assert b"/Count %d " % n in objects[2]
    assert objects[2].count(b" 0 R") == n + 1  # the kids and the font
    assert sum(body.startswith(b"<< /Type /Page /Parent") for body in objects.values()) == n


# --- zip -------------------------------------------------------------------------------------------------------------


def test_zip_plain_is_a_readable_control():
    files = {"a/x.md": b"# X\n", "a/b/y.txt": b"why\n"}
    archive = zipfile.ZipFile(io.BytesIO(h.zip_plain(files)))
    assert {name: archive.read(name) for name in archive.namelist()} == files
    assert archive.testzip() is None


def test_deflate_bomb_declares_16_bytes_and_inflates_past_the_cap():
    data = h.zip_bomb_deflate()
    info, local = only_member(data)
    assert info.file_size == local["file_size"] == 16
    assert info.compress_type == local["method"] == zipfile.ZIP_DEFLATED
    assert info.CRC == local["crc"] == zlib.crc32(bytes(16))
    assert 1_000_000 < info.compress_size == len(local["data"])
    assert inflated_size(local["data"], wbits=-15) == CAP  # and on, to 1 GiB (exact count below)


def test_deflate_bomb_inflates_to_exactly_the_asked_size():
    _, local = only_member(h.zip_bomb_deflate(5 * h.MIB + 3))
    assert local["file_size"] == 16
    assert inflated_size(local["data"], wbits=-15) == 5 * h.MIB + 3


def test_bzip2_bomb_declares_16_bytes_and_inflates_past_the_cap():
    data = h.zip_bomb_bzip2()
    assert len(data) < 1024
    info, local = only_member(data)
    assert info.file_size == local["file_size"] == 16
    assert info.compress_type == local["method"] == zipfile.ZIP_BZIP2
    assert local["data"].startswith(b"BZh9")
    assert bz2_inflated_size(local["data"]) == CAP


def test_bzip2_bomb_splices_blocks_into_a_valid_stream():
    """100 MiB is two spliced full blocks and a tail block: the same path as the default's 23 and a tail."""
    _, local = only_member(h.zip_bomb_bzip2(100 * h.MIB))
    decompressor, total, pending = bz2.BZ2Decompressor(), 0, local["data"]
    while not decompressor.eof:
        piece, pending = decompressor.decompress(pending, 4 * h.MIB), b""
        assert piece.count(0) == len(piece)
        total += len(piece)
    assert total == 100 * h.MIB and decompressor.unused_data == b""


def test_many_members():
    archive = zipfile.ZipFile(io.BytesIO(h.zip_many_members()))
    infos = archive.infolist()
    assert len(infos) == 50_000
    assert all(info.file_size == 1 for info in infos)


def test_honest_large_declares_what_it_holds():
    infos = zipfile.ZipFile(io.BytesIO(h.zip_honest_large())).infolist()
    assert [info.file_size for info in infos] == [64 * h.MIB] * 4
    small = h.zip_honest_large(3 * h.MIB + 1, 2)
    archive = zipfile.ZipFile(io.BytesIO(small))
    for info in archive.infolist():
        content = archive.read(info)  # 3 MiB: zipfile checks the size and the CRC
        assert content == bytes(3 * h.MIB + 1)


def test_bad_crc():
    info, local = only_member(h.zip_bad_crc())
    assert info.compress_type == zipfile.ZIP_STORED
    assert info.CRC == local["crc"] != zlib.crc32(local["data"])


def test_encrypted_flag_on_a_plain_member():
    info, local = only_member(h.zip_encrypted_member())
    assert info.flag_bits & 0x1 and local["flags"] & 0x1
    assert local["data"].startswith(b"# Note")


def test_unknown_method():
    info, local = only_member(h.zip_unknown_method())
    assert info.compress_type == local["method"] == 99


def test_corrupt_deflate():
    info, local = only_member(h.zip_corrupt_deflate())
    assert info.compress_type == zipfile.ZIP_DEFLATED
    with pytest.raises(zlib.error, match="invalid block type"):
        zlib.decompressobj(-15).decompress(local["data"])


def test_skill_two_roots():
    archive = zipfile.ZipFile(io.BytesIO(h.zip_skill_two_roots()))
    names = archive.namelist()
    roots = {name.split("/")[0] for name in names}
    assert roots == {"alpha", "beta"}
    assert all(sum(name.startswith(root + "/") for name in names) >= 2 for root in roots)
    assert [name for name in names if name.endswith("SKILL.md")] == ["alpha/SKILL.md"]
    assert archive.read("alpha/SKILL.md").startswith(b"---\nname: alpha\n")


# --- text ------------------------------------------------------------------------------------------------------------

FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.DOTALL)  # as retrieval/ingest.py and markdown.py find it


def nesting(value) -> int:
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    return depth


@pytest.mark.parametrize("style", ["flow", "block"])
def test_yaml_deep_front_matter(style):
    text = h.yaml_deep_front_matter(2000, style)
    front = FRONT_MATTER.match(text).group(1)
    assert front.count("[" if style == "flow" else "- ") == 2000
    shallow = yaml.safe_load(FRONT_MATTER.match(h.yaml_deep_front_matter(50, style)).group(1))
    assert nesting(shallow["value"]) == 50 and shallow["title"] == "deep"


def test_billion_laughs_is_9_levels_of_9_aliases():
    text = h.yaml_billion_laughs()
    assert len(text) < 400
    front = FRONT_MATTER.match(text).group(1)
    assert front.count("&") == 8 and front.count("*") == 8 * 9
    # safe_load shares each aliased list (measured: 45 ms); only walking the result expands it, which this does not.
    meta = yaml.safe_load(front)
    assert meta["name"] == "laughs"
    level, leaves = meta["description"], 1
    while isinstance(level, list):
        assert len(level) == 9
        assert all(item is level[0] for item in level) or level == ["lol"] * 9  # one shared list 8 levels down
        level, leaves = level[0], leaves * 9
    assert level == "lol" and leaves == 9**9 == 387_420_489


@pytest.mark.parametrize(("kind", "marker"), [("unary", "-"), ("parens", "("), ("binop", "a+"), ("attribute", ".a")])
def test_python_deep_expression(kind, marker):
    import ast

    source = h.python_deep_expression(kind=kind)
    line = source.splitlines()[-1]
    assert line.startswith("x = ") and line[4:].count(marker) == 200_000
    tree = ast.parse(h.python_deep_expression(50, kind))  # 50 levels parse; the default's 200,000 do not
    depth, node = 0, tree.body[-1].value
    while children := [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]:
        node, depth = children[0], depth + 1
    assert depth == (50 if kind != "parens" else 0)  # parentheses leave no node of their own


def test_markdown_redos_heading():
    line = h.markdown_redos_heading(10_000)
    assert len(line) == 10_000 and line.splitlines() == [line]
    assert line.startswith("# a ") and line.endswith(" a") and line[3:-1].strip() == ""
    match = re.match(h.MARKDOWN_HEADING, h.markdown_redos_heading(40))  # short: a heading, matched in microseconds
    assert match and match.group(1) == "#"


@pytest.mark.parametrize("every_level", [False, True])
def test_html_deep_nesting(every_level):
    from bs4 import BeautifulSoup

    text = h.html_deep_nesting(50_000, every_level)
    assert text.count("<div>") == text.count("</div>") == 50_000
    assert text.count("<p>") == (50_001 if every_level else 1)
    soup = BeautifulSoup(h.html_deep_nesting(50, every_level), "html.parser")  # shallow: parsed in-process
    deepest = soup.find_all("p")[-1]
    assert deepest.get_text() == "deep" and len(deepest.find_parents("div")) == 50
