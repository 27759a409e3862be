/*
 * fuzz_ir.c - IR text, the parser, the verifier and the printer: any bytes
 * either parse or give an error (never a crash, a hang or a read past the
 * text), and a graph that parses and verifies prints as text that parses
 * back, verifies, and prints the same again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ir.h"
#include "ember/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* (a NUL inside ends the text early: still any bytes before it) */
    em_ir_graph *g = em_ir_parse(text, "fuzz.ir");
    free(text);
    if (!g) return 0;
    bool verified = em_ir_verify(g) == EM_OK;
    char *first = em_ir_print(g);
    em_ir_graph_free(g);
    if (!first || !verified) {
        free(first);
        return 0;
    }
    em_ir_graph *again = em_ir_parse(first, "printed.ir");
    if (!again || em_ir_verify(again) != EM_OK) __builtin_trap(); /* printed text must read back */
    char *second = em_ir_print(again);
    if (!second || strcmp(first, second) != 0) __builtin_trap(); /* and print the same */
    em_ir_graph_free(again);
    free(first);
    free(second);
    return 0;
}
