/**
 * A valid Parquet file of a few hundred bytes whose one text column declares `rows` rows, all the dictionary's one
 * entry: its data page is a single byte (dictionary indices of bit width 0, "all zero"), so a reader that trusts the
 * declared count allocates `rows` cells. Written by hand in Thrift's compact protocol, as pyarrow would lay it out.
 */
export function parquetDictionaryBomb(rows = 120_000_000, entry = 'x'): Buffer {
  const dictionaryPage = Buffer.concat([uint32le(entry.length), Buffer.from(entry)]);
  const dataPage = Buffer.from([0]);
  const dictionaryHeader = struct([
    [1, i32(2)], // type: DICTIONARY_PAGE
    [2, i32(dictionaryPage.length)],
    [3, i32(dictionaryPage.length)],
    [
      7,
      struct([
        [1, i32(1)],
        [2, i32(0)],
      ]),
    ], // one value, PLAIN
  ]);
  const dataHeader = struct([
    [1, i32(0)], // type: DATA_PAGE
    [2, i32(dataPage.length)],
    [3, i32(dataPage.length)],
    [
      5,
      struct([
        [1, i32(rows)],
        [2, i32(8)],
        [3, i32(3)],
        [4, i32(3)],
      ]),
    ], // rows values, RLE_DICTIONARY, RLE levels
  ]);
  const magic = Buffer.from('PAR1');
  const chunk = Buffer.concat([dictionaryHeader.bytes, dictionaryPage, dataHeader.bytes, dataPage]);
  const dictionaryOffset = magic.length;
  const dataOffset = dictionaryOffset + dictionaryHeader.bytes.length + dictionaryPage.length;
  const columnMeta = struct([
    [1, i32(6)], // BYTE_ARRAY
    [2, list(5, [varint(zigzag(0)), varint(zigzag(8))])], // encodings: PLAIN, RLE_DICTIONARY
    [3, list(8, [binary('text')])],
    [4, i32(0)], // UNCOMPRESSED
    [5, i64(rows)],
    [6, i64(chunk.length)],
    [7, i64(chunk.length)],
    [9, i64(dataOffset)],
    [11, i64(dictionaryOffset)],
  ]);
  const footer = struct([
    [1, i32(1)],
    [
      2,
      list(12, [
        struct([
          [4, binaryField('schema')],
          [5, i32(1)],
        ]).bytes,
        struct([
          [1, i32(6)],
          [3, i32(0)],
          [4, binaryField('text')],
          [6, i32(0)],
        ]).bytes, // REQUIRED, UTF8
      ]),
    ],
    [3, i64(rows)],
    [
      4,
      list(12, [
        struct([
          [
            1,
            list(12, [
              struct([
                [2, i64(dictionaryOffset)],
                [3, columnMeta],
              ]).bytes,
            ]),
          ],
          [2, i64(chunk.length)],
          [3, i64(rows)],
        ]).bytes,
      ]),
    ],
  ]).bytes;
  return Buffer.concat([magic, chunk, footer, uint32le(footer.length), magic]);
}

/** A compact-protocol field's value: its type id and bytes. */
interface Field {
  type: number;
  bytes: Buffer;
}

const zigzag = (n: number) => (BigInt(n) >= 0n ? BigInt(n) * 2n : -BigInt(n) * 2n - 1n);
function varint(value: bigint): Buffer {
  const bytes: number[] = [];
  do {
    const low = Number(value & 0x7fn);
    value >>= 7n;
    bytes.push(value > 0n ? low | 0x80 : low);
  } while (value > 0n);
  return Buffer.from(bytes);
}
const uint32le = (n: number) => {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32LE(n);
  return bytes;
};
const i32 = (n: number): Field => ({ type: 5, bytes: varint(zigzag(n)) });
const i64 = (n: number): Field => ({ type: 6, bytes: varint(zigzag(n)) });
const binary = (text: string) => Buffer.concat([varint(BigInt(Buffer.byteLength(text))), Buffer.from(text)]);
const binaryField = (text: string): Field => ({ type: 8, bytes: binary(text) });
const list = (elementType: number, elements: Buffer[]): Field => ({
  type: 9,
  bytes: Buffer.concat([Buffer.from([(elements.length << 4) | elementType]), ...elements]),
});
function struct(fields: Array<[number, Field]>): Field {
  let last = 0;
  const parts = fields.map(([id, field]) => {
    const header = Buffer.from([((id - last) << 4) | field.type]);
    last = id;
    return Buffer.concat([header, field.bytes]);
  });
  return { type: 12, bytes: Buffer.concat([...parts, Buffer.from([0])]) };
}
