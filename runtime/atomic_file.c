/*
 * atomic_file.c - a file written beside its destination and renamed over
 * it once whole and on disk (see atomic_file.h for the contract).
 *
 * Everything after opening the destination's directory is relative to
 * that directory (openat, renameat, unlinkat), so a directory renamed or
 * swapped meanwhile cannot redirect the write. Depends on status.h only.
 */
#define _GNU_SOURCE
#include "ember/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static em_status fail(em_atomic_file *a, const char *what) {
    a->err = errno ? errno : EIO;
    return em_error(EM_ERR_RUNTIME, "cannot write %s: %s: %s", a->where, what, strerror(a->err));
}

/* A name for the temporary file no one else is using: the pid, a counter
 * and the clock, so racing writers (processes or threads) never share one. */
static void temp_name(em_atomic_file *a) {
    static unsigned long counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(a->tmp, sizeof a->tmp, ".%.160s.ember-tmp-%ld-%lu-%lx", a->name, (long)getpid(), c,
             (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)));
}

em_status em_atomic_open_at(em_atomic_file *a, int dirfd, const char *where, const char *name, unsigned mode) {
    a->fd = -1;
    a->err = 0;
    a->tmp[0] = 0;
    a->dirfd = dirfd;
    a->borrowed_dir = 1;
    snprintf(a->where, sizeof a->where, "%s/%s", where, name);
    if (!*name || strchr(name, '/') || strlen(name) >= sizeof a->name) {
        a->err = EINVAL;
        return em_error(EM_ERR_VALUE, "cannot write %s: not a file name", a->where);
    }
    snprintf(a->name, sizeof a->name, "%s", name);
    struct stat st;
    bool exists = fstatat(dirfd, name, &st, 0) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        a->err = EINVAL;
        return em_error(EM_ERR_VALUE, "cannot write %s: it exists and is not a regular file", a->where);
    }
    for (int tries = 0; tries < 100; tries++) {
        temp_name(a);
        a->fd = openat(dirfd, a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (a->fd >= 0 || errno != EEXIST) break;
    }
    if (a->fd < 0) {
        em_status s = fail(a, "cannot create a temporary file beside it");
        a->tmp[0] = 0;
        return s;
    }
    /* a replaced file keeps its permission bits, as writing it in place would */
    if (exists && fchmod(a->fd, st.st_mode & 07777) != 0) {
        em_status s = fail(a, "cannot give the new file the old one's permissions");
        em_atomic_abort(a);
        return s;
    }
    return EM_OK;
}

em_status em_atomic_open(em_atomic_file *a, const char *path, unsigned mode) {
    a->fd = a->dirfd = -1;
    a->tmp[0] = 0;
    a->borrowed_dir = 0;
    /* a symbolic link is written through: the file it names is replaced */
    char resolved[PATH_MAX];
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && realpath(path, resolved)) path = resolved;
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int n = slash ? snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) : snprintf(dir, sizeof dir, ".");
    if (slash == path) snprintf(dir, sizeof dir, "/");
    if (n < 0 || (size_t)n >= sizeof dir) {
        snprintf(a->where, sizeof a->where, "%.4000s", path);
        errno = ENAMETOOLONG;
        return fail(a, "the path is too long");
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(a->where, sizeof a->where, "%.4000s", path);
        return fail(a, "cannot open its directory");
    }
    em_status s = em_atomic_open_at(a, dfd, dir, name, mode);
    snprintf(a->where, sizeof a->where, "%.4000s", path);
    if (s != EM_OK) {
        close(dfd);
        a->dirfd = -1;
        return s;
    }
    a->borrowed_dir = 0; /* (ours from here: finish closes it) */
    return EM_OK;
}

em_status em_atomic_write(em_atomic_file *a, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(a->fd, c, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return fail(a, "writing");
        }
        c += w;
        n -= (size_t)w;
    }
    return EM_OK;
}

void em_atomic_tmp_path(const em_atomic_file *a, char *out, size_t n) {
    const char *slash = strrchr(a->where, '/');
    snprintf(out, n, "%.*s%s", slash ? (int)(slash - a->where + 1) : 0, a->where, a->tmp);
}

void em_atomic_close_fd(em_atomic_file *a) {
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
}

static void finish(em_atomic_file *a) {
    em_atomic_close_fd(a);
    if (a->dirfd >= 0 && !a->borrowed_dir) close(a->dirfd);
    a->dirfd = -1;
    a->tmp[0] = 0;
}

em_status em_atomic_commit(em_atomic_file *a) {
    if (!a->tmp[0]) return em_error(EM_ERR_RUNTIME, "cannot write %s: already finished", a->where);
    /* (a file someone else wrote, such as the linker's output, is opened to be synced) */
    int fd = a->fd >= 0 ? a->fd : openat(a->dirfd, a->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        em_status s = fail(a, "syncing it to disk");
        if (fd >= 0 && fd != a->fd) close(fd);
        em_atomic_abort(a);
        return s;
    }
    if (fd != a->fd) close(fd);
    int closed = a->fd >= 0 ? close(a->fd) : 0;
    a->fd = -1;
    if (closed != 0) {
        em_status s = fail(a, "closing it");
        em_atomic_abort(a);
        return s;
    }
    if (renameat(a->dirfd, a->tmp, a->dirfd, a->name) != 0) {
        em_status s = fail(a, "renaming the new file into place");
        em_atomic_abort(a);
        return s;
    }
    a->tmp[0] = 0;
    /* the rename itself on disk (some file systems cannot sync a directory) */
    if (fsync(a->dirfd) != 0 && errno != EINVAL && errno != EROFS) {
        em_status s = fail(a, "syncing its directory");
        finish(a);
        return s;
    }
    finish(a);
    return EM_OK;
}

em_status em_atomic_commit_new(em_atomic_file *a, bool *existed) {
    *existed = false;
    if (a->fd < 0 || fsync(a->fd) != 0) {
        em_status s = fail(a, "syncing it to disk");
        em_atomic_abort(a);
        return s;
    }
    /* link, unlike rename, refuses a destination that exists */
    if (linkat(a->dirfd, a->tmp, a->dirfd, a->name, 0) != 0) {
        if (errno != EEXIST) {
            em_status s = fail(a, "linking the new file into place");
            em_atomic_abort(a);
            return s;
        }
        *existed = true;
    }
    if (!*existed) fsync(a->dirfd);
    em_atomic_abort(a); /* (the temporary name goes; the linked one stays) */
    return EM_OK;
}

void em_atomic_abort(em_atomic_file *a) {
    em_atomic_close_fd(a);
    if (a->tmp[0] && a->dirfd >= 0) unlinkat(a->dirfd, a->tmp, 0);
    finish(a);
}
