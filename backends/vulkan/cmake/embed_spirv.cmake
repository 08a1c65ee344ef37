# SPDX-License-Identifier: Apache-2.0
# Writes the SPIR-V file INPUT as a C byte array named vulkan_spv_<NAME>
# (4-byte aligned: Vulkan reads it as 32-bit words) into OUTPUT.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR bytes "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n  " body "${body}")
file(WRITE ${OUTPUT}
  "/* Generated from ${NAME}.spv by embed_spirv.cmake. */\n#include <stddef.h>\n"
  "_Alignas(4) const unsigned char vulkan_spv_${NAME}[] = {\n  ${body}\n};\n"
  "const size_t vulkan_spv_${NAME}_size = ${bytes};\n")
