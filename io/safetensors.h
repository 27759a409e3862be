/*
 * safetensors.h - the safetensors format in C (not public): what an
 * ahead-of-time model reads its external weights from and exchanges its
 * state as, with no Python. The format
 * (https://github.com/huggingface/safetensors): an 8-byte little-endian
 * header length, a JSON object naming each tensor's dtype, shape and byte
 * range, then the bytes. ember.save and ember.load (Python) read and write
 * the same files.
 *
 * Files are untrusted: the reader checks the header's length against the
 * file's, every range against the data, every shape against its range,
 * and bounds the JSON's nesting; a failure names the file and the offset.
 */
#ifndef EMBER_SAFETENSORS_H
#define EMBER_SAFETENSORS_H

#include "ember/tensor.h"

typedef struct em_st_tensor {
    const char *name;
    em_dtype dtype;
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    const void *data; /* writing: the bytes; reading: into the file's bytes */
    size_t nbytes;
} em_st_tensor;

/* Writes tensors[0..n) (contiguous bytes each) to path, atomically (a
 * temporary file renamed into place). */
em_status em_st_write(const char *path, const em_st_tensor *tensors, int n);

/* Writes tensors[i] (any layout) as names[i], i < n, like em_st_write. */
em_status em_st_write_tensors(const char *path, em_tensor *const *tensors, const char *const *names, int n);

typedef struct em_st_file {
    unsigned char *bytes; /* the whole file */
    size_t size;
    em_st_tensor *tensors;
    int n;
    char *names; /* the names' storage */
} em_st_file;

/* Reads and checks the file at path. On failure f is empty. */
em_status em_st_read(const char *path, em_st_file *f);
/* Checks a file's bytes (malloc'd; f owns them from here, also on
 * failure), named `name` in errors. */
em_status em_st_parse(unsigned char *bytes, size_t size, const char *name, em_st_file *f);
/* The tensor called name, or NULL. */
const em_st_tensor *em_st_find(const em_st_file *f, const char *name);
void em_st_close(em_st_file *f);

#endif
