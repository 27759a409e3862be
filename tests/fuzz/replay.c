/*
 * replay.c - runs a fuzz harness's LLVMFuzzerTestOneInput over files (and
 * every file in directories) named on the command line, in any build (no
 * libFuzzer needed): how the ordinary test suite replays each harness's
 * seed corpus and every input a fuzzer ever found (tests/fuzz/regressions).
 * Exits non-zero if a named path cannot be read; a crash is a crash.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int files;

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (!buf) return 1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    files++;
    return 0;
}

static int run_path(const char *path) {
    struct stat s;
    if (stat(path, &s) != 0) {
        fprintf(stderr, "replay: no such file or directory: %s\n", path);
        return 1;
    }
    if (!S_ISDIR(s.st_mode)) return run_file(path);
    DIR *d = opendir(path);
    int rc = d ? 0 : 1;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        rc |= run_path(p);
    }
    if (d) closedir(d);
    return rc;
}

int main(int argc, char **argv) {
    int rc = 0;
    for (int i = 1; i < argc; i++) rc |= run_path(argv[i]);
    printf("replayed %d inputs\n", files);
    return rc;
}
