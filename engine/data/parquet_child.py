"""Decode a Parquet file batch by batch and count what it holds once decoded: rows and Arrow bytes.

Run by engine.data.loading through engine.store.limits (a memory and CPU cap), never imported. Input on stdin, one
JSON object ``{"path": ..., "max_bytes": N}``; output one JSON object ``{"rows": R, "bytes": B}``, where counting
stops once B passes N. A few hundred bytes of a file can hold gigabytes: a dictionary-encoded column stores one
value for every row that repeats it, and a compressed page of one repeated character is tiny. Arrow keeps a
dictionary column encoded (its size counts the value once), so each batch is cast to the plain types first.
"""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def plain(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every dictionary type replaced by its value type, in lists and structs too."""
    if pa.types.is_dictionary(kind):
        return plain(kind.value_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        make = pa.list_ if pa.types.is_list(kind) else pa.large_list
        return make(pa.field(kind.value_field.name, plain(kind.value_type)))
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(field.name, plain(field.type)) for field in kind])
    return kind


request = json.loads(sys.stdin.read())
source = pq.ParquetFile(request["path"])
schema = pa.schema([pa.field(field.name, plain(field.type)) for field in source.schema_arrow])
rows = size = 0
# One thread, as engine.data.loading reads; small batches, so what is decoded at once stays far under the cap.
for batch in source.iter_batches(batch_size=16, use_threads=False):
    rows, size = rows + batch.num_rows, size + batch.cast(schema).nbytes
    if size > request["max_bytes"]:
        break
print(json.dumps({"rows": rows, "bytes": size}))
