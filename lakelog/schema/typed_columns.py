"""Typed columns across schema versions: merging their types into the table's, and fitting arrays to it.

Delta schema evolution without table features can add fields, never change a field's type: so the merge of two
types is their union of struct fields (by name, the first type's order first, new fields after), recursively
through lists and maps, and any other difference -- an int that becomes a long, a string that becomes a
record -- is a :class:`TypeConflict`. Pure functions.
"""

from __future__ import annotations

import pyarrow as pa

KEY_COLUMN, VALUE_COLUMN = "key_record", "value_record"
TYPED_COLUMNS = (KEY_COLUMN, VALUE_COLUMN)


class TypeConflict(Exception):
    """Two versions give one field types a Delta table cannot both hold."""

    def __init__(self, path: str, old: pa.DataType, new: pa.DataType) -> None:
        super().__init__(f"field {path} is {old} in the table and {new} in this schema; a Delta table cannot change "
                         f"a column's type (add a new field instead)")
        self.path = path


def merge_types(old: pa.DataType | None, new: pa.DataType, path: str) -> pa.DataType:
    """The narrowest type holding both (``old`` None: ``new``)."""
    if old is None or same_type(old, new):
        return old if old is not None else new
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        fields = {f.name: f for f in old}
        out = []
        for f in old:
            idx = new.get_field_index(f.name)
            out.append(f if idx < 0 else pa.field(f.name, merge_types(f.type, new.field(idx).type,
                                                                          f"{path}.{f.name}")))
        out += [pa.field(f.name, f.type) for f in new if f.name not in fields]
        return pa.struct(out)
    if pa.types.is_map(old) and pa.types.is_map(new):
        return pa.map_(merge_types(old.key_type, new.key_type, f"{path}.key"),
                       merge_types(old.item_type, new.item_type, f"{path}.value"))
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(merge_types(old.value_type, new.value_type, f"{path}.element"))
    raise TypeConflict(path, old, new)


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal as Delta types: list item names and nullability aside."""
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return a.num_fields == b.num_fields and all(
            x.name == y.name and same_type(x.type, y.type) for x, y in zip(a, b))
    if pa.types.is_map(a) and pa.types.is_map(b):
        return same_type(a.key_type, b.key_type) and same_type(a.item_type, b.item_type)
    if pa.types.is_list(a) and pa.types.is_list(b):
        return same_type(a.value_type, b.value_type)
    return a == b


def conform(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr`` as ``target`` (a merge of its type): struct fields it lacks become nulls, fields in
    ``target``'s order."""
    if arr.type == target:
        return arr
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_struct(target):
        children = []
        for f in target:
            idx = arr.type.get_field_index(f.name)
            children.append(conform(arr.field(idx), f.type) if idx >= 0 else pa.nulls(len(arr), f.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target):
        offsets = arr.offsets
        keys = conform(arr.keys, target.key_type)
        items = conform(arr.items, target.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target,
                                       mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(target):
        values = conform(arr.values, target.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=target,
                                        mask=arr.is_null() if arr.null_count else None)
    return arr.cast(target)


def leaf_paths(name: str, t: pa.DataType) -> list[str]:
    """Dotted paths of the primitive fields reachable through structs only (the Parquet statistics worth
    writing: lists and maps repeat)."""
    if pa.types.is_struct(t):
        return [p for f in t for p in leaf_paths(f"{name}.{f.name}", f.type)]
    if pa.types.is_list(t) or pa.types.is_map(t):
        return []
    return [name]
