/* SPDX-License-Identifier: Apache-2.0 */
// Shared by the shaders: the storage type of the dtype a build is for
// (-DDTYPE_F32, -DDTYPE_F16 or -DDTYPE_BF16), conversions with f32 math, and
// decoding of a tensor of any dtype read as 32-bit words.
//
//   ELEM_T / ELEM4_T     storage type of one element / of four elements
//   elem_load(e)         float of a stored element; elem_make(f) the reverse
//   elem4_load(v), elem4_make(f4)  the same for four elements
//   f32_to_f16_bits(f), f32_to_bf16_bits(f)  round to nearest even
//   words_decode4(code, uvec2)  four packed 16-bit elements of dtype `code`
//   word_decode(code, word, index)  element `index` of a tensor of dtype
//     `code` (WORD_F32, WORD_F16, WORD_BF16) whose 32-bit word holding it is
//     `word` (index >> 1 for 16-bit dtypes); WORD_INDEX(code, index) gives it.
#ifndef TESSERA_VULKAN_COMMON_GLSL
#define TESSERA_VULKAN_COMMON_GLSL

#if defined(DTYPE_F16) || defined(DTYPE_BF16)
#extension GL_EXT_shader_16bit_storage : require
#endif

#define WORD_F32 0u
#define WORD_F16 1u
#define WORD_BF16 2u
#define WORD_INDEX(code, index) ((code) == WORD_F32 ? (index) : ((index) >> 1))

uint f32_to_f16_bits(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) // inf or NaN
    return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) // rounds to 65520 or more
    return sign | 0x7c00u;
  if (a < 0x38800000u) { // subnormal or zero
    if (a < 0x33000000u)
      return sign;
    uint e = a >> 23;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint shift = 126u - e;
    uint h = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (h & 1u) != 0u))
      h++;
    return sign | h;
  }
  return sign | ((a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13);
}

uint f32_to_bf16_bits(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (x >> 16) | 0x40u; // quiet NaN
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

float f16_bits_to_f32(uint h) {
  return unpackHalf2x16(h).x;
}

float bf16_bits_to_f32(uint b) {
  return uintBitsToFloat(b << 16);
}

float word_decode(uint code, uint word, uint index) {
  if (code == WORD_F32)
    return uintBitsToFloat(word);
  uint bits = (index & 1u) != 0u ? word >> 16 : word & 0xffffu;
  return code == WORD_F16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}

// Four 16-bit elements of dtype `code` (WORD_F16 or WORD_BF16) packed in a
// uvec2, as floats.
vec4 words_decode4(uint code, uvec2 v) {
  if (code == WORD_F16)
    return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
  return vec4(uintBitsToFloat(v.x << 16), uintBitsToFloat(v.x & 0xffff0000u),
              uintBitsToFloat(v.y << 16), uintBitsToFloat(v.y & 0xffff0000u));
}

#if defined(DTYPE_F32)
#define ELEM_T float
#define ELEM4_T vec4
float elem_load(float v) { return v; }
float elem_make(float v) { return v; }
vec4 elem4_load(vec4 v) { return v; }
vec4 elem4_make(vec4 v) { return v; }
#elif defined(DTYPE_F16)
#define ELEM_T uint16_t
#define ELEM4_T uvec2
// Macros: a uint16_t may not be a function parameter with 16-bit storage only.
#define elem_load(v) f16_bits_to_f32(uint(v))
#define elem_make(v) uint16_t(f32_to_f16_bits(v))
vec4 elem4_load(uvec2 v) { return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y)); }
uvec2 elem4_make(vec4 v) {
  return uvec2(f32_to_f16_bits(v.x) | (f32_to_f16_bits(v.y) << 16),
               f32_to_f16_bits(v.z) | (f32_to_f16_bits(v.w) << 16));
}
#elif defined(DTYPE_BF16)
#define ELEM_T uint16_t
#define ELEM4_T uvec2
#define elem_load(v) bf16_bits_to_f32(uint(v))
#define elem_make(v) uint16_t(f32_to_bf16_bits(v))
vec4 elem4_load(uvec2 v) {
  return vec4(uintBitsToFloat(v.x << 16), uintBitsToFloat(v.x & 0xffff0000u),
              uintBitsToFloat(v.y << 16), uintBitsToFloat(v.y & 0xffff0000u));
}
uvec2 elem4_make(vec4 v) {
  return uvec2(f32_to_bf16_bits(v.x) | (f32_to_bf16_bits(v.y) << 16),
               f32_to_bf16_bits(v.z) | (f32_to_bf16_bits(v.w) << 16));
}
#endif

#endif
