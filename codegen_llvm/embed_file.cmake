# Writes the bytes of INPUT as a C array named NAME into OUTPUT.
# Usage: cmake -DINPUT=f.bc -DOUTPUT=f.c -DNAME=sym -P embed_file.cmake
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUTPUT} "/* Generated from ${INPUT}: do not edit. */\n#include <stddef.h>\nconst unsigned char ${NAME}[] = {\n${bytes}\n};\nconst size_t ${NAME}_size = ${size};\n")
