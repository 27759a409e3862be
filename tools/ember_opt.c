/*
 * ember-opt - reads IR text, runs passes, prints IR.
 *
 *   ember-opt [--pass=NAME]... [--passes=a,b] [--no-verify] [--split-input-file]
 *             [--report] [--partition=I,R] [--list-passes] [-o FILE] [FILE|-]
 *
 * --partition=I,R reads each graph as a joint forward-backward graph whose
 * first I params are the forward's inputs and first R results the
 * forward's (passes/partition.c), splits it and prints the forward graph,
 * what the split saved and recomputed (as comments), then the backward
 * graph, each after the passes.
 *
 * --report prints what the passes did (the lines explain() shows) as
 * comments before each graph.
 *
 * Every graph is verified after parsing and after each pass (unless
 * --no-verify). With --split-input-file the input is cut at lines that start
 * with "// -----" and each part is processed alone (errors keep the line
 * numbers of the whole file); outputs are separated the same way. Exits 1 on
 * any error, with the message on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/passes.h"

#define MAX_PASSES 64

static void usage(FILE *f) {
    fprintf(f, "usage: ember-opt [--pass=NAME]... [--passes=a,b] [--no-verify] "
               "[--split-input-file] [--report] [--partition=I,R] [--list-passes] [-o FILE] [FILE|-]\n");
}

static char *read_all(FILE *f) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
    }
    if (buf) buf[len] = '\0';
    return buf;
}

static bool print_report;
static int partition_inputs = -1, partition_results = -1; /* --partition */

static int transform(em_ir_graph *g, const char *name, const char **passes, int n_passes, bool verify,
                     FILE *out);

/* --partition: splits the joint graph g (freed) and transforms both halves. */
static int split(em_ir_graph *g, const char *name, const char **passes, int n_passes, bool verify, FILE *out) {
    em_partition p;
    em_status st = em_partition_joint(g, partition_inputs, partition_results, partition_results, true, &p);
    em_ir_graph_free(g);
    if (st != EM_OK) {
        fprintf(stderr, "%s: error: %s\n", name, em_last_error());
        return 1;
    }
    int rc = transform(p.forward, name, passes, n_passes, verify, out);
    p.forward = NULL;
    char *r = p.report;
    for (char *line = strtok(r, "\n"); line && !rc; line = strtok(NULL, "\n")) fprintf(out, "// %s\n", line);
    if (!rc) rc = transform(p.backward, name, passes, n_passes, verify, out);
    p.backward = NULL;
    em_partition_clear(&p);
    return rc;
}

/* Parses, verifies and transforms one graph; prints it to out. */
static int process(const char *text, const char *name, const char **passes, int n_passes,
                   bool verify, FILE *out) {
    em_ir_graph *g = em_ir_parse(text, name);
    if (!g) {
        fprintf(stderr, "%s\n", em_last_error());
        return 1;
    }
    if (verify && em_ir_verify(g) != EM_OK) {
        fprintf(stderr, "%s: error: %s\n", name, em_last_error());
        em_ir_graph_free(g);
        return 1;
    }
    if (partition_inputs >= 0) return split(g, name, passes, n_passes, verify, out);
    return transform(g, name, passes, n_passes, verify, out);
}

/* Runs the passes on g (freed) and prints it. */
static int transform(em_ir_graph *g, const char *name, const char **passes, int n_passes, bool verify,
                     FILE *out) {
    int rc = 0;
    em_strbuf report;
    em_strbuf_init(&report);
    if (em_pass_run_pipeline(g, passes, n_passes, verify, NULL, NULL, &report) != EM_OK) {
        fprintf(stderr, "%s: error: %s\n", name, em_last_error());
        rc = 1;
    } else {
        char *r = em_strbuf_take(&report);
        for (char *line = r ? strtok(r, "\n") : NULL; line && print_report; line = strtok(NULL, "\n"))
            fprintf(out, "// %s\n", line);
        free(r);
        char *s = em_ir_print(g);
        if (s) fputs(s, out);
        free(s);
    }
    em_strbuf_free(&report);
    em_ir_graph_free(g);
    return rc;
}

int main(int argc, char **argv) {
    const char *passes[MAX_PASSES], *input = "-", *output = NULL;
    int n_passes = 0;
    bool verify = true, split = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--pass=", 7) == 0 || strncmp(a, "--passes=", 9) == 0) {
            char *list = strdup(strchr(a, '=') + 1);
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (n_passes == MAX_PASSES || !em_pass_find(tok)) {
                    fprintf(stderr, "ember-opt: unknown pass '%s' (see --list-passes)\n", tok);
                    return 1;
                }
                passes[n_passes++] = em_pass_find(tok)->name;
            }
            free(list);
        } else if (strcmp(a, "--no-verify") == 0) {
            verify = false;
        } else if (strcmp(a, "--split-input-file") == 0) {
            split = true;
        } else if (strncmp(a, "--partition=", 12) == 0) {
            if (sscanf(a + 12, "%d,%d", &partition_inputs, &partition_results) != 2 || partition_inputs < 0 ||
                partition_results < 0) {
                fprintf(stderr, "ember-opt: --partition wants two counts, I,R: '%s'\n", a);
                return 1;
            }
        } else if (strcmp(a, "--report") == 0) {
            print_report = true;
        } else if (strcmp(a, "--list-passes") == 0) {
            int n;
            const em_pass_info *all = em_pass_all(&n);
            for (int k = 0; k < n; k++) printf("%-8s %s\n", all[k].name, all[k].help);
            return 0;
        } else if (strcmp(a, "-o") == 0 && i + 1 < argc) {
            output = argv[++i];
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "ember-opt: unknown option '%s'\n", a);
            usage(stderr);
            return 1;
        } else {
            input = a;
        }
    }
    FILE *in = strcmp(input, "-") == 0 ? stdin : fopen(input, "rb");
    if (!in) {
        fprintf(stderr, "ember-opt: cannot open '%s'\n", input);
        return 1;
    }
    char *text = read_all(in);
    if (in != stdin) fclose(in);
    FILE *out = output ? fopen(output, "w") : stdout;
    if (!text || !out) {
        fprintf(stderr, "ember-opt: cannot read '%s' or write output\n", input);
        return 1;
    }
    const char *name = strcmp(input, "-") == 0 ? "<stdin>" : input;
    int rc = 0;
    if (!split) {
        rc = process(text, name, passes, n_passes, verify, out);
    } else {
        /* Each part is preceded by as many newlines as lines before it, so
         * error positions refer to the whole file. */
        char *part = text;
        int lines_before = 0, first = 1;
        while (part) {
            char *sep = part;
            while ((sep = strstr(sep, "// -----")) && !(sep == text || sep[-1] == '\n')) sep++;
            if (sep) *sep = '\0';
            size_t n = strlen(part);
            char *chunk = malloc((size_t)lines_before + n + 1);
            memset(chunk, '\n', (size_t)lines_before);
            memcpy(chunk + lines_before, part, n + 1);
            if (!first) fputs("// -----\n", out);
            first = 0;
            rc |= process(chunk, name, passes, n_passes, verify, out);
            free(chunk);
            for (const char *c = part; *c; c++) lines_before += *c == '\n';
            if (sep) {
                part = strchr(sep + 1, '\n');
                lines_before++;
                if (part) part++;
            } else {
                part = NULL;
            }
        }
    }
    free(text);
    if (out != stdout) fclose(out);
    return rc;
}
