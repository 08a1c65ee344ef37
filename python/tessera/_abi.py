# SPDX-License-Identifier: Apache-2.0
"""ctypes mirrors of the structs and enums of include/tessera/tessera.h.

Field names and order match the header exactly: tests/test_abi.py compiles a C
program that prints sizeof/offsetof of each struct and compares them with these
classes, so a change to the header that is not mirrored here fails a test.
"""
import ctypes

MAX_RANK = 4
MAX_VARIANTS = 32

# tsr_status
OK = 0
STATUS_NAMES = {
    0: "TSR_OK",
    1: "TSR_ERROR_NULL_ARGUMENT",
    2: "TSR_ERROR_INVALID_VALUE",
    3: "TSR_ERROR_STRUCT_SIZE",
    4: "TSR_ERROR_DTYPE_MISMATCH",
    5: "TSR_ERROR_RANK",
    6: "TSR_ERROR_SHAPE_MISMATCH",
    7: "TSR_ERROR_BAD_SIZE",
    8: "TSR_ERROR_OUT_OF_BOUNDS",
    9: "TSR_ERROR_WRONG_DEVICE",
    10: "TSR_ERROR_UNSUPPORTED",
    11: "TSR_ERROR_OUT_OF_MEMORY",
    12: "TSR_ERROR_NOT_FOUND",
    13: "TSR_ERROR_BACKEND",
    14: "TSR_ERROR_IO",
    15: "TSR_ERROR_OVERLAP",
}
STATUS = {name: value for value, name in STATUS_NAMES.items()}

# tsr_dtype
DTYPE_INVALID, DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_I32 = 0, 1, 2, 3, 4
DTYPE_BY_NAME = {"f32": DTYPE_F32, "f16": DTYPE_F16, "bf16": DTYPE_BF16, "i32": DTYPE_I32}
DTYPE_NAMES = {value: name for name, value in DTYPE_BY_NAME.items()}
DTYPE_SIZES = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_BF16: 2, DTYPE_I32: 4}

# tsr_device_type
DEVICE_TYPE_NAMES = {0: "cpu", 1: "gpu", 2: "integrated_gpu", 3: "other"}

# tsr_op, in enum order
OP_NAMES = ("gemm", "grouped_gemm", "attention", "rmsnorm", "layernorm", "softmax", "rope",
            "swiglu", "gelu", "cross_entropy", "kv_append")
OP_BY_NAME = {name: index for index, name in enumerate(OP_NAMES)}

# tsr_activation
ACTIVATIONS = {None: 0, "none": 0, "relu": 1, "gelu_tanh": 2, "gelu_erf": 3, "silu": 4}
# tsr_compute_mode
COMPUTE_MODES = {"strict": 0, "tf32": 1}
# tsr_rope_style
ROPE_STYLES = {"neox": 0, "gptj": 1}
# tsr_gelu_approx (names follow torch.nn.functional.gelu's `approximate`)
GELU_APPROXIMATIONS = {"none": 0, "erf": 0, "tanh": 1}
# tsr_choice_rule
CHOICE_RULES = {0: "override", 1: "tuning_db", 2: "heuristic"}
# tsr_external_kind
EXTERNAL_HOST_POINTER, EXTERNAL_CUDA_DEVICE_POINTER, EXTERNAL_HIP_DEVICE_POINTER = 1, 2, 3

c_enum = ctypes.c_int  # C enums with small non-negative values are ints on every ABI we build for


class Tensor(ctypes.Structure):
    """tsr_tensor."""
    _fields_ = [
        ("buffer", ctypes.c_void_p),
        ("offset", ctypes.c_size_t),
        ("dtype", c_enum),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


class ContextOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backends", ctypes.c_char_p),
        ("disable_backends", ctypes.c_char_p),
        ("add_plugin_path", ctypes.c_char_p),
        ("log_level", c_enum),
    ]


class PluginReport(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_char * 64),
        ("manifest", ctypes.c_char * 1024),
        ("library", ctypes.c_char * 1024),
        ("state", c_enum),
        ("abi_version", ctypes.c_uint32),
        ("device_count", ctypes.c_uint32),
        ("reason", ctypes.c_char * 512),
    ]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_char * 32),
        ("selector", ctypes.c_char * 48),
        ("backend_index", ctypes.c_uint32),
        ("type", c_enum),
        ("vendor", ctypes.c_char * 64),
        ("name", ctypes.c_char * 256),
        ("arch", ctypes.c_char * 64),
        ("physical_id", ctypes.c_char * 64),
        ("driver_version", ctypes.c_char * 64),
        ("memory_bytes", ctypes.c_uint64),
        ("compute_units", ctypes.c_uint32),
        ("dtype_mask", ctypes.c_uint32),
        ("op_mask", ctypes.c_uint32),
        ("host_visible", ctypes.c_uint32),
        ("device_key", ctypes.c_char * 256),
        ("details", ctypes.c_char * 1024),
        ("native_ordinal", ctypes.c_int32),
    ]


class GemmDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("a", Tensor), ("b", Tensor), ("c", Tensor), ("bias", Tensor), ("d", Tensor),
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("activation", c_enum),
        ("compute", c_enum),
        ("variant", ctypes.c_char_p),
    ]


class GroupedGemmDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("a", Tensor), ("b", Tensor), ("bias", Tensor), ("d", Tensor),
        ("group_sizes", ctypes.POINTER(ctypes.c_int64)),
        ("group_count", ctypes.c_int64),
        ("alpha", ctypes.c_float),
        ("activation", c_enum),
        ("compute", c_enum),
        ("variant", ctypes.c_char_p),
    ]


class AttentionDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor), ("lse", Tensor),
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("window_left", ctypes.c_int64),
        ("window_right", ctypes.c_int64),
        ("variant", ctypes.c_char_p),
        ("cu_seqlens_q", Tensor), ("cu_seqlens_kv", Tensor), ("block_table", Tensor),
        ("seqlens_kv", Tensor),
        ("max_seqlen_q", ctypes.c_int64),
        ("max_seqlen_kv", ctypes.c_int64),
        ("softcap", ctypes.c_float),
    ]


class KvAppendDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("k_new", Tensor), ("v_new", Tensor), ("k_cache", Tensor), ("v_cache", Tensor),
        ("slots", Tensor),
        ("variant", ctypes.c_char_p),
    ]


class RmsnormDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("x", Tensor), ("residual", Tensor), ("weight", Tensor), ("y", Tensor),
        ("residual_out", Tensor),
        ("eps", ctypes.c_float),
        ("variant", ctypes.c_char_p),
    ]


class LayernormDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("x", Tensor), ("weight", Tensor), ("bias", Tensor), ("y", Tensor),
        ("eps", ctypes.c_float),
        ("variant", ctypes.c_char_p),
    ]


class SoftmaxDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("x", Tensor), ("y", Tensor),
        ("scale", ctypes.c_float),
        ("variant", ctypes.c_char_p),
    ]


class RopeDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("x", Tensor), ("y", Tensor),
        ("position_offset", ctypes.c_int64),
        ("theta", ctypes.c_float),
        ("rotary_dim", ctypes.c_int32),
        ("style", c_enum),
        ("variant", ctypes.c_char_p),
    ]


class SwigluDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("gate", Tensor), ("up", Tensor), ("y", Tensor),
        ("variant", ctypes.c_char_p),
    ]


class GeluDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("x", Tensor), ("y", Tensor),
        ("approximate", c_enum),
        ("variant", ctypes.c_char_p),
    ]


class CrossEntropyDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("logits", Tensor), ("targets", Tensor), ("loss", Tensor), ("lse", Tensor),
        ("ignore_index", ctypes.c_int64),
        ("variant", ctypes.c_char_p),
    ]


class VariantList(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("count", ctypes.c_uint32),
        ("names", (ctypes.c_char * 64) * MAX_VARIANTS),
        ("descriptions", (ctypes.c_char * 160) * MAX_VARIANTS),
    ]


class Choice(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("variant", ctypes.c_char * 64),
        ("rule", c_enum),
        ("shape_class", ctypes.c_char * 96),
        ("device_key", ctypes.c_char * 256),
        ("source", ctypes.c_char * 1024),
    ]


def new_desc(desc_class, **defaults):
    """A descriptor with struct_size set and the INIT macro's defaults applied."""
    desc = desc_class()
    desc.struct_size = ctypes.sizeof(desc_class)
    for name, value in defaults.items():
        setattr(desc, name, value)
    return desc


# The C struct name of each mirror, for the ABI test.
C_NAMES = {
    Tensor: "tsr_tensor",
    ContextOptions: "tsr_context_options",
    PluginReport: "tsr_plugin_report",
    DeviceInfo: "tsr_device_info",
    GemmDesc: "tsr_gemm_desc",
    GroupedGemmDesc: "tsr_grouped_gemm_desc",
    AttentionDesc: "tsr_attention_desc",
    RmsnormDesc: "tsr_rmsnorm_desc",
    LayernormDesc: "tsr_layernorm_desc",
    SoftmaxDesc: "tsr_softmax_desc",
    RopeDesc: "tsr_rope_desc",
    SwigluDesc: "tsr_swiglu_desc",
    GeluDesc: "tsr_gelu_desc",
    CrossEntropyDesc: "tsr_cross_entropy_desc",
    KvAppendDesc: "tsr_kv_append_desc",
    VariantList: "tsr_variant_list",
    Choice: "tsr_choice",
}
