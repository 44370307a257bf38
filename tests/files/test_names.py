"""File names made safe (chatforge/files/names.py): the name a client or a
tool gives is only a label, so it loses any path, control characters,
line breaks and bidi overrides, and is bounded in length with its
extension kept. (Through the upload API: test_upload_api.py.)"""

from __future__ import annotations

import pytest

from chatforge.files.names import MAX_NAME_CHARS, ascii_fallback, extension_of, safe_name


@pytest.mark.parametrize(("raw", "expected"), [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),
    ("../", "file"),
    ("/absolute/path/notes.txt", "notes.txt"),
    ("C:\\Users\\me\\Desktop\\plan.docx", "plan.docx"),
    ("..\\..\\windows\\win.ini", "win.ini"),
    ("a\x00b.txt", "ab.txt"),
    ("name\r\nSet-Cookie: x=1.txt", "nameSet-Cookie: x=1.txt"),
    ("tab\there.txt", "tabhere.txt"),
    ("bell\x07\x1b[31mred.txt", "bell[31mred.txt"),
    ("del\x7fete.txt", "delete.txt"),
    ("c1\x85\x9bcontrols.txt", "c1controls.txt"),
])
def test_paths_controls_and_line_breaks_go(raw, expected):
    assert safe_name(raw) == expected


@pytest.mark.parametrize("char", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                  "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f"])
def test_bidi_overrides_isolates_and_marks_go(char):
    # "invoice<RLO>fdp.exe" shows as "invoiceexe.pdf"; without the override it reads as it is.
    assert safe_name(f"invoice{char}fdp.exe") == "invoicefdp.exe"


def test_whitespace_is_trimmed_and_runs_become_one_space():
    assert safe_name("   quarterly    report .pdf  ") == "quarterly report .pdf"
    assert safe_name("report.") == "report"
    assert safe_name(".env") == ".env"


@pytest.mark.parametrize("raw", ["", None, "   ", ".", "..", "...", "/", "\\", "\x00\x01", "\u202e", "dir/"])
def test_nothing_left_is_file(raw):
    assert safe_name(raw) == "file"


def test_long_names_are_bounded_keeping_the_extension():
    name = safe_name("x" * 300 + ".xlsx")
    assert len(name) == MAX_NAME_CHARS
    assert name.endswith(".xlsx") and name.startswith("x" * 100)


def test_a_long_name_without_an_extension_is_cut():
    assert safe_name("y" * 300) == "y" * MAX_NAME_CHARS
    # A "dot" far from the end is part of the name, not an extension to keep.
    cut = safe_name("a." + "z" * 300)
    assert len(cut) == MAX_NAME_CHARS and cut.startswith("a.zzz")


def test_unicode_names_are_kept():
    assert safe_name("résumé 2026 — 日本語.pdf") == "résumé 2026 — 日本語.pdf"
    # Emoji with zero-width joiners are formatting characters people use, not controls.
    assert safe_name("family \U0001F468\u200d\U0001F469.png") == "family \U0001F468\u200d\U0001F469.png"


def test_extension_of():
    assert extension_of("Report.PDF") == "pdf"
    assert extension_of("archive.tar.gz") == "gz"
    assert extension_of(".env") == ""
    assert extension_of("noext") == ""


def test_the_ascii_fallback_cannot_end_or_escape_a_quoted_header_value():
    assert ascii_fallback('a"b\\c;d%e.txt') == "a_b_c_d_e.txt"
    assert ascii_fallback("résumé.pdf") == "resume.pdf"
    assert ascii_fallback("日本語") == "file"
