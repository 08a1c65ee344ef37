# SPDX-License-Identifier: Apache-2.0
"""Shared by the tests: the devices to run on, dtype conversions (bf16 through
uint16 bit patterns), float64 references of every op, and error measures."""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tessera  # noqa: E402  (the package next to these tests, not an installed one)

# Normwise relative error allowed per dtype: a few units of the output's
# rounding plus f32 accumulation; a wrong kernel (or a missed epilogue) is
# orders of magnitude off.
TOLERANCE = {"f32": 3e-5, "f16": 3e-3, "bf16": 2e-2}
FLOAT_DTYPES = ("f32", "f16", "bf16")


def host_wrap_refusal(device):
    """None when the device wraps NumPy memory in place, else the library's
    reason (probed with a tiny array)."""
    probe = np.zeros(16, np.float32)
    try:
        tessera.from_dlpack(probe, device=device, copy=False).close()
        return None
    except tessera.Unsupported as error:
        return str(error)


def devices_under_test():
    """cpu:0 always; every Vulkan device present (lavapipe in CI)."""
    selected = [tessera.device("cpu:0")]
    selected += [device for device in tessera.devices() if device.backend == "vulkan"]
    return selected


def copy_mode(device):
    """copy= for the op tests: in place (None) where the device wraps host
    memory or copies by itself, True on cpu while it cannot wrap yet."""
    if device.backend == "cpu" and host_wrap_refusal(device) is not None:
        return True
    return None


def bf16_bits(values):
    """float64/float32 -> bf16 bit patterns (uint16), rounding to nearest even."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def make(rng, shape, dtype, scale=1.0):
    """(array to pass to tessera, its exact values in float64)."""
    values = rng.standard_normal(shape) * scale
    if dtype == "bf16":
        bits = bf16_bits(values)
        return tessera.bfloat16(bits), bf16_values(bits).astype(np.float64)
    array = values.astype({"f32": np.float32, "f16": np.float16}[dtype])
    return array, array.astype(np.float64)


def values_of(result, dtype):
    """float64 values of an op's result (NumPy; bf16 results are uint16 bits)."""
    if isinstance(result, tessera.Tensor):
        result = result.numpy()
    if dtype == "bf16" and result.dtype == np.uint16:
        return bf16_values(result).astype(np.float64)
    return np.asarray(result, np.float64)


def relative_error(actual, reference):
    reference = np.asarray(reference, np.float64)
    denominator = np.linalg.norm(reference.ravel())
    return np.linalg.norm((np.asarray(actual, np.float64) - reference).ravel()) / max(
        denominator, 1e-30)


# --- float64 references ----------------------------------------------------
_erf = np.vectorize(math.erf)


def gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


ACTIVATIONS = {None: lambda x: x, "relu": lambda x: np.maximum(x, 0.0), "gelu_tanh": gelu_tanh,
               "gelu_erf": gelu_erf, "silu": silu}


def softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def logsumexp(x, axis=-1):
    peak = np.max(x, axis=axis, keepdims=True)
    return (peak + np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True))).squeeze(axis)


def attention(q, k, v, scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0):
    """q [B, Sq, Hq, D], k/v [B, Skv, Hkv, D] -> (o [B, Sq, Hq, D], lse [B, Hq, Sq])."""
    batch, sq, hq, d = q.shape
    skv, hkv = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    if causal:
        window_right = 0
    group = hq // hkv
    o = np.zeros((batch, sq, hq, v.shape[3]))
    lse = np.zeros((batch, hq, sq))
    positions = np.arange(sq)[:, None] + skv - sq
    keys = np.arange(skv)[None, :]
    visible = np.ones((sq, skv), bool)
    if window_right >= 0:
        visible &= keys <= positions + window_right
    if window_left >= 0:
        visible &= keys >= positions - window_left
    for b in range(batch):
        for h in range(hq):
            scores = scale * q[b, :, h, :] @ k[b, :, h // group, :].T
            if softcap > 0.0:
                scores = softcap * np.tanh(scores / softcap)
            scores = np.where(visible, scores, -np.inf)
            lse[b, h] = logsumexp(scores)
            o[b, :, h, :] = softmax(scores) @ v[b, :, h // group, :]
    return o, lse


def rmsnorm(x, weight=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def layernorm(x, weight=None, bias=None, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(np.var(x, axis=-1, keepdims=True) + eps)
    y = y if weight is None else y * weight
    return y if bias is None else y + bias


def rope(x, position_offset=0, theta=10000.0, rotary_dim=None, style="neox"):
    """x [B, S, H, D]."""
    d = x.shape[3]
    rotary = d if rotary_dim is None else rotary_dim
    half = rotary // 2
    positions = (position_offset + np.arange(x.shape[1]))[None, :, None, None]
    angles = positions * theta ** (-2.0 * np.arange(half) / rotary)
    cos, sin = np.cos(angles), np.sin(angles)
    y = x.copy()
    if style == "neox":
        first, second = x[..., :half], x[..., half:rotary]
        y[..., :half] = first * cos - second * sin
        y[..., half:rotary] = second * cos + first * sin
    else:
        first, second = x[..., 0:rotary:2], x[..., 1:rotary:2]
        y[..., 0:rotary:2] = first * cos - second * sin
        y[..., 1:rotary:2] = second * cos + first * sin
    return y


def cross_entropy(logits, targets, ignore_index=-100):
    lse = logsumexp(logits)
    picked = logits[np.arange(len(targets)), np.clip(targets, 0, logits.shape[1] - 1)]
    loss = np.where(targets == ignore_index, 0.0, lse - picked)
    return loss, lse
