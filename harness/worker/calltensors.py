"""A ``call``'s tensors at the worker's side: the inputs placed as the parent asked, the
outputs described and encoded for the channel.

- ``place_inputs``: each input the parent sent, copied onto the device in the strides its
  metadata names (``place``: a layout that is not dense is cut from a NaN-filled buffer);
  ``rewrite_in_place``: new content written into the previous call's tensors without
  bumping their identity.
- ``poison``: blocks of the sizes the parent names, filled with 0xFF bytes and freed
  before a call, so the allocator hands the candidate memory that holds no earlier result.
- ``encode_output``: an output tree as the reply carries it: each tensor described
  (``describe_tensor``), with the inputs whose storage it overlaps and the earlier outputs
  it shares storage with; ``same_bytes`` compares an output with its snapshot at return.

``torch.Tensor``, ``type`` and ``isinstance`` are captured when the worker imports this,
before any candidate code runs.
"""

from __future__ import annotations

from typing import Any

import torch

from ..process import channel

_Tensor = torch.Tensor  # captured before any candidate code runs
_type = type
_isinstance = isinstance
_MAX_POISON = 1 << 30  # bytes of one poisoned block, at most


def dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: the strides are a permutation of a contiguous layout."""
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def place(src: torch.Tensor, stride: tuple[int, ...], device: str) -> torch.Tensor:
    """``src``'s values in a tensor of ``stride`` on ``device``. A layout that is not
    dense (the edge inputs' padded rows, a step, a dimension of stride 0) is cut from a
    buffer at least as long as the tensor, every element outside it NaN (or 77), so a
    kernel that indexes as if the input were contiguous reads those, not a neighbour's
    value; of a stride-0 dimension one slice is written (the parent's values repeat)."""
    shape = tuple(src.shape)
    layout = torch.empty_strided(shape, stride, dtype=src.dtype, device="meta")
    if src.numel() == 0 or dense(layout):
        dest = torch.empty_strided(shape, stride, dtype=src.dtype, device=device)
        dest.copy_(src)
        return dest
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
    flat = torch.empty(max(extent, src.numel()), dtype=src.dtype, device=device)
    if flat.is_floating_point() or flat.is_complex():
        flat.fill_(float("nan"))
    else:
        flat.fill_(True if flat.dtype == torch.bool else 77)
    dest = flat.as_strided(shape, stride)
    target, values = dest, src
    for dim, (size, step) in enumerate(zip(shape, stride, strict=True)):
        if step == 0 and size > 1:
            target, values = target.narrow(dim, 0, 1), values.narrow(dim, 0, 1)
    target.copy_(values)
    return dest


def place_inputs(tree: Any, tensors: list[torch.Tensor], device: str) -> Any:
    """The inputs ``tree`` describes, each tensor of ``tensors`` placed on ``device`` in
    the strides its metadata names (contiguous where it names none)."""
    placed: list[torch.Tensor] = []
    for meta in sorted(channel.tree_leaves(tree), key=lambda m: int(m["t"])):
        src = tensors[int(meta["t"])]
        stride = meta.get("stride")
        if stride is not None and len(stride) == src.dim():
            dest = place(src, tuple(int(s) for s in stride), device)
        else:
            dest = torch.empty(tuple(src.shape), dtype=src.dtype, device=device)
            dest.copy_(src)
        placed.append(dest)
    return channel.unpack_tree(tree, placed)


def rewrite_in_place(
    tree: Any, old_leaves: list[torch.Tensor], tensors: list[torch.Tensor]
) -> None:
    """Write the new content ``tree`` describes into the previous call's input tensors."""
    leaves_meta = channel.tree_leaves(tree)
    if len(leaves_meta) != len(old_leaves):
        raise ValueError("in-place rewrite with a different number of tensors")
    with torch.no_grad():
        for meta, old in zip(leaves_meta, old_leaves, strict=True):
            src = tensors[int(meta["t"])]
            if tuple(src.shape) != tuple(old.shape) or src.dtype != old.dtype:
                raise ValueError("in-place rewrite with a different shape or dtype")
            # .data keeps data_ptr, id, shape and _version: a replay cache keyed on
            # any of them sees the same tensor with new content.
            old.data.copy_(src)


def poison(sizes: list[int], device: str) -> None:
    """Allocate up to eight blocks of ``sizes`` bytes filled with 0xFF, then free them."""
    buffers = []
    for size in sizes[:8]:
        n = max(0, min(int(size), _MAX_POISON))
        if n:
            buffers.append(torch.empty(n, dtype=torch.uint8, device=device).fill_(255))
    del buffers
    if device == "cuda":
        torch.cuda.synchronize()


def span(t: torch.Tensor) -> tuple[int, int]:
    if t.numel() == 0:
        return (t.data_ptr(), t.data_ptr())
    extent = 1 + sum((n - 1) * abs(s) for s, n in zip(t.stride(), t.shape, strict=True))
    return (t.data_ptr(), t.data_ptr() + extent * t.element_size())


def storage_range(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return (storage.data_ptr(), storage.data_ptr() + storage.nbytes())


def leaves(value: Any) -> list[Any]:
    if _isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    if _isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    return [value]


def replace_leaves(value: Any, swap: dict[int, torch.Tensor]) -> Any:
    if _isinstance(value, tuple):
        return tuple(replace_leaves(v, swap) for v in value)
    if _isinstance(value, list):
        return [replace_leaves(v, swap) for v in value]
    if _isinstance(value, dict):
        return {k: replace_leaves(v, swap) for k, v in value.items()}
    return swap.get(id(value), value)


def describe_tensor(t: torch.Tensor) -> dict[str, Any]:
    return {
        "dtype": channel.DTYPE_NAMES.get(t.dtype, str(t.dtype)),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": t.storage_offset(),
        "device": str(t.device),
        "dense": dense(t),
        "requires_grad": bool(t.requires_grad),
    }


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0:
        return True
    x = a.contiguous().reshape(-1).view(torch.uint8)
    y = b.detach().contiguous().reshape(-1).view(torch.uint8)
    return bool(torch.equal(x, y))


#: elements compared a chunk at a time where an input's bytes are checked after a call (a
#: GPU tensor's chunk is copied to the host to meet its source)
COMPARE_CHUNK = 1 << 24


def unchanged_since_sent(placed: Any, source: torch.Tensor) -> bool:
    """Whether ``placed`` (an input as the call left it, on any device) holds exactly the
    bytes of ``source`` (the tensor it was placed from, as the channel delivered it): the
    same dtype and shape, compared bit for bit a chunk at a time."""
    if _type(placed) is not _Tensor or placed.dtype != source.dtype:
        return False
    if tuple(placed.shape) != tuple(source.shape):
        return False
    n = source.numel()
    flat = placed.detach().contiguous().reshape(-1)
    src = source.reshape(-1)
    return all(
        same_bytes(flat[part].to("cpu"), src[part])
        for part in (slice(i, i + COMPARE_CHUNK) for i in range(0, n, COMPARE_CHUNK))
    )


def encode_output(
    value: Any,
    tensors: list[torch.Tensor],
    input_ranges: list[tuple[int, int]],
    shared: dict[int, list[int]] | None = None,
) -> Any:
    shared = shared if shared is not None else {}
    if _isinstance(value, (tuple, list)):
        key = "tuple" if _isinstance(value, tuple) else "list"
        return {key: [encode_output(v, tensors, input_ranges, shared) for v in value]}
    if _isinstance(value, dict):
        return {
            "dict": [
                [str(k), encode_output(v, tensors, input_ranges, shared)] for k, v in value.items()
            ]
        }
    cls = _type(value)
    if cls is _Tensor:
        node = describe_tensor(value)
        extent = span(value)
        node["aliases"] = [
            i for i, (lo, hi) in enumerate(input_ranges) if extent[0] < hi and lo < extent[1]
        ]
        if shared.get(id(value)):
            node["shares_earlier"] = shared[id(value)]
        if value.dtype in channel.DTYPE_NAMES:
            node["t"] = len(tensors)
            tensors.append(value.detach())
        return node
    if _isinstance(value, _Tensor):
        return {"subclass": f"{cls.__module__}.{cls.__qualname__}"}
    if value is None or _isinstance(value, (bool, int, float, str)):
        return {"other": cls.__name__, "v": value}
    return {"other": f"{cls.__module__}.{cls.__qualname__}"}


__all__ = [
    "dense",
    "describe_tensor",
    "encode_output",
    "leaves",
    "place",
    "place_inputs",
    "poison",
    "replace_leaves",
    "rewrite_in_place",
    "same_bytes",
    "span",
    "storage_range",
    "unchanged_since_sent",
]
