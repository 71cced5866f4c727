"""Cutting a landing file into its header, its rows and its malformed lines, with true lines.

Line numbers are physical: a line ends at LF, CRLF or a lone CR, line 1 is the first line of
the file, and a row's line is the one it starts on. The file is cut into lines with numpy. The
lines with no quote and no control character (nearly all of them) go to pyarrow's CSV parser
as one buffer with quoting off, so its rows are those lines, in order. The few other lines are
parsed here, with the quoting of the original pandas reader: a quote opens a field only as its
first character, `""` inside is one quote, text after the closing quote belongs to the field.
A row may run over several lines only inside a quoted field that closes (a comma or the end of
a line right after the closing quote), only if it comes out with as many fields as the header,
and only if none of the lines it takes is a row by itself; otherwise its first line alone is a
malformed row and reading goes on at the next line. Lines that are empty or hold only spaces
and tabs are skipped (they hold no data) but counted.
"""

from __future__ import annotations

import codecs
import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_LF, _CR, _TAB, _QUOTE, _COMMA = 10, 13, 9, 34, 44
_BLOCK_SIZE = 1 << 20  # pyarrow's default
_UNCLOSED = "malformed row: a quoted field is not closed"
_QUOTED = re.compile(rb'"((?:[^"]++|"")*+)"([^,\r\n]*+)')
_UNQUOTED = re.compile(rb"[^,\r\n]*+")


def _has_line_break(text: bytes) -> bool:
    return b"\n" in text or b"\r" in text


class UnreadableCsv(ValueError):
    """The file cannot be read as rows: it has no header, or a header that no row fits."""


@dataclass(frozen=True)
class MalformedLine:
    """A line that could not be cut into the header's fields: its text and why."""

    line: int
    text: str
    reason: str


@dataclass(frozen=True)
class LandingRows:
    """The rows of a landing file, as the text of their fields.

    `fields` has one string column per header field (`f0`, `f1`, ...), raw (not stripped),
    the rows parsed by pyarrow first and then the others (sorting would copy every string);
    `lines` is the physical line each row starts on, `in_file_order` the row positions sorted
    by line, `suspects` the positions of the rows that may hold a control character or a line
    break (no other row can).
    """

    fields: pa.Table
    lines: np.ndarray
    in_file_order: np.ndarray
    suspects: np.ndarray
    malformed: list[MalformedLine]


def _fields(count: int) -> str:
    return f"{count} field" if count == 1 else f"{count} fields"


def _parse_record(data: bytes, pos: int, endpos: int) -> tuple[list[bytes], int] | None:
    """Parse one row starting at `pos`; None when a quoted field does not close before `endpos`.

    A quoted field that holds a line break must also end at its closing quote (a comma or the
    end of the line right after it), or it is taken as not closed: what follows a stray quote
    is the next quoted field's opening quote, then its text. Returns the fields and the position
    where the row ended (a line break or `endpos`).
    """
    fields: list[bytes] = []
    while True:
        if pos < endpos and data[pos] == _QUOTE:
            match = _QUOTED.match(data, pos, endpos)
            if match is None or (match[2] and _has_line_break(match[1])):
                return None
            fields.append(match[1].replace(b'""', b'"') + match[2])
        else:
            match = _UNQUOTED.match(data, pos, endpos)
            assert match is not None  # the pattern matches the empty string too
            fields.append(match[0])
        pos = match.end()
        if pos < endpos and data[pos] == _COMMA:
            pos += 1
        else:
            return fields, pos


class LandingCsv:
    """One landing file cut into physical lines, its header read.

    Raises:
        UnreadableCsv: the file has no header line, or the header's quote never closes.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._bytes = np.frombuffer(data, dtype=np.uint8)
        first = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        self._control_bytes = self._cut_lines(first)
        header_index = next((i for i in range(len(self._starts)) if not self._blank(i)), None)
        if header_index is None:
            raise UnreadableCsv("the file has no header line")
        parsed = _parse_record(data, int(self._starts[header_index]), len(data))
        if parsed is None:
            raise UnreadableCsv(f"the header (line {header_index + 1}) has an unclosed quote")
        fields, end = parsed
        self.header: list[str] = [field.decode("utf-8") for field in fields]
        self._body = self._line_of(end) + 1

    def _cut_lines(self, first: int) -> np.ndarray:
        """Find where each physical line starts and ends; return other control bytes' positions."""
        values = self._bytes
        low = np.flatnonzero(values < 32)
        kinds = values[low]
        breaks = low[kinds == _LF]
        returns = low[kinds == _CR]
        if len(returns):
            after = np.minimum(returns + 1, len(values) - 1)
            lone = returns[(returns + 1 >= len(values)) | (values[after] != _LF)]
            breaks = np.union1d(breaks, lone)
        starts = np.concatenate(([first], breaks + 1)).astype(np.int64)
        ends = np.concatenate((breaks, [len(values)])).astype(np.int64)
        if len(returns):
            crlf = (values[ends[:-1]] == _LF) & (ends[:-1] > first)
            crlf &= values[np.maximum(ends[:-1] - 1, 0)] == _CR
            ends[:-1][crlf] -= 1
        if starts[-1] >= len(values) and len(starts) > 1:  # the file ends with a line break
            starts, ends = starts[:-1], ends[:-1]
        self._starts, self._ends = starts, ends
        return low[(kinds != _TAB) & (kinds != _LF) & (kinds != _CR)]

    def _line_of(self, positions: np.ndarray | int) -> np.ndarray:
        return np.searchsorted(self._starts, positions, side="right") - 1

    def _blank(self, index: int) -> bool:
        text = self._data[self._starts[index] : self._ends[index]]
        return not text.strip(b" \t")

    def _text(self, index: int) -> str:
        return self._data[self._starts[index] : self._ends[index]].decode("utf-8")

    def rows(self) -> LandingRows:
        """Cut the lines after the header into rows of the header's width.

        Raises:
            UnreadableCsv: no line has the header's number of fields, and some have another:
                the header, not every row, is what is wrong.
        """
        width, body = len(self.header), self._body
        control_lines = set(self._line_of(self._control_bytes).tolist())
        quote_lines = set(self._line_of(self._quote_positions()).tolist())
        taken = np.zeros(len(self._starts), dtype=bool)  # lines of a row or a malformed line
        records: list[tuple[int, list[bytes], bool]] = []  # line, fields, may hold controls
        unclosed: list[int] = []
        wrong_width: list[tuple[int, int]] = []  # line, fields
        for index in sorted(i for i in control_lines | quote_lines if i >= body):
            if taken[index]:
                continue
            fields, last = self._careful_row(index, width)
            taken[index : last + 1] = True
            if fields is None:
                unclosed.append(index)
            elif len(fields) != width:
                wrong_width.append((index, len(fields)))
            else:
                records.append((index, fields, last > index or index in control_lines))
        fast = np.flatnonzero(~taken & (self._ends > self._starts))
        table, fast, plain_wrong = self._read_fast(fast[fast >= body], width)
        wrong_width = sorted(wrong_width + plain_wrong)
        if wrong_width and not records and not table.num_rows:
            index, found = wrong_width[0]
            raise UnreadableCsv(
                f"no row has the header's {width} fields (line {index + 1} has {found})"
            )
        return self._combine(table, fast, records, self._malformed(unclosed, wrong_width, width))

    def _malformed(
        self, unclosed: list[int], wrong_width: list[tuple[int, int]], width: int
    ) -> list[MalformedLine]:
        """Return the malformed lines, by line, each with its text and reason."""
        reasons = {
            found: f"malformed row: {_fields(found)} where the header has {width}"
            for _, found in wrong_width
        }
        malformed = [
            MalformedLine(index + 1, self._text(index), reasons[found])
            for index, found in wrong_width
        ]
        malformed += [MalformedLine(index + 1, self._text(index), _UNCLOSED) for index in unclosed]
        return sorted(malformed, key=lambda m: m.line)

    def _quote_positions(self) -> np.ndarray:
        if self._data.find(b'"') == -1:
            return np.empty(0, dtype=np.int64)
        return np.flatnonzero(self._bytes == _QUOTE)

    def _careful_row(self, index: int, width: int) -> tuple[list[bytes] | None, int]:
        """Parse the row on line `index`; return its fields (None: malformed) and its last line.

        A row may run over the next lines only inside a quoted field that closes, only if it
        has `width` fields and only if none of the lines it takes is a row of its own (`width`
        fields by itself): a stray quote must not swallow the rows after it. Otherwise its
        first line alone is malformed.
        """
        alone = self._line_fields(index)
        if alone is not None:
            return alone, index
        if self._is_row(index + 1, width):  # the usual stray quote: decided without a scan
            return None, index
        parsed = _parse_record(self._data, int(self._starts[index]), len(self._data))
        if parsed is None or len(parsed[0]) != width:
            return None, index
        last = int(self._line_of(parsed[1]))
        if any(self._is_row(later, width) for later in range(index + 2, last + 1)):
            return None, index
        return parsed[0], last

    def _is_row(self, index: int, width: int) -> bool:
        if index >= len(self._starts):
            return False
        fields = self._line_fields(index)
        return fields is not None and len(fields) == width

    def _line_fields(self, index: int) -> list[bytes] | None:
        """Parse line `index` by itself; None when a quoted field does not close on it."""
        start, end = int(self._starts[index]), int(self._ends[index])
        if self._data.find(b'"', start, end) == -1:
            return self._data[start:end].split(b",")
        parsed = _parse_record(self._data, start, end)
        return None if parsed is None else parsed[0]

    def _read_fast(
        self, fast: np.ndarray, width: int
    ) -> tuple[pa.Table, np.ndarray, list[tuple[int, int]]]:
        """Parse the plain lines with pyarrow; return its rows, their lines, the wrong widths.

        A line pyarrow skips has the wrong number of fields, or only spaces and tabs (blank).
        It reads with one thread: then it numbers the rows it skips (with threads it does not),
        and on a busy machine it is no slower.
        """
        names = [f"f{i}" for i in range(width)]
        if not len(fast):
            return _empty_table(names), fast, []
        skipped: list[tuple[int | None, int]] = []

        def skip(row: pacsv.InvalidRow) -> str:
            skipped.append((row.number, row.actual_columns))
            return "skip"

        longest = int((self._ends[fast] - self._starts[fast]).max()) + 2  # with its line break
        table = pacsv.read_csv(
            self._plain_buffer(fast),
            read_options=pacsv.ReadOptions(
                column_names=names,
                use_threads=False,
                block_size=max(_BLOCK_SIZE, 2 * longest),  # a row must fit in a block
            ),
            parse_options=pacsv.ParseOptions(
                quote_char=False, double_quote=False, invalid_row_handler=skip
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                check_utf8=False,
            ),
        )
        wrong_width: list[tuple[int, int]] = []
        if skipped:
            numbers = [number for number, _ in skipped]
            if None in numbers:
                raise AssertionError("pyarrow did not number the rows it skipped")
            wrong = fast[np.asarray(numbers, dtype=np.int64) - 1]  # pyarrow counts from 1
            wrong_width = [
                (index, found)
                for index, (_, found) in zip(wrong.tolist(), skipped, strict=True)
                if not self._blank(index)
            ]
            fast = np.setdiff1d(fast, wrong, assume_unique=True)
        if table.num_rows != len(fast):
            raise AssertionError(f"pyarrow read {table.num_rows} rows from {len(fast)} plain lines")
        return table, fast, wrong_width

    def _plain_buffer(self, fast: np.ndarray) -> pa.Buffer | _Pieces:
        """Return the lines `fast` (sorted), each with its line break, for pyarrow to read.

        One run of lines is a slice of the file; several are read piece by piece, not copied.
        """
        nexts = np.append(self._starts[1:], len(self._data))
        run_breaks = np.flatnonzero(np.diff(fast) != 1)
        firsts = np.concatenate(([fast[0]], fast[run_breaks + 1]))
        lasts = np.concatenate((fast[run_breaks], [fast[-1]]))
        if len(firsts) == 1:
            return pa.py_buffer(memoryview(self._data)[self._starts[firsts[0]] : nexts[lasts[0]]])
        return _Pieces(self._data, self._starts[firsts].tolist(), nexts[lasts].tolist())

    def _combine(
        self,
        table: pa.Table,
        fast: np.ndarray,
        records: list[tuple[int, list[bytes], bool]],
        malformed: list[MalformedLine],
    ) -> LandingRows:
        """Put pyarrow's rows and then the carefully parsed ones in one table."""
        if not records:
            everyone = np.arange(len(fast))
            return LandingRows(table, fast + 1, everyone, np.empty(0, np.int64), malformed)
        columns = zip(*(fields for _, fields, _ in records), strict=True)
        careful = pa.table(
            {
                name: pa.array([value.decode("utf-8") for value in column], type=pa.string())
                for name, column in zip(table.column_names, columns, strict=True)
            }
        )
        careful_lines = np.array([index for index, _, _ in records], dtype=np.int64)
        # Both runs of lines are sorted: merge them into file order without sorting.
        rank_of_careful = np.searchsorted(fast, careful_lines) + np.arange(len(records))
        in_file = np.ones(len(fast) + len(records), dtype=bool)
        in_file[rank_of_careful] = False
        order = np.empty(len(in_file), dtype=np.int64)
        order[in_file] = np.arange(len(fast))
        order[rank_of_careful] = len(fast) + np.arange(len(records))
        suspects = len(fast) + np.flatnonzero([controls for _, _, controls in records])
        return LandingRows(
            pa.concat_tables([table, careful]),
            np.concatenate((fast, careful_lines)) + 1,
            order,
            suspects,
            malformed,
        )


class _Pieces(io.RawIOBase):
    """A readable file made of pieces of a bytes object, read in order, never joined."""

    def __init__(self, data: bytes, starts: list[int], stops: list[int]) -> None:
        super().__init__()
        self._view, self._starts, self._stops = memoryview(data), starts, stops
        self._piece, self._at = 0, starts[0]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        target, filled = memoryview(buffer).cast("B"), 0
        while filled < len(target) and self._piece < len(self._starts):
            stop = self._stops[self._piece]
            size = min(stop - self._at, len(target) - filled)
            target[filled : filled + size] = self._view[self._at : self._at + size]
            filled, self._at = filled + size, self._at + size
            if self._at == stop:
                self._piece += 1
                if self._piece < len(self._starts):
                    self._at = self._starts[self._piece]
        return filled


def _empty_table(names: list[str]) -> pa.Table:
    return pa.table({name: pa.array([], type=pa.string()) for name in names})
