"""Reading and parsing JSON / JSONC documents, with exact error positions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import json5
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unprivileged import give_to_nobody, nobody_workspace, python_as_nobody

from atlante_eval._util.jsondoc import (
    MAX_DOCUMENT_BYTES,
    DocumentParseError,
    DocumentReadError,
    escape_pointer,
    join_surrogates,
    locate_pointers,
    parse_document,
    pointer_from_loc,
    read_document,
)


def _parse_error(text: str, *, jsonc: bool) -> DocumentParseError:
    with pytest.raises(DocumentParseError) as caught:
        parse_document(text, jsonc=jsonc)
    return caught.value


# --- read_document ---------------------------------------------------------


def test_read_document_returns_utf8_text_without_bom(tmp_path: Path) -> None:
    """A UTF-8 file is returned as text, with a leading byte-order mark removed."""
    path = tmp_path / "doc.json"
    path.write_bytes(b'\xef\xbb\xbf{"name": "caf\xc3\xa9"}')
    assert read_document(path) == '{"name": "café"}'


def test_read_document_rejects_invalid_utf8_with_offset(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 fail with the offset of the first bad byte."""
    path = tmp_path / "doc.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(DocumentReadError, match=r"not valid UTF-8 \(byte offset 7\)"):
        read_document(path)


def test_read_document_rejects_files_over_the_limit(tmp_path: Path) -> None:
    """A file larger than the limit fails before it is read, naming both sizes."""
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(DocumentReadError, match=r"1048577 bytes, larger than the 1048576-byte"):
        read_document(path)


def test_read_document_honours_a_custom_limit(tmp_path: Path) -> None:
    """``max_bytes`` lowers the limit for one call."""
    path = tmp_path / "doc.json"
    path.write_text("{}   ", encoding="utf-8")
    with pytest.raises(DocumentReadError, match="larger than the 4-byte limit"):
        read_document(path, max_bytes=4)


def test_read_document_refuses_a_final_symlink_by_default(tmp_path: Path) -> None:
    """A symlink is refused unless ``follow_symlinks`` is set, then it is read through."""
    target = tmp_path / "real.json"
    target.write_text("{}", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(DocumentReadError, match="symbolic link"):
        read_document(link)
    assert read_document(link, follow_symlinks=True) == "{}"


def test_read_document_rejects_directories_and_missing_files(tmp_path: Path) -> None:
    """A directory is not a regular file, and a missing file reports the OS reason."""
    with pytest.raises(DocumentReadError, match="not a regular file"):
        read_document(tmp_path)
    with pytest.raises(DocumentReadError, match="No such file"):
        read_document(tmp_path / "missing.json")


@pytest.mark.timeout(10)
def test_read_document_does_not_block_on_a_fifo(tmp_path: Path) -> None:
    """A named pipe is rejected as not a regular file instead of waiting for a writer."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(DocumentReadError, match="not a regular file"):
        read_document(fifo)


def test_read_document_reports_permission_errors() -> None:
    """An unreadable file raises DocumentReadError, not PermissionError (run as ``nobody``)."""
    code = (
        "import sys\n"
        "from atlante_eval._util.jsondoc import DocumentReadError, read_document\n"
        "try:\n"
        "    read_document(sys.argv[1])\n"
        "except DocumentReadError as exc:\n"
        "    print('DocumentReadError:', exc)\n"
    )
    with nobody_workspace() as base:
        path = base / "secret.json"
        path.write_text("{}", encoding="utf-8")
        give_to_nobody(path)
        path.chmod(0)
        done = python_as_nobody(code, base, str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("DocumentReadError:")
    assert "Permission denied" in done.stdout


# --- parse_document: strict JSON --------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ('{\n  "a": 1\n  "b": 2\n}', "Expecting ',' delimiter", 3, 3),
        ('{"a": [1, 2', "Expecting ',' delimiter", 1, 12),
        ('{"a": 1} x', "Extra data", 1, 10),
        ("{a: 1}", "Expecting property name enclosed in double quotes", 1, 2),
        ("{'a': 1}", "Expecting property name enclosed in double quotes", 1, 2),
        ('{"a": 0x10}', "Expecting ',' delimiter", 1, 8),
        ('{"a": "\\q"}', "Invalid \\escape", 1, 8),
        ("\n\n   }", "Expecting value", 3, 4),
    ],
)
def test_strict_json_errors_carry_line_and_column(
    text: str, message: str, line: int, column: int
) -> None:
    """Malformed strict JSON fails with the parser's message and a 1-based position."""
    problem = _parse_error(text, jsonc=False)
    assert (problem.message, problem.line, problem.column) == (message, line, column)


def test_strict_json_explains_a_comment() -> None:
    """A comment in a .json document is named as such, at the comment's position."""
    problem = _parse_error('{\n  "a": 1, // why\n  "b": 2\n}', jsonc=False)
    assert problem.message.startswith("comments are not allowed in strict JSON")
    assert (problem.line, problem.column) == (2, 11)


def test_strict_json_explains_a_trailing_comma() -> None:
    """A trailing comma in a .json document is named as such, at the closing bracket."""
    problem = _parse_error('{\n  "a": [1, 2,\n  ]\n}', jsonc=False)
    assert problem.message.startswith("trailing commas are not allowed in strict JSON")
    assert (problem.line, problem.column) == (3, 3)


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('{"a": 1,}', 1, 9),
        ("[1, 2,]", 1, 7),
        ('{"a": [1,],}', 1, 10),
        ('{\n  "a": 1,\n}', 3, 1),
        ("[1,\n  ]", 2, 3),
    ],
)
def test_a_trailing_comma_is_reported_at_its_bracket_on_every_python(
    text: str, line: int, column: int
) -> None:
    """Whether the parser reports the comma (3.13) or the bracket (3.11), the bracket is named."""
    problem = _parse_error(text, jsonc=False)
    assert problem.message.startswith("trailing commas are not allowed in strict JSON")
    assert (problem.line, problem.column) == (line, column)


@pytest.mark.parametrize("at_comma", [False, True])
def test_the_hint_reads_both_parser_positions(at_comma: bool) -> None:
    """The hint gives the same answer from the 3.11 position and the 3.13 position."""
    from atlante_eval._util.jsondoc import _strict_json_hint

    text = '{"a": 1 ,\n }'
    offset = text.index(",") if at_comma else text.index("}")
    message, where = _strict_json_hint(text, offset, "parser message")
    assert message.startswith("trailing commas are not allowed")
    assert where == text.index("}")
    assert _strict_json_hint('{"a" 1}', 5, "parser message") == ("parser message", 5)


@pytest.mark.parametrize("jsonc", [False, True])
@pytest.mark.parametrize(
    ("text", "name", "column"),
    [('{"a": NaN}', "NaN", 7), ('{"s": "NaN", "b": -Infinity}', "-Infinity", 19)],
)
def test_non_json_constants_are_rejected_at_their_position(
    jsonc: bool, text: str, name: str, column: int
) -> None:
    """NaN and Infinity are not JSON; the error points at the bare constant, not a string."""
    problem = _parse_error(text, jsonc=jsonc)
    assert (problem.message, problem.line, problem.column) == (
        f"{name} is not valid JSON",
        1,
        column,
    )


@pytest.mark.parametrize("jsonc", [False, True])
def test_duplicate_keys_are_rejected_at_the_repeated_key(jsonc: bool) -> None:
    """A key repeated in one object fails at its second occurrence; other objects may reuse it."""
    text = '{\n  "a": {"b": 1},\n  "c": {"b": 1, "d": 2, "b": 3}\n}'
    problem = _parse_error(text, jsonc=jsonc)
    assert (problem.message, problem.line, problem.column) == ('duplicate key "b"', 3, 25)


@pytest.mark.parametrize(
    ("text", "jsonc"),
    [("", False), ("", True), ("   \n\t ", False), ("   \n\t ", True)],
)
def test_empty_documents_are_rejected(text: str, jsonc: bool) -> None:
    """A document with no value is an error at 1:1."""
    problem = _parse_error(text, jsonc=jsonc)
    assert (problem.message, problem.line, problem.column) == ("the document is empty", 1, 1)


def test_a_jsonc_document_of_comments_only_has_no_value() -> None:
    """A JSONC document holding only comments ends before any value."""
    problem = _parse_error("// only\n", jsonc=True)
    assert (problem.message, problem.line, problem.column) == ("Unexpected end of input", 2, 1)


@pytest.mark.parametrize("jsonc", [False, True])
def test_deep_nesting_is_an_error_not_a_crash(jsonc: bool) -> None:
    """A pathologically nested document fails with a parse error instead of RecursionError."""
    problem = _parse_error("[" * 100_000 + "]" * 100_000, jsonc=jsonc)
    assert problem.message == "the document is nested too deeply"


# --- parse_document: JSONC ---------------------------------------------------


def test_jsonc_allows_comments_and_trailing_commas() -> None:
    """JSONC accepts line and block comments and trailing commas in objects and arrays."""
    text = """// leading
    {
      /* block
         comment */
      "a": [1, 2, /* inline */ 3,], // trailing
      "b": {"c": true,},
    }
    """
    assert parse_document(text, jsonc=True) == {"a": [1, 2, 3], "b": {"c": True}}


def test_jsonc_keeps_comment_markers_inside_strings() -> None:
    """``//``, ``/*`` and commas inside strings (even after escaped quotes) are data."""
    text = r'{"url": "https://x//y", "c": "/* not */", "q": "a\"//b", "t": ",]"}'
    assert parse_document(text, jsonc=True) == {
        "url": "https://x//y",
        "c": "/* not */",
        "q": 'a"//b',
        "t": ",]",
    }


def test_jsonc_comment_cannot_hide_a_closing_bracket() -> None:
    """A bracket inside a comment after a comma does not make that comma trailing."""
    assert parse_document("[1, // ]\n 2]", jsonc=True) == [1, 2]
    assert parse_document("[1, /* ] */ 2]", jsonc=True) == [1, 2]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{'a': 1}", {"a": 1}),
        ("{a: 1}", {"a": 1}),
        ('{"a": 0x10}', {"a": 16}),
    ],
)
def test_jsonc_is_read_with_json5(text: str, value: object) -> None:
    """``.jsonc`` documents are parsed by json5, so JSON5 syntax is accepted too."""
    assert parse_document(text, jsonc=True) == value


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("[,]", 'Unexpected ","', 1, 2),
        ("[1,,]", 'Unexpected ","', 1, 4),
        ("{,}", 'Unexpected "}"', 1, 3),
        ('{\n  /* a\n     b */ "a": tru\n}', 'Unexpected "end of line"', 3, 19),
        ('{"a": 1 /* open', "Unexpected end of input", 1, 16),
        ('{"a": 1,\n "a": 2}', 'duplicate key "a"', 2, 2),
        ('{"a": NaN}', "NaN is not valid JSON", 1, 7),
    ],
)
def test_jsonc_errors_keep_their_position(text: str, message: str, line: int, column: int) -> None:
    """JSONC syntax errors, duplicate keys and NaN report the exact line and column."""
    problem = _parse_error(text, jsonc=True)
    assert (problem.message, problem.line, problem.column) == (message, line, column)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, indent=st.sampled_from([None, 2]))
def test_any_json_value_round_trips_in_both_modes(value: object, indent: int | None) -> None:
    """Every JSON document parses to the same value as strict JSON and as JSONC."""
    text = json.dumps(value, indent=indent)
    assert parse_document(text, jsonc=False) == value
    assert parse_document(text, jsonc=True) == value


@settings(max_examples=200, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_plain_json_in_a_jsonc_document_is_read_as_json5_reads_it(
    value: object, ascii_only: bool
) -> None:
    """The json module's fast path gives json5's value (surrogate pairs joined alike)."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    expected = join_surrogates(json5.loads(text, allow_duplicate_keys=False), text=text)
    assert parse_document(text, jsonc=True) == expected == value


def test_plain_json_skips_json5_and_anything_else_goes_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only what the json module refuses is parsed by json5 (so its errors are reported)."""
    calls: list[str] = []
    real = json5.loads

    def spy(text: str, **kwargs: object) -> object:
        calls.append(text)
        return real(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(json5, "loads", spy)
    assert parse_document('{"eval": {"host": "opencode"}}', jsonc=True) == {
        "eval": {"host": "opencode"}
    }
    assert calls == []
    assert parse_document('{"a": 1, // note\n}', jsonc=True) == {"a": 1}
    assert len(calls) == 1
    error = _parse_error('{"a": 1, "a": 2}', jsonc=True)
    assert (error.message, len(calls)) == ('duplicate key "a"', 2)


# --- pointers and positions ---------------------------------------------------


def test_locate_pointers_maps_members_to_keys_and_items_to_values() -> None:
    """Object members point at their key, array items at their value, the root at 1:1."""
    text = '{\n  "task": {"fixture": "app"},\n  "checks": [\n    {"type": "x"}\n  ]\n}'
    positions = locate_pointers(text)
    assert positions[""] == (1, 1)
    assert positions["/task"] == (2, 3)
    assert positions["/task/fixture"] == (2, 12)
    assert positions["/checks/0"] == (4, 5)
    assert positions["/checks/0/type"] == (4, 6)


def test_locate_pointers_skips_comments_and_escapes_keys() -> None:
    """Comments are skipped and ``/`` and ``~`` in keys are escaped per RFC 6901."""
    text = '{\n  // note\n  "a/b": 1, /* x */ "c~d": [true, null]\n}'
    positions = locate_pointers(text)
    assert positions["/a~1b"] == (3, 3)
    assert positions["/c~0d"] == (3, 21)
    assert positions["/c~0d/1"] == (3, 35)


def test_locate_pointers_tolerates_malformed_text() -> None:
    """A malformed text yields the positions found before the problem, without raising."""
    positions = locate_pointers('{"a": [1, {"b": ')
    assert positions["/a/0"] == (1, 8)
    assert "/a/1/b" in positions


def test_pointer_helpers_escape_tokens() -> None:
    """Pointers join escaped tokens, with indexes as decimal strings."""
    assert escape_pointer("a/b~c") == "a~1b~0c"
    assert pointer_from_loc(("checks", 0, "a/b")) == "/checks/0/a~1b"
    assert pointer_from_loc(()) == ""


@pytest.mark.parametrize("jsonc", [False, True])
def test_lone_surrogate_escapes_become_replacement_characters(jsonc: bool) -> None:
    """A lone ``\\ud800`` escape is read as U+FFFD and pairs are joined, so values encode."""
    value = parse_document('{"a": "\\ud800x", "b": "\\ud83d\\ude00"}', jsonc=jsonc)
    assert value == {"a": "\ufffdx", "b": "\U0001f600"}
    json.dumps(value, ensure_ascii=False).encode("utf-8")
