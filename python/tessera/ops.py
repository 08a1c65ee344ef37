# SPDX-License-Identifier: Apache-2.0
"""Every tessera op as a function over DLPack arrays.

Common keywords: out= (the output array; else one is allocated, see
arrays.allocate_like), device= (a Device or selector; default: the device that
holds the first input), copy= (None / False / True, see arrays), variant= (force
a kernel variant by name). Results are ready when the function returns, except
for PyTorch/CuPy GPU inputs, which run in order on the caller's current stream.
"""
import ctypes

from . import _abi
from ._call import OpCall, enum_value
from .arrays import dtype_name
from .errors import python_error

_F32 = _abi.DTYPE_F32


def _dtype_value(dtype, default):
    return default if dtype is None else _abi.DTYPE_BY_NAME[dtype_name(dtype)]


def _dims(view):
    return tuple(view.shape[i] for i in range(max(0, min(view.rank, _abi.MAX_RANK))))


def gemm(a, b, *, c=None, bias=None, alpha=1.0, beta=None, accumulate=False, activation=None,
         compute="strict", out=None, out_dtype=None, variant=None, device=None, copy=None):
    """out = activation(alpha * a @ b + beta * c + bias).

    a [M, K] or [batch, M, K]; b [K, N] or [batch, K, N] (a transposed operand is
    a transposed view: a.T in NumPy). c has out's shape (beta defaults to 1 when
    c is given); accumulate=True means c = out (out += a @ b). bias [N].
    activation: None, "relu", "gelu_tanh", "gelu_erf", "silu". compute: "strict"
    or "tf32". out_dtype: a's dtype (default) or "f32".
    """
    if accumulate:
        if out is None or c is not None:
            raise python_error("TSR_ERROR_INVALID_VALUE",
                               "gemm: accumulate=True needs out= and no c=")
        c = out
    if c is None and beta not in (None, 0, 0.0):
        raise python_error("TSR_ERROR_INVALID_VALUE", "gemm: beta = %r needs c= or "
                           "accumulate=True" % (beta,))
    with OpCall("gemm", (a, b), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.GemmDesc, alpha=alpha,
                             beta=(1.0 if beta is None else beta) if c is not None else 0.0,
                             activation=enum_value(_abi.ACTIVATIONS, activation, "activation"),
                             compute=enum_value(_abi.COMPUTE_MODES, compute, "compute"),
                             variant=call.variant)
        desc.a = call.input(a, "a")
        desc.b = call.input(b, "b")
        desc.c = call.input(c, "c")
        desc.bias = call.input(bias, "bias")
        a_dims, b_dims = _dims(desc.a), _dims(desc.b)
        m = a_dims[-2] if len(a_dims) >= 2 else 1
        n = b_dims[-1] if b_dims else 1
        batch = a_dims[0] if len(a_dims) == 3 else b_dims[0] if len(b_dims) == 3 else None
        shape = (m, n) if batch is None else (batch, m, n)
        desc.d = call.output(out, shape, _dtype_value(out_dtype, desc.a.dtype), "out")
        return call.run(desc)


def grouped_gemm(a, b, group_sizes, *, bias=None, alpha=1.0, activation=None, compute="strict",
                 out=None, out_dtype=None, variant=None, device=None, copy=None):
    """Mixture-of-experts GEMM: rows [start_g, start_g + group_sizes[g]) of a
    [T, K] times b[g] ([G, K, N]) into out [T, N]; bias optional [G, N].
    group_sizes: a sequence of G non-negative ints summing to T."""
    sizes = [int(size) for size in group_sizes]
    with OpCall("grouped_gemm", (a, b), device, copy, variant) as call:
        host_sizes = call.keep((ctypes.c_int64 * max(len(sizes), 1))(*sizes))
        desc = _abi.new_desc(_abi.GroupedGemmDesc, alpha=alpha,
                             activation=enum_value(_abi.ACTIVATIONS, activation, "activation"),
                             compute=enum_value(_abi.COMPUTE_MODES, compute, "compute"),
                             variant=call.variant, group_count=len(sizes))
        desc.group_sizes = ctypes.cast(host_sizes, ctypes.POINTER(ctypes.c_int64))
        desc.a = call.input(a, "a")
        desc.b = call.input(b, "b")
        desc.bias = call.input(bias, "bias")
        a_dims, b_dims = _dims(desc.a), _dims(desc.b)
        shape = (a_dims[0] if a_dims else 1, b_dims[-1] if b_dims else 1)
        desc.d = call.output(out, shape, _dtype_value(out_dtype, desc.a.dtype), "out")
        return call.run(desc)


def attention(q, k, v, *, causal=False, scale=None, window_left=-1, window_right=-1,
              return_lse=False, lse=None, out=None, cu_seqlens_q=None, cu_seqlens_kv=None,
              block_table=None, seqlens_kv=None, max_seqlen_q=0, max_seqlen_kv=0, softcap=0.0,
              variant=None, device=None, copy=None):
    """o = softmax(scale * q k^T + mask) v. q [B, Sq, Hq, D]; k, v [B, Skv, Hkv, D]
    (BSHD; BHSD data is a permuted view); Hq a multiple of Hkv (GQA/MQA).
    scale: None = 1/sqrt(D). causal, window_left/window_right (-1 unbounded) as
    in tsr_attention_desc. With return_lse=True (or lse= an f32 array) returns
    (o, lse).

    Serving forms (int32 arrays on the same device, as in tsr_attention_desc):
    cu_seqlens_q [B + 1] makes q packed [total_q, Hq, D] (lse [Hq, total_q]);
    cu_seqlens_kv [B + 1] packs k, v [total_kv, Hkv, D]; block_table
    [B, max_blocks] pages them [num_blocks, block_size, Hkv, D] and needs
    seqlens_kv [B]; max_seqlen_q / max_seqlen_kv are host bounds of the
    lengths (0: the layout's); softcap > 0 caps the scores."""
    with OpCall("attention", (q, k, v), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.AttentionDesc, scale=0.0 if scale is None else scale,
                             causal=1 if causal else 0, window_left=window_left,
                             window_right=window_right, variant=call.variant,
                             max_seqlen_q=max_seqlen_q, max_seqlen_kv=max_seqlen_kv,
                             softcap=softcap)
        desc.q = call.input(q, "q")
        desc.k = call.input(k, "k")
        desc.v = call.input(v, "v")
        desc.cu_seqlens_q = call.input(cu_seqlens_q, "cu_seqlens_q")
        desc.cu_seqlens_kv = call.input(cu_seqlens_kv, "cu_seqlens_kv")
        desc.block_table = call.input(block_table, "block_table")
        desc.seqlens_kv = call.input(seqlens_kv, "seqlens_kv")
        q_dims, v_dims = _dims(desc.q), _dims(desc.v)
        o_shape = q_dims[:-1] + v_dims[-1:] if len(q_dims) == len(v_dims) else q_dims
        desc.o = call.output(out, o_shape or (1,), desc.q.dtype, "out")
        if return_lse or lse is not None:
            if cu_seqlens_q is not None:
                lse_shape = (q_dims[1], q_dims[0]) if len(q_dims) == 3 else (1,)
            else:
                lse_shape = (q_dims[0], q_dims[2], q_dims[1]) if len(q_dims) == 4 else (1,)
            desc.lse = call.output(lse, lse_shape, _F32, "lse")
        return call.run(desc)


def kv_append(k_new, k_cache, slots, *, v_new=None, v_cache=None, variant=None, device=None,
              copy=None):
    """Writes row t of k_new (and v_new) [T, Hkv, D] into slot slots[t] of the
    paged caches [num_blocks, block_size, Hkv, D] (block slots[t] // block_size,
    row slots[t] % block_size); negative slots are skipped. slots: int32 [T].
    The caches are updated in place and returned (k_cache, or (k_cache,
    v_cache))."""
    with OpCall("kv_append", (k_new, k_cache), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.KvAppendDesc, variant=call.variant)
        desc.k_new = call.input(k_new, "k_new")
        desc.v_new = call.input(v_new, "v_new")
        desc.slots = call.input(slots, "slots")
        for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
            if cache is None:
                continue
            view = call.input(cache, name)  # its contents stay where no slot writes
            setattr(desc, name, call.output(cache, _dims(view), view.dtype, name))
        return call.run(desc)


def rmsnorm(x, weight=None, *, residual=None, residual_out=None, eps=1e-6, out=None,
            variant=None, device=None, copy=None):
    """h = x + residual (when given); y = h / sqrt(mean(h^2) + eps) * weight over
    the last dimension. residual_out: an array receiving h, or True to allocate
    one; then returns (y, residual_out)."""
    with OpCall("rmsnorm", (x,), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.RmsnormDesc, eps=eps, variant=call.variant)
        desc.x = call.input(x, "x")
        desc.residual = call.input(residual, "residual")
        desc.weight = call.input(weight, "weight")
        shape = _dims(desc.x) or (1,)
        desc.y = call.output(out, shape, desc.x.dtype, "out")
        if residual_out is not None:
            target = None if residual_out is True else residual_out
            desc.residual_out = call.output(target, shape, desc.x.dtype, "residual_out")
        return call.run(desc)


def layernorm(x, weight=None, bias=None, *, eps=1e-5, out=None, variant=None, device=None,
              copy=None):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension."""
    with OpCall("layernorm", (x,), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.LayernormDesc, eps=eps, variant=call.variant)
        desc.x = call.input(x, "x")
        desc.weight = call.input(weight, "weight")
        desc.bias = call.input(bias, "bias")
        desc.y = call.output(out, _dims(desc.x) or (1,), desc.x.dtype, "out")
        return call.run(desc)


def softmax(x, *, scale=None, out=None, variant=None, device=None, copy=None):
    """y = softmax(scale * x) over the last dimension (scale None: 1)."""
    with OpCall("softmax", (x,), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.SoftmaxDesc, scale=0.0 if scale is None else scale,
                             variant=call.variant)
        desc.x = call.input(x, "x")
        desc.y = call.output(out, _dims(desc.x) or (1,), desc.x.dtype, "out")
        return call.run(desc)


def rope(x, *, position_offset=0, theta=None, rotary_dim=None, style="neox", out=None,
         variant=None, device=None, copy=None):
    """Rotary position embedding of x [B, S, H, D] (out may be x: in place).
    theta None: 10000; rotary_dim None: D; style "neox" (pairs i, i + r/2) or
    "gptj" (pairs 2i, 2i + 1)."""
    with OpCall("rope", (x,), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.RopeDesc, position_offset=position_offset,
                             theta=0.0 if theta is None else theta,
                             rotary_dim=0 if rotary_dim is None else rotary_dim,
                             style=enum_value(_abi.ROPE_STYLES, style, "style"),
                             variant=call.variant)
        desc.x = call.input(x, "x")
        desc.y = call.output(out, _dims(desc.x) or (1,), desc.x.dtype, "out")
        return call.run(desc)


def swiglu(gate, up, *, out=None, variant=None, device=None, copy=None):
    """y = silu(gate) * up, elementwise."""
    with OpCall("swiglu", (gate, up), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.SwigluDesc, variant=call.variant)
        desc.gate = call.input(gate, "gate")
        desc.up = call.input(up, "up")
        desc.y = call.output(out, _dims(desc.gate) or (1,), desc.gate.dtype, "out")
        return call.run(desc)


def gelu(x, *, approximate="none", out=None, variant=None, device=None, copy=None):
    """y = gelu(x); approximate "none" (erf) or "tanh", as torch.nn.functional.gelu."""
    with OpCall("gelu", (x,), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.GeluDesc, variant=call.variant,
                             approximate=enum_value(_abi.GELU_APPROXIMATIONS, approximate,
                                                    "approximate"))
        desc.x = call.input(x, "x")
        desc.y = call.output(out, _dims(desc.x) or (1,), desc.x.dtype, "out")
        return call.run(desc)


def cross_entropy(logits, targets, *, ignore_index=-100, return_lse=False, lse=None, out=None,
                  variant=None, device=None, copy=None):
    """Per-row loss[r] = logsumexp(logits[r]) - logits[r, targets[r]] (f32 [R]);
    logits [R, V], targets int32 [R]; rows whose target is ignore_index get 0.
    With return_lse=True (or lse=) returns (loss, lse)."""
    with OpCall("cross_entropy", (logits, targets), device, copy, variant) as call:
        desc = _abi.new_desc(_abi.CrossEntropyDesc, ignore_index=ignore_index,
                             variant=call.variant)
        desc.logits = call.input(logits, "logits")
        desc.targets = call.input(targets, "targets")
        rows = (_dims(desc.logits) or (1,))[0]
        desc.loss = call.output(out, (rows,), _F32, "out")
        if return_lse or lse is not None:
            desc.lse = call.output(lse, (rows,), _F32, "lse")
        return call.run(desc)


OPS = {"gemm": gemm, "grouped_gemm": grouped_gemm, "attention": attention, "rmsnorm": rmsnorm,
       "layernorm": layernorm, "softmax": softmax, "rope": rope, "swiglu": swiglu, "gelu": gelu,
       "cross_entropy": cross_entropy, "kv_append": kv_append}
