# SPDX-License-Identifier: Apache-2.0
# Writes the text file INPUT as a NUL-terminated C char array named SYMBOL
# into OUTPUT (bytes, not a string literal: no length limit, no escaping).
file(READ ${INPUT} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n  " body "${body}")
get_filename_component(name ${INPUT} NAME)
file(WRITE ${OUTPUT}
  "/* Generated from ${name} by embed_source.cmake. */\n"
  "const char ${SYMBOL}[] = {\n  ${body}0x00};\n")
