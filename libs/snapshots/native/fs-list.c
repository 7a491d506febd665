/*
 * Assay's directory lister: one call lists a directory and lstats every entry, relative to the directory's own
 * file descriptor, and returns everything packed in one buffer.
 *
 * Why it exists: a re-snapshot of a large, mostly unchanged tree is a walk of tens of thousands of lstat calls,
 * and through node:fs each costs several times the system call itself (an object per result, a string path
 * resolved from the root each time). Here one call per directory does the system calls and the JavaScript side
 * decodes only what it needs, and a prefetcher's own threads list the tree ahead of the walk, on the other core,
 * while the walk works on the directories already listed. Each listing also carries a summary (counts, bytes, and
 * the files' part of the walk's listing key, sorted), so an unchanged directory is recognised without decoding it.
 *
 * Safety: the directory is opened with O_NOFOLLOW | O_DIRECTORY and its (dev, ino) must be the ones the caller
 * expects (the lstat of it seen in its parent's listing), so a directory swapped for a symlink or another
 * directory is reported, never listed. Entries are lstat'ed with fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW), so no
 * path component is resolved again. An entry that disappears between readdir and its lstat is left out, as if
 * it had been removed before the listing.
 *
 * The record layout is documented in libs/snapshots/src/adapters/native-lister.ts (the only reader).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define HEADER_BYTES 48
#define FIXED_BYTES 64
#define SIG_MAX 160

enum { KIND_UNKNOWN = 0, KIND_FILE = 1, KIND_DIR = 2, KIND_SYMLINK = 3, KIND_FIFO = 4, KIND_SOCKET = 5, KIND_CHR = 6, KIND_BLK = 7 };

/* Failure codes beyond errno (negative, so they never collide). */
#define ERR_CHANGED (-1000)
#define ERR_NOMEM (-1001)

typedef struct {
  uint8_t *data;
  size_t len;
  size_t cap;
} out_buf;

static int buf_reserve(out_buf *b, size_t more) {
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + more) cap *= 2;
  uint8_t *p = realloc(b->data, cap);
  if (!p) return -1;
  b->data = p;
  b->cap = cap;
  return 0;
}

static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

static uint8_t kind_of(mode_t m) {
  if (S_ISREG(m)) return KIND_FILE;
  if (S_ISDIR(m)) return KIND_DIR;
  if (S_ISLNK(m)) return KIND_SYMLINK;
  if (S_ISFIFO(m)) return KIND_FIFO;
  if (S_ISSOCK(m)) return KIND_SOCKET;
  if (S_ISCHR(m)) return KIND_CHR;
  if (S_ISBLK(m)) return KIND_BLK;
  return KIND_UNKNOWN;
}

static int is_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return 0;
  return 1;
}

/* The walk's "plain" names: printable ASCII except '/', and not "..". Only directories of such names take the
 * fast path that compares the files' key without decoding entries. */
static int is_plain(const char *s, size_t n) {
  if (n == 0 || n > 255 || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c > 0x7e || c == 0x2f) return 0;
  }
  return 1;
}

static int by_name(const void *a, const void *b, void *base) {
  const uint8_t *d = base;
  const uint8_t *ra = d + *(const uint32_t *)a, *rb = d + *(const uint32_t *)b;
  size_t la = (size_t)ra[2] | (size_t)ra[3] << 8, lb = (size_t)rb[2] | (size_t)rb[3] << 8;
  int c = memcmp(ra + FIXED_BYTES, rb + FIXED_BYTES, la < lb ? la : lb);
  return c != 0 ? c : (la > lb) - (la < lb);
}

static int64_t time_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000LL + (int64_t)t.tv_nsec; }

/*
 * Lists `path` into `out`. Returns 0, an errno value (> 0) with `*failed_step` set, or ERR_CHANGED when the
 * directory is not the one expected. `failed_name` receives the entry whose lstat failed, if any.
 */
static int list_dir(const char *path, uint64_t expect_dev, uint64_t expect_ino, int check, out_buf *out, const char **failed_step,
                    char *failed_name, size_t failed_name_cap) {
  *failed_step = "open";
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) return ERR_CHANGED;
    return errno;
  }
  struct stat self;
  if (fstat(fd, &self) != 0) {
    int e = errno;
    close(fd);
    *failed_step = "fstat";
    return e;
  }
  if (check && ((uint64_t)self.st_dev != expect_dev || (uint64_t)self.st_ino != expect_ino)) {
    close(fd);
    return ERR_CHANGED;
  }
  DIR *dir = fdopendir(fd);
  if (!dir) {
    int e = errno;
    close(fd);
    *failed_step = "fdopendir";
    return e;
  }
  if (buf_reserve(out, HEADER_BYTES) != 0) {
    closedir(dir);
    return ERR_NOMEM;
  }
  memset(out->data, 0, HEADER_BYTES);
  out->len = HEADER_BYTES;
  uint32_t count = 0, files = 0, dirs = 0, others = 0, plain = 1;
  uint64_t file_bytes = 0, max_file = 0;
  uint32_t *file_recs = NULL;
  size_t cap_file_recs = 0;
  char sig[SIG_MAX];
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(dir);
    if (!e) {
      if (errno != 0) {
        int err = errno;
        closedir(dir);
        free(file_recs);
        *failed_step = "readdir";
        return err;
      }
      break;
    }
    const char *name = e->d_name;
    if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
    struct stat st;
    if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue; /* removed since readdir */
      int err = errno;
      snprintf(failed_name, failed_name_cap, "%s", name);
      closedir(dir);
      free(file_recs);
      *failed_step = "lstat";
      return err;
    }
    size_t name_len = strlen(name);
    int64_t mtime = time_ns(st.st_mtim), ctime = time_ns(st.st_ctim);
    int sig_len = snprintf(sig, sizeof sig, "%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIu32 ":%" PRId64 ":%" PRId64, (uint64_t)st.st_dev,
                           (uint64_t)st.st_ino, (uint64_t)st.st_size, (uint32_t)st.st_mode, mtime, ctime);
    size_t rec = FIXED_BYTES + name_len + (size_t)sig_len;
    size_t padded = (rec + 7) & ~(size_t)7;
    if (buf_reserve(out, padded) != 0) {
      closedir(dir);
      free(file_recs);
      return ERR_NOMEM;
    }
    uint8_t kind = kind_of(st.st_mode);
    if (!is_plain(name, name_len)) plain = 0;
    if (kind == KIND_FILE) {
      if (files == cap_file_recs) {
        size_t cap = cap_file_recs ? cap_file_recs * 2 : 64;
        uint32_t *r = realloc(file_recs, cap * sizeof *r);
        if (!r) {
          closedir(dir);
          free(file_recs);
          return ERR_NOMEM;
        }
        file_recs = r;
        cap_file_recs = cap;
      }
      file_recs[files++] = (uint32_t)out->len;
      file_bytes += (uint64_t)st.st_size;
      if ((uint64_t)st.st_size > max_file) max_file = (uint64_t)st.st_size;
    } else if (kind == KIND_DIR) {
      dirs++;
    } else {
      others++;
    }
    uint8_t *p = out->data + out->len;
    memset(p, 0, padded);
    p[0] = kind;
    p[1] = is_ascii(name, name_len) ? 1 : 0;
    put_u16(p + 2, (uint16_t)name_len);
    put_u16(p + 4, (uint16_t)sig_len);
    put_u32(p + 8, (uint32_t)st.st_mode);
    put_u32(p + 12, st.st_nlink > 0xffffffffu ? 0xffffffffu : (uint32_t)st.st_nlink);
    put_u64(p + 16, (uint64_t)st.st_dev);
    put_u64(p + 24, (uint64_t)st.st_ino);
    put_u64(p + 32, (uint64_t)st.st_size);
    put_u64(p + 40, (uint64_t)mtime);
    put_u64(p + 48, (uint64_t)ctime);
    memcpy(p + FIXED_BYTES, name, name_len);
    memcpy(p + FIXED_BYTES + name_len, sig, (size_t)sig_len);
    out->len += padded;
    count++;
  }
  closedir(dir);
  /* The files' key: `f\0name\0sig\n` for every regular file, in byte order of names. */
  qsort_r(file_recs, files, sizeof *file_recs, by_name, out->data);
  size_t key_at = out->len, key_len = 0;
  for (uint32_t i = 0; i < files; i++) {
    const uint8_t *r = out->data + file_recs[i];
    key_len += 4 + ((size_t)r[2] | (size_t)r[3] << 8) + ((size_t)r[4] | (size_t)r[5] << 8);
  }
  if (buf_reserve(out, key_len + 8) != 0) {
    free(file_recs);
    return ERR_NOMEM;
  }
  uint8_t *k = out->data + key_at;
  for (uint32_t i = 0; i < files; i++) {
    const uint8_t *r = out->data + file_recs[i];
    size_t nl = (size_t)r[2] | (size_t)r[3] << 8, sl = (size_t)r[4] | (size_t)r[5] << 8;
    *k++ = 'f';
    *k++ = 0;
    memcpy(k, r + FIXED_BYTES, nl);
    k += nl;
    *k++ = 0;
    memcpy(k, r + FIXED_BYTES + nl, sl);
    k += sl;
    *k++ = '\n';
  }
  free(file_recs);
  out->len = key_at + key_len;
  /* Subdirectories first: the walk often needs only them (an unchanged directory), and stops reading there. */
  if (dirs > 0 && dirs < count) {
    size_t span = key_at - HEADER_BYTES;
    uint8_t *tmp = malloc(span);
    if (!tmp) return ERR_NOMEM;
    size_t w = 0;
    for (int pass = 0; pass < 2; pass++) {
      size_t at = HEADER_BYTES;
      for (uint32_t i = 0; i < count; i++) {
        const uint8_t *r = out->data + at;
        size_t len = (FIXED_BYTES + ((size_t)r[2] | (size_t)r[3] << 8) + ((size_t)r[4] | (size_t)r[5] << 8) + 7) & ~(size_t)7;
        if ((r[0] == KIND_DIR) == (pass == 0)) {
          memcpy(tmp + w, r, len);
          w += len;
        }
        at += len;
      }
    }
    memcpy(out->data + HEADER_BYTES, tmp, span);
    free(tmp);
  }
  put_u32(out->data, count);
  put_u32(out->data + 4, (uint32_t)out->len);
  put_u32(out->data + 8, files);
  put_u32(out->data + 12, dirs);
  put_u32(out->data + 16, others);
  put_u32(out->data + 20, plain);
  put_u64(out->data + 24, file_bytes);
  put_u64(out->data + 32, max_file);
  put_u32(out->data + 40, (uint32_t)key_at);
  put_u32(out->data + 44, (uint32_t)key_len);
  return 0;
}

/* ---- JavaScript glue ---------------------------------------------------------------------------------------- */

#define CALL(env, expr)                                                   \
  do {                                                                    \
    if ((expr) != napi_ok) {                                              \
      napi_throw_error((env), "ASSAY_NATIVE", "native call failed: " #expr); \
      return NULL;                                                        \
    }                                                                     \
  } while (0)

typedef struct {
  char *path;
  uint64_t dev, ino;
  int check;
} request;

/* Reads (path, dev, ino) from the arguments; dev and ino are BigInts, or undefined to skip the identity check. */
static int read_request(napi_env env, napi_value *argv, size_t argc, request *req) {
  size_t len = 0;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], NULL, 0, &len) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "listDir(path, dev?, ino?): path must be a string");
    return -1;
  }
  req->path = malloc(len + 1);
  if (!req->path) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return -1;
  }
  napi_get_value_string_utf8(env, argv[0], req->path, len + 1, &len);
  req->check = 0;
  if (argc >= 3) {
    napi_valuetype t1, t2;
    napi_typeof(env, argv[1], &t1);
    napi_typeof(env, argv[2], &t2);
    if (t1 == napi_bigint && t2 == napi_bigint) {
      bool lossless;
      napi_get_value_bigint_uint64(env, argv[1], &req->dev, &lossless);
      napi_get_value_bigint_uint64(env, argv[2], &req->ino, &lossless);
      req->check = 1;
    }
  }
  return 0;
}

/* An Error like node:fs's: message, code (the errno name, or ASSAY_DIR_CHANGED), syscall, path. */
static napi_value make_error(napi_env env, int rc, const char *step, const char *path, const char *entry) {
  const char *code = rc == ERR_CHANGED ? "ASSAY_DIR_CHANGED" : rc == ERR_NOMEM ? "ENOMEM" : uv_err_name(-rc);
  char msg[4096];
  if (rc == ERR_CHANGED)
    snprintf(msg, sizeof msg, "%s is no longer the directory that was listed", path);
  else
    snprintf(msg, sizeof msg, "%s: %s, %s '%s%s%s'", code, rc == ERR_NOMEM ? "out of memory" : strerror(rc), step, path,
             entry && entry[0] ? "/" : "", entry ? entry : "");
  napi_value m, c, err, s, p;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m);
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
  napi_create_error(env, c, m, &err);
  napi_set_named_property(env, err, "code", c);
  napi_create_string_utf8(env, step, NAPI_AUTO_LENGTH, &s);
  napi_set_named_property(env, err, "syscall", s);
  napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &p);
  napi_set_named_property(env, err, "path", p);
  return err;
}

static napi_value list_sync(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  request req;
  if (read_request(env, argv, argc, &req) != 0) return NULL;
  out_buf out = {0};
  const char *step = "open";
  char entry[512] = {0};
  int rc = list_dir(req.path, req.dev, req.ino, req.check, &out, &step, entry, sizeof entry);
  napi_value result = NULL;
  if (rc != 0) {
    napi_throw(env, make_error(env, rc, step, req.path, entry));
  } else {
    void *copy;
    if (napi_create_buffer_copy(env, out.len, out.data, &copy, &result) != napi_ok) result = NULL;
  }
  free(out.data);
  free(req.path);
  return result;
}

/* ---- Prefetcher: threads of our own list directories ahead of the walk -------------------------------------- */

/*
 * The walk hands over the subdirectories it is about to visit (prefetcherAdd); threads of our own list them on the
 * other core, and each listing's subdirectories are queued in turn (their ids written into the listing's records),
 * so the threads follow the walk's depth-first order without waiting for it. The walk takes a listing
 * synchronously (prefetcherTake), waiting while it is being listed; no result goes through the event loop, so a
 * walk that runs mostly in microtasks never waits for a macrotask to see a finished listing.
 */
enum { SLOT_QUEUED = 0, SLOT_RUNNING = 1, SLOT_DONE = 2, SLOT_CANCELLED = 3 };

/* Listing threads per prefetcher: with the walk's own thread, enough to keep two cores busy. */
#define PREFETCH_THREADS 2
/* Listings done and not taken are capped at this many bytes too (memory stays bounded on huge directories). */
#define PREFETCH_MAX_BYTES ((size_t)64 << 20)
/* Requests queued or held at most; beyond it, listings no longer queue their subdirectories. */
#define PREFETCH_MAX_SLOTS 65536u

typedef struct {
  request req;
  int state;
  int rc;
  const char *step;
  char entry[256];
  out_buf out;
} slot;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t work;  /* the threads wait for a request or room */
  pthread_cond_t done;  /* the walk waits for a listing */
  pthread_t threads[PREFETCH_THREADS];
  int started, stopping;
  slot **slots;         /* by id; id 0 is never used */
  uint32_t next_id, cap_slots, live;
  uint32_t *stack;      /* ids waiting, most urgent last */
  uint32_t nstack, cap_stack;
  uint32_t held, max_held;
  size_t held_bytes;    /* bytes of listings done and not taken */
  int descend;          /* queue each listing's subdirectories (off when the walk may skip some) */
} prefetcher;

static void free_listing(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  free(data);
}

static void slot_free(slot *s) {
  if (!s) return;
  free(s->out.data);
  free(s->req.path);
  free(s);
}

/* Registers a queued slot (mutex held); returns its id, or 0 when out of memory or room. */
static uint32_t pf_enqueue_locked(prefetcher *pf, slot *s) {
  if (pf->live >= PREFETCH_MAX_SLOTS) return 0;
  if (pf->next_id == 0) pf->next_id = 1;
  uint32_t id = pf->next_id;
  if (id >= pf->cap_slots) {
    uint32_t cap = pf->cap_slots ? pf->cap_slots : 256;
    while (cap <= id) cap *= 2;
    slot **p = realloc(pf->slots, cap * sizeof *p);
    if (!p) return 0;
    memset(p + pf->cap_slots, 0, (cap - pf->cap_slots) * sizeof *p);
    pf->slots = p;
    pf->cap_slots = cap;
  }
  if (pf->nstack == pf->cap_stack) {
    uint32_t cap = pf->cap_stack ? pf->cap_stack * 2 : 256;
    uint32_t *p = realloc(pf->stack, cap * sizeof *p);
    if (!p) return 0;
    pf->stack = p;
    pf->cap_stack = cap;
  }
  pf->next_id++;
  s->state = SLOT_QUEUED;
  pf->slots[id] = s;
  pf->live++;
  pf->stack[pf->nstack++] = id;
  return id;
}

/*
 * Queues the subdirectories of a finished listing, the first in name order most urgent, and writes each one's
 * id into its record (u32 at offset 56; 0 = not queued). Runs on a listing thread, mutex not held.
 */
static void pf_queue_children(prefetcher *pf, slot *parent) {
  uint8_t *d = parent->out.data;
  uint32_t count = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
  uint32_t dirs = (uint32_t)d[12] | (uint32_t)d[13] << 8 | (uint32_t)d[14] << 16 | (uint32_t)d[15] << 24;
  if (dirs == 0) return;
  uint32_t *recs = malloc(dirs * sizeof *recs);
  if (!recs) return;
  uint32_t n = 0;
  size_t at = HEADER_BYTES;
  for (uint32_t i = 0; i < count && n < dirs; i++) {
    const uint8_t *r = d + at;
    size_t nl = (size_t)r[2] | (size_t)r[3] << 8, sl = (size_t)r[4] | (size_t)r[5] << 8;
    if (r[0] == KIND_DIR) recs[n++] = (uint32_t)at;
    at = (at + FIXED_BYTES + nl + sl + 7) & ~(size_t)7;
  }
  qsort_r(recs, n, sizeof *recs, by_name, d);
  size_t plen = strlen(parent->req.path);
  int root = plen == 1 && parent->req.path[0] == '/';
  pthread_mutex_lock(&pf->mu);
  for (uint32_t k = n; k-- > 0;) {
    uint8_t *r = d + recs[k];
    size_t nl = (size_t)r[2] | (size_t)r[3] << 8;
    slot *c = calloc(1, sizeof *c);
    char *path = c ? malloc(plen + nl + 2) : NULL;
    if (!path) {
      free(c);
      break;
    }
    memcpy(path, parent->req.path, plen);
    size_t o = plen;
    if (!root) path[o++] = '/';
    memcpy(path + o, r + FIXED_BYTES, nl);
    path[o + nl] = 0;
    c->req.path = path;
    c->req.check = 1;
    c->req.dev = 0;
    c->req.ino = 0;
    for (int i = 0; i < 8; i++) {
      c->req.dev |= (uint64_t)r[16 + i] << (8 * i);
      c->req.ino |= (uint64_t)r[24 + i] << (8 * i);
    }
    uint32_t id = pf_enqueue_locked(pf, c);
    if (id == 0) {
      slot_free(c);
      break;
    }
    put_u32(r + 56, id);
  }
  pthread_cond_broadcast(&pf->work);
  pthread_mutex_unlock(&pf->mu);
  free(recs);
}

static void *pf_main(void *arg) {
  prefetcher *pf = arg;
  pthread_mutex_lock(&pf->mu);
  for (;;) {
    while (!pf->stopping && (pf->nstack == 0 || pf->held >= pf->max_held || pf->held_bytes >= PREFETCH_MAX_BYTES))
      pthread_cond_wait(&pf->work, &pf->mu);
    if (pf->stopping) break;
    uint32_t id = pf->stack[--pf->nstack];
    slot *s = pf->slots[id];
    if (!s) continue;
    if (s->state == SLOT_CANCELLED) {
      pf->slots[id] = NULL;
      pf->live--;
      slot_free(s);
      continue;
    }
    s->state = SLOT_RUNNING;
    pf->held++;
    pthread_mutex_unlock(&pf->mu);
    s->step = "open";
    s->rc = list_dir(s->req.path, s->req.dev, s->req.ino, s->req.check, &s->out, &s->step, s->entry, sizeof s->entry);
    if (s->rc == 0 && pf->descend) pf_queue_children(pf, s);
    pthread_mutex_lock(&pf->mu);
    s->state = SLOT_DONE;
    pf->held_bytes += s->out.cap;
    pthread_cond_broadcast(&pf->done);
  }
  pthread_mutex_unlock(&pf->mu);
  return NULL;
}

static void pf_stop(prefetcher *pf) {
  if (pf->started) {
    pthread_mutex_lock(&pf->mu);
    pf->stopping = 1;
    pthread_cond_broadcast(&pf->work);
    pthread_mutex_unlock(&pf->mu);
    for (int i = 0; i < pf->started; i++) pthread_join(pf->threads[i], NULL);
    pf->started = 0;
    pf->stopping = 0;
  }
  for (uint32_t i = 0; i < pf->cap_slots; i++) {
    slot_free(pf->slots[i]);
    pf->slots[i] = NULL;
  }
  pf->nstack = 0;
  pf->held = 0;
  pf->held_bytes = 0;
  pf->live = 0;
}

static void pf_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  prefetcher *pf = data;
  pf_stop(pf);
  pthread_mutex_destroy(&pf->mu);
  pthread_cond_destroy(&pf->work);
  pthread_cond_destroy(&pf->done);
  free(pf->slots);
  free(pf->stack);
  free(pf);
}

/*
 * The arguments of a prefetcher call: the handle (argv[0], returned) and `n - 1` more. NULL, with a TypeError
 * pending, when there are fewer or the first is not a prefetcher; `usage` names the call for the message.
 */
static prefetcher *pf_args(napi_env env, napi_callback_info info, size_t n, napi_value *argv, const char *usage) {
  size_t argc = n;
  void *p = NULL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < n || napi_get_value_external(env, argv[0], &p) != napi_ok ||
      !p) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", usage);
    return NULL;
  }
  return p;
}

/* prefetcherCreate(maxHeld, descend) -> handle; with descend false only what prefetcherAdd queues is listed. */
static napi_value pf_create(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  uint32_t max_held = 64;
  bool descend = true;
  if (argc >= 1) napi_get_value_uint32(env, argv[0], &max_held);
  if (argc >= 2) napi_get_value_bool(env, argv[1], &descend);
  prefetcher *pf = calloc(1, sizeof *pf);
  if (!pf) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  pthread_mutex_init(&pf->mu, NULL);
  pthread_cond_init(&pf->work, NULL);
  pthread_cond_init(&pf->done, NULL);
  pf->max_held = max_held ? max_held : 1;
  pf->descend = descend ? 1 : 0;
  pf->next_id = 1;
  napi_value handle;
  CALL(env, napi_create_external(env, pf, pf_finalize, NULL, &handle));
  return handle;
}

/* prefetcherAdd(handle, path, dev, ino) -> id (0 when it could not be queued: list it yourself). */
static napi_value pf_add(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  prefetcher *pf = pf_args(env, info, 4, argv, "prefetcherAdd(handle, path, dev, ino)");
  if (!pf) return NULL;
  slot *s = calloc(1, sizeof *s);
  if (!s) {
    napi_throw_error(env, "ENOMEM", "out of memory");
    return NULL;
  }
  if (read_request(env, argv + 1, 3, &s->req) != 0) {
    free(s);
    return NULL;
  }
  pthread_mutex_lock(&pf->mu);
  uint32_t id = pf_enqueue_locked(pf, s);
  if (id != 0) {
    while (pf->started < PREFETCH_THREADS && pthread_create(&pf->threads[pf->started], NULL, pf_main, pf) == 0) pf->started++;
    if (pf->started == 0) {
      /* No thread: withdraw the request (still on top of the stack). */
      pf->nstack--;
      pf->slots[id] = NULL;
      pf->live--;
      id = 0;
    } else {
      pthread_cond_signal(&pf->work);
    }
  }
  pthread_mutex_unlock(&pf->mu);
  if (id == 0) slot_free(s);
  napi_value v;
  CALL(env, napi_create_uint32(env, id, &v));
  return v;
}

/*
 * prefetcherTake(handle, id) -> Buffer | null: the listing of request `id`, waiting while it is being listed;
 * null when it had not started (it is then cancelled and the caller lists it itself). Throws the listing's
 * error. Either way the request is finished.
 */
static napi_value pf_take(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  prefetcher *pf = pf_args(env, info, 2, argv, "prefetcherTake(handle, id)");
  if (!pf) return NULL;
  uint32_t id;
  CALL(env, napi_get_value_uint32(env, argv[1], &id));
  napi_value nothing;
  napi_get_null(env, &nothing);
  pthread_mutex_lock(&pf->mu);
  slot *s = id < pf->cap_slots ? pf->slots[id] : NULL;
  if (!s || s->state == SLOT_CANCELLED) {
    pthread_mutex_unlock(&pf->mu);
    return nothing;
  }
  if (s->state == SLOT_QUEUED) {
    /* Still on the stack: the thread that pops it frees it. */
    s->state = SLOT_CANCELLED;
    pthread_mutex_unlock(&pf->mu);
    return nothing;
  }
  while (s->state == SLOT_RUNNING) pthread_cond_wait(&pf->done, &pf->mu);
  pf->slots[id] = NULL;
  pf->live--;
  pf->held--;
  pf->held_bytes -= s->out.cap;
  pthread_cond_broadcast(&pf->work);
  pthread_mutex_unlock(&pf->mu);
  napi_value result = NULL;
  if (s->rc != 0) {
    napi_throw(env, make_error(env, s->rc, s->step, s->req.path, s->entry));
  } else if (napi_create_external_buffer(env, s->out.len, s->out.data, free_listing, NULL, &result) == napi_ok) {
    s->out.data = NULL; /* now owned by the Buffer, freed when it is collected */
  } else {
    result = NULL;
  }
  slot_free(s);
  return result;
}

/* prefetcherClose(handle): stops the threads and drops every listing not taken. */
static napi_value pf_close(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  prefetcher *pf = pf_args(env, info, 1, argv, "prefetcherClose(handle)");
  if (!pf) return NULL;
  pf_stop(pf);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value f;
  CALL(env, napi_create_function(env, "listDirSync", NAPI_AUTO_LENGTH, list_sync, NULL, &f));
  CALL(env, napi_set_named_property(env, exports, "listDirSync", f));
  static const struct {
    const char *name;
    napi_callback cb;
  } fns[] = {{"prefetcherCreate", pf_create}, {"prefetcherAdd", pf_add}, {"prefetcherTake", pf_take}, {"prefetcherClose", pf_close}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    CALL(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &f));
    CALL(env, napi_set_named_property(env, exports, fns[i].name, f));
  }
  napi_value v;
  CALL(env, napi_create_uint32(env, 3, &v));
  CALL(env, napi_set_named_property(env, exports, "formatVersion", v));
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
