"""Concept links: from a PTX instruction to the code that emits or wraps it in the other
corpora (inline-PTX strings and ``asm volatile`` in CuTe headers, CuTeDSL ops and their
``nvvm``/``llvm`` wrappers, Triton/Gluon intrinsics) and to the code that calls those
wrappers (example kernels); and back, from a wrapper or a user to its PTX section.

Built at index time, one artifact per corpus (``lexical/<corpus>/links.sqlite``) from that
corpus's own chunks (its link-only sources' too: files kept for the links and never
searched, such as CUTLASS's ``include/cutlass/arch`` wrappers), stamped with the corpus's
generation. Beside the links the artifact keeps what they were made through (the wrapper
names and their instructions, the helpers, who calls each name): a re-index makes the
changed files' links again -- and those of the files whose links the change moves -- and
puts them in place of their old ones (``refresh``). A reader that finds a stamp other than
the cache's rebuilds it before answering, so a link never names a chunk the index no
longer has. A link records the instruction as written
(``wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16``, ``nvvm.cp_async_bulk_tensor_...``)
as a normalised key; which PTX section it belongs to is decided when asked, against the
names the ``ptx`` corpus defines now (the longest one that prefixes the key), so
re-indexing the PTX manual never leaves the other corpora's links stale either.

One module per step, each importing only those above it:

- ``mentions``: the instructions one chunk emits or wraps (PTX in strings, nvvm ops,
  manual anchors, Gluon intrinsics) and the normalised key they are stored under;
- ``make``: a corpus's links from its chunk rows: the wrappers' names, the chunks that call
  them (and the helpers the examples call), each call resolved to its instructions;
- ``table``: the sqlite artifact those links are kept in, built whole and opened current;
- ``refresh``: the table brought up to date after an index run changed a few files;
- ``resolve``: a link's key to its PTX concept, and the links and sections of a concept;
- ``render``: the "implemented by / used in" block, a few links per group.

Import from the modules themselves; this package re-exports nothing.
"""
