/*
 * atomic_file.h - replacing a file so that it is never half written
 * (runtime/atomic_file.c): every file ember writes over another goes
 * through here (ember.save, safetensors weights, AOT models and headers,
 * compile-cache entries).
 *
 * The new contents go to a temporary file created beside the destination
 * (O_EXCL, so it never opens or truncates something already there), which
 * is fsynced, renamed over the destination and followed by an fsync of the
 * directory. A failure at any step (a full disk, a file size limit, an
 * I/O error) or a process killed mid-write leaves the old file as it was;
 * only the temporary file of a killed process stays behind, named
 * ".<name>.ember-tmp-...".
 *
 * The destination keeps its permission bits; a new one gets `mode` less
 * the umask, as open() would. A destination that is a symbolic link is
 * replaced where the link points (the link stays), as open() writes
 * through it. One that exists but is not a regular file (a device, a FIFO,
 * a directory) is refused with EM_ERR_VALUE: there is nothing to replace.
 *
 * Errors: EM_ERR_RUNTIME (with errno kept in `err`) naming the path and
 * the system's reason. Not thread-safe per object; any number of objects
 * (one per writer) may target one destination, the last commit winning.
 */
#ifndef EMBER_ATOMIC_FILE_H
#define EMBER_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "ember/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct em_atomic_file {
    int dirfd;      /* the destination's directory (owned unless borrowed_dir) */
    int fd;         /* the temporary file while open, else -1 */
    int err;        /* errno of the failure, 0 if none */
    int borrowed_dir;
    char name[256]; /* the destination's name in dirfd */
    char tmp[256];  /* the temporary file's name in dirfd */
    char where[4096]; /* the destination's path, for messages */
} em_atomic_file;

/* Starts replacing `path`: a->fd is open for writing on the temporary file.
 * On failure nothing is left to release. */
em_status em_atomic_open(em_atomic_file *a, const char *path, unsigned mode);
/* The same for `name` in the directory `dirfd` (borrowed: it stays open),
 * with `where` naming the directory in messages. `name` may not hold '/'. */
em_status em_atomic_open_at(em_atomic_file *a, int dirfd, const char *where, const char *name, unsigned mode);
/* Appends n bytes (all of them, or fails). */
em_status em_atomic_write(em_atomic_file *a, const void *p, size_t n);
/* The temporary file's full path (for a tool that writes it itself, such
 * as the linker: call em_atomic_close_fd first). */
void em_atomic_tmp_path(const em_atomic_file *a, char *out, size_t n);
/* Closes a->fd, leaving the temporary file in place for someone else to
 * write. */
void em_atomic_close_fd(em_atomic_file *a);
/* fsync, rename over the destination, fsync the directory. On failure
 * the temporary file is removed and the destination is untouched. Either
 * way `a` is finished. */
em_status em_atomic_commit(em_atomic_file *a);
/* Like em_atomic_commit, but only where the destination does not exist
 * yet: *existed says whether another writer's file was there first (then
 * it stays and this one's contents are dropped; still EM_OK). */
em_status em_atomic_commit_new(em_atomic_file *a, bool *existed);
/* Gives up: removes the temporary file. Safe after a failed commit. */
void em_atomic_abort(em_atomic_file *a);

#ifdef __cplusplus
}
#endif
#endif
