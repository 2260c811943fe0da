import * as zlib from 'node:zlib';
import { type ColumnMetaData, type Compressors, parquetMetadata, parquetSchema, type SchemaTree, snappyUncompress } from 'hyparquet';
// The synchronous column decoder (hyparquet's own readers are async; the check runs synchronously in its worker).
import { parquetHeader, readColumn } from 'hyparquet/src/column.js';
import { DEFAULT_PARSERS } from 'hyparquet/src/convert.js';
import { getTreePath } from 'hyparquet/src/schema.js';
import { type ByteSource, maxExpansion, printableRuns, UnreadableError } from './formats.js';
import type { ContaminationScan, SourceRef } from './hidden-index.js';

/** Rows are scanned in blocks of about this many characters, as a text file is read in blocks. */
const blockChars = 16 * 2 ** 20;
const maxFooterBytes = 64 * 2 ** 20;
/** A row group's text columns are decoded together (rows are read whole); a larger one is named as not read. */
const maxRowGroupTextBytes = 256 * 2 ** 20;

/**
 * Page decompressors: snappy (pyarrow's and `datasets`' default) is hyparquet's; gzip and brotli are node:zlib's, zstd
 * too where Node has it (22.15+); LZ4 is not read. Each refuses a page claiming more bytes than its column chunk holds
 * (a malformed header would otherwise size the allocation).
 */
const zstdDecompressSync = (zlib as { zstdDecompressSync?: (input: Uint8Array) => Uint8Array }).zstdDecompressSync;
function compressorsUpTo(maxBytes: number): Compressors {
  const bounded =
    (decompress: (input: Uint8Array, outputLength: number) => Uint8Array) =>
    (input: Uint8Array, outputLength: number): Uint8Array => {
      if (outputLength > maxBytes) throw new Error(`a page claims ${outputLength} bytes, more than its column chunk's ${maxBytes}`);
      return decompress(input, outputLength);
    };
  return {
    SNAPPY: bounded((input, outputLength) => {
      const output = new Uint8Array(outputLength);
      snappyUncompress(input, output);
      return output;
    }),
    GZIP: bounded((input) => zlib.gunzipSync(input, { maxOutputLength: maxBytes })),
    BROTLI: bounded((input) => zlib.brotliDecompressSync(input, { maxOutputLength: maxBytes })),
    ...(zstdDecompressSync ? { ZSTD: bounded((input) => zstdDecompressSync(input)) } : {}),
  };
}

const textAnnotations = new Set(['UTF8', 'JSON', 'ENUM', 'STRING']);

/** A leaf column annotated as text: strings, JSON or enums. */
function isAnnotatedText(leaf: SchemaTree): boolean {
  const { converted_type: converted, logical_type: logical } = leaf.element;
  return textAnnotations.has(converted ?? '') || textAnnotations.has(logical?.type ?? '');
}

/**
 * A leaf column that can hold text: every byte array, annotated or not (a writer may leave strings as plain binary);
 * an unannotated one is read as its printable runs, so an image column gives little.
 */
function isTextColumn(leaf: SchemaTree): boolean {
  return leaf.element.type === 'BYTE_ARRAY';
}

/**
 * Declared counts are bounded by the file's size before hyparquet allocates from them: rows (a row group's, a page's
 * values) at most `maxRowsPerByte` per byte of the file (only a constant or empty column packs more), a page's
 * decoded size at most `maxExpansion` times its stored size, a dictionary's entries at most one per 4 bytes of its
 * page (each has a 4-byte length). Past any, the file is refused as not read.
 */
const maxRowsPerByte = 16;

function readBytes(file: ByteSource, position: number, length: number, what: string): Uint8Array {
  const bytes = file.read(position, length);
  if (bytes.length < length) throw new Error(`the file ends inside ${what}`);
  // A copy with its own buffer: the column decoder reads it through a DataView from offset 0.
  return new Uint8Array(bytes);
}

/** Checks every page header of a column chunk against what its bytes can hold (see maxRowsPerByte). */
function checkPages(bytes: Uint8Array, fileBytes: number, column: string): void {
  const reader = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 };
  const refuse = (what: string) => {
    throw new UnreadableError(`column ${column}: ${what}, more than the file's ${fileBytes} bytes can hold: not read`);
  };
  while (reader.offset < bytes.length) {
    const header = parquetHeader(reader);
    const stored = header.compressed_page_size;
    if (!(stored >= 0) || reader.offset + stored > bytes.length) refuse(`a page claims ${stored} stored bytes`);
    if (header.uncompressed_page_size > Math.max(stored, 1) * maxExpansion)
      refuse(`a page of ${stored} bytes claims ${header.uncompressed_page_size} decoded`);
    const values = Number(
      header.dictionary_page_header?.num_values ?? header.data_page_header?.num_values ?? header.data_page_header_v2?.num_values ?? 0,
    );
    if (values > fileBytes * maxRowsPerByte) refuse(`a page declares ${values} values`);
    if (header.dictionary_page_header && values * 4 > header.uncompressed_page_size)
      refuse(`a dictionary page of ${header.uncompressed_page_size} bytes declares ${values} entries`);
    reader.offset += stored;
  }
}

/** A cell as one line's text: strings of a list column joined by tabs, newlines made spaces (so one row is one line). */
function cellText(value: unknown): string {
  if (value instanceof Uint8Array) return cellText(printableRuns(Buffer.from(value.buffer, value.byteOffset, value.byteLength)));
  if (typeof value === 'string') return value.includes('\n') ? value.replaceAll('\n', ' ') : value;
  if (Array.isArray(value))
    return value
      .map(cellText)
      .filter((text) => text.length > 0)
      .join('\t');
  return '';
}

/**
 * Scans a Parquet file's text: every string column (list elements and struct fields included: each leaf column),
 * row group by row group, read through the open file (never the whole file at once), each row one line of cells
 * separated by tabs, so evidence names the row and column. Returns the bytes of text read; `notRead` names a row group (with its stored bytes)
 * too large to decode. A malformed file throws (the caller names it as not read); what was found before stays found.
 */
export function scanParquet(
  file: ByteSource,
  source: SourceRef,
  scan: ContaminationScan,
  notRead: (reason: string, bytes: number) => void,
): number {
  const size = file.size;
  if (size < 12) throw new Error('too short for a Parquet file');
  const tail = readBytes(file, size - 8, 8, 'its footer');
  if (Buffer.from(tail.subarray(4)).toString('latin1') !== 'PAR1')
    throw new Error('no Parquet footer (PAR1) at its end: not Parquet, or cut short');
  const footerLength = new DataView(tail.buffer).getUint32(0, true);
  if (footerLength + 8 > size) throw new Error(`its footer claims ${footerLength} bytes, more than the file holds`);
  if (footerLength > maxFooterBytes) throw new Error(`its footer is ${footerLength} bytes, over the ${maxFooterBytes} read`);
  const metadata = parquetMetadata(readBytes(file, size - footerLength - 8, footerLength + 8, 'its footer'));
  const schema = parquetSchema(metadata);
  const declaredRows = metadata.row_groups.reduce((sum, group) => sum + Number(group.num_rows), 0);
  if (declaredRows > size * maxRowsPerByte)
    throw new UnreadableError(`it declares ${declaredRows} rows, more than its ${size} bytes can hold: not read`);

  let textBytes = 0;
  let offset = 0;
  let groupStart = 0;
  metadata.row_groups.forEach((group, groupIndex) => {
    const rows = Number(group.num_rows);
    const chunks = group.columns.map((chunk) => {
      if (chunk.file_path) throw new Error(`a column chunk lies in another file (${chunk.file_path})`);
      if (!chunk.meta_data) throw new Error(`row group ${groupIndex} has a column without metadata`);
      const meta: ColumnMetaData = chunk.meta_data;
      return { meta, schemaPath: getTreePath(schema, meta.path_in_schema) };
    });
    const textChunks = chunks.filter(({ schemaPath }) => isTextColumn(schemaPath.at(-1)!));
    const groupBytes = textChunks.reduce((sum, { meta }) => sum + Number(meta.total_uncompressed_size), 0);
    for (const { meta } of textChunks) {
      if (Number(meta.total_uncompressed_size) > Math.max(Number(meta.total_compressed_size), 1) * maxExpansion)
        throw new UnreadableError(
          `column ${meta.path_in_schema.join('.')} claims ${meta.total_uncompressed_size} decoded bytes from ${meta.total_compressed_size} stored: not read`,
        );
    }
    if (groupBytes > maxRowGroupTextBytes) {
      notRead(
        `rows ${groupStart}-${groupStart + rows - 1} (row group ${groupIndex}): ${Math.round(groupBytes / 2 ** 20)} MiB of text columns, over the ${maxRowGroupTextBytes / 2 ** 20} MiB decoded at once: not read`,
        textChunks.reduce((sum, { meta }) => sum + Number(meta.total_compressed_size), 0),
      );
      groupStart += rows;
      return;
    }
    const names = textChunks.map(({ meta }) => meta.path_in_schema.join('.'));
    const columns = textChunks.map(({ meta, schemaPath }, c) => {
      const start = Number(meta.dictionary_page_offset || meta.data_page_offset);
      const length = Number(meta.total_compressed_size);
      if (start < 0 || start + length > size) throw new Error(`column ${names[c]} of row group ${groupIndex} lies outside the file`);
      const bytes = readBytes(file, start, length, `column ${names[c]}`);
      checkPages(bytes, size, names[c]!);
      const decoded = readColumn(
        { view: new DataView(bytes.buffer), offset: 0 },
        { groupStart, selectStart: 0, selectEnd: rows, groupRows: rows },
        {
          pathInSchema: meta.path_in_schema,
          type: meta.type,
          element: schemaPath.at(-1)!.element,
          schemaPath,
          codec: meta.codec,
          parsers: DEFAULT_PARSERS,
          utf8: isAnnotatedText(schemaPath.at(-1)!),
          compressors: compressorsUpTo(Number(meta.total_uncompressed_size)),
        },
      );
      const values: unknown[] = [];
      for (const page of decoded.data) for (let i = 0; i < page.length; i++) values.push(page[i]);
      if (values.length < rows)
        throw new Error(`column ${names[c]} of row group ${groupIndex} holds ${values.length} values for ${rows} rows`);
      return values;
    });

    let parts: string[] = [];
    let length = 0;
    let cellStarts: number[] = [];
    let cellColumns: number[] = [];
    let blockRow = groupStart;
    const flush = (nextRow: number) => {
      const text = parts.join('');
      const starts = cellStarts;
      const owners = cellColumns;
      // The column whose cell holds a position: the last cell starting at or before it.
      const columnAt = (position: number) => {
        let low = 0;
        let high = starts.length;
        while (low < high) {
          const middle = (low + high) >> 1;
          if (starts[middle]! <= position) low = middle + 1;
          else high = middle;
        }
        return names[owners[Math.max(0, low - 1)]!]!;
      };
      if (starts.length > 0) scan.scan(source, { text, offset, line: blockRow + 1, columnAt });
      offset += text.length;
      textBytes += Buffer.byteLength(text);
      parts = [];
      length = 0;
      cellStarts = [];
      cellColumns = [];
      blockRow = nextRow;
    };
    for (let row = 0; row < rows; row++) {
      columns.forEach((values, c) => {
        const cell = cellText(values[row]);
        if (cell.length === 0) return;
        cellStarts.push(length);
        cellColumns.push(c);
        parts.push(cell, '\t');
        length += cell.length + 1;
      });
      parts.push('\n');
      length++;
      if (length >= blockChars) flush(groupStart + row + 1);
    }
    if (length > 0) flush(groupStart + rows);
    groupStart += rows;
  });
  return textBytes;
}
