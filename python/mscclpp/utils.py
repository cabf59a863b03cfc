"""Helpers with MSCCL++'s names (``import mscclpp.utils as mscclpp_utils``)."""


def torch_dtype_to_mscclpp_dtype(dtype):
    """The :class:`mscclpp.DataType` of a torch dtype (or of its name, e.g. "torch.float16",
    so code without torch can use it); ValueError for a type the library does not reduce."""
    from .bindings import DataType

    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    table = {
        "float16": DataType.float16, "half": DataType.float16,
        "float32": DataType.float32, "float": DataType.float32,
        "float64": DataType.float64, "double": DataType.float64,
        "bfloat16": DataType.bfloat16, "int32": DataType.int32, "int": DataType.int32,
        "uint32": DataType.uint32, "int8": DataType.int8, "uint8": DataType.uint8,
        "int64": DataType.int64, "long": DataType.int64, "uint64": DataType.uint64,
        "float8_e4m3fn": DataType.float8_e4m3, "float8_e4m3fnuz": DataType.float8_e4m3,
        "float8_e5m2": DataType.float8_e5m2, "float8_e5m2fnuz": DataType.float8_e5m2,
    }
    if name not in table:
        raise ValueError(f"torch_dtype_to_mscclpp_dtype: unsupported dtype {dtype}")
    return table[name]


def numpy_dtype_to_mscclpp_dtype(dtype):
    """The :class:`mscclpp.DataType` of a NumPy dtype."""
    import numpy as np

    return torch_dtype_to_mscclpp_dtype(np.dtype(dtype).name)


def is_torch_tensor(obj):
    t = type(obj)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")
