#version 450
// SPDX-License-Identifier: Apache-2.0
// Scalar f32 FMA peak, as a reference point for the cooperative-matrix kernels.
// Per invocation and iteration: 8 independent vec4 chains, 2 FMAs each = 16 vec4 FMAs
// = 128 FLOP; a workgroup of 128 invocations does 16384 FLOP per iteration.
layout(local_size_x = 128) in;
layout(push_constant) uniform Push { uint iters; };
layout(set = 0, binding = 0) writeonly buffer Out { vec4 data[]; } outbuf;

void main() {
  // Run-time dependent start values, so nothing can be folded.
  float s = float(gl_LocalInvocationIndex + iters) * 1e-6;
  vec4 m = vec4(0.999, 0.998, 0.997, 0.996);
  vec4 c = vec4(s, 2.0 * s, 3.0 * s, 4.0 * s);
  vec4 x0 = c + 0.1, x1 = c + 0.2, x2 = c + 0.3, x3 = c + 0.4;
  vec4 x4 = c + 0.5, x5 = c + 0.6, x6 = c + 0.7, x7 = c + 0.8;
  for (uint it = 0; it < iters; ++it) {
    // fma() so the SPIR-V says Fma, not a separate multiply and add.
    x0 = fma(x0, m, c); x1 = fma(x1, m, c); x2 = fma(x2, m, c); x3 = fma(x3, m, c);
    x4 = fma(x4, m, c); x5 = fma(x5, m, c); x6 = fma(x6, m, c); x7 = fma(x7, m, c);
    x0 = fma(x0, m, c); x1 = fma(x1, m, c); x2 = fma(x2, m, c); x3 = fma(x3, m, c);
    x4 = fma(x4, m, c); x5 = fma(x5, m, c); x6 = fma(x6, m, c); x7 = fma(x7, m, c);
  }
  // 8 vec4 = 128 bytes per invocation, 16 KiB per workgroup: inside its 64 KiB slice.
  uint base = gl_WorkGroupID.x * (65536u / 16u) + gl_LocalInvocationIndex * 8u;
  outbuf.data[base + 0] = x0; outbuf.data[base + 1] = x1;
  outbuf.data[base + 2] = x2; outbuf.data[base + 3] = x3;
  outbuf.data[base + 4] = x4; outbuf.data[base + 5] = x5;
  outbuf.data[base + 6] = x6; outbuf.data[base + 7] = x7;
}
