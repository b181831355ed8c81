/* alloc: the shim's malloc where it is linked against musl (meson.build; glibc's is
 * kept otherwise). musl's allocator gives every emptied page back with munmap, and on a
 * VM a munmap in a process whose memory the job's vfork child has just used costs a TLB
 * flush on the other CPUs: ~0.4 ms of CPU per job in a drain of 500 (perf), with ~0.2
 * ms more in its bookkeeping's first touches. The shim is one thread that makes a few
 * dozen small allocations, so it gets the simplest allocator that reuses what it frees:
 * one free list per power-of-two size up to 64 KiB, carved from 256 KiB chunks that are
 * never unmapped; larger blocks are mappings of their own. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CLASS_MIN 4  /* 16 bytes */
#define CLASS_MAX 16 /* 64 KiB */
#define CHUNK (256 * 1024)

/* Before every block: its size class, or 0 and its mapping's length for a large one. The
 * header is 16 bytes so that blocks keep malloc's alignment. */
struct header {
    size_t cls;
    size_t map_len;
};

static void *free_list[CLASS_MAX + 1];
static char *chunk_next, *chunk_end;

static void *carve(size_t len)
{
    if ((size_t)(chunk_end - chunk_next) < len) {
        void *p = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        chunk_next = p;
        chunk_end = chunk_next + CHUNK;
    }
    void *p = chunk_next;
    chunk_next += len;
    return p;
}

/* malloc's body: calloc calls this, not malloc (gcc turns malloc and a memset of zero
 * into a call of calloc, which would then call itself). */
static void *block_alloc(size_t n)
{
    struct header *h;
    size_t cls = CLASS_MIN;
    while (cls <= CLASS_MAX && ((size_t)1 << cls) < n)
        cls++;
    if (cls > CLASS_MAX) {
        if (n > SIZE_MAX - sizeof(*h) - 4095) {
            errno = ENOMEM;
            return NULL;
        }
        size_t len = (n + sizeof(*h) + 4095) & ~(size_t)4095;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            errno = ENOMEM;
            return NULL;
        }
        h = p;
        h->cls = 0;
        h->map_len = len;
        return h + 1;
    }
    if (free_list[cls]) {
        void *p = free_list[cls];
        free_list[cls] = *(void **)p;
        return p;
    }
    h = carve(sizeof(*h) + ((size_t)1 << cls));
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    h->cls = cls;
    h->map_len = 0;
    return h + 1;
}

void *malloc(size_t n)
{
    return block_alloc(n);
}

void free(void *p)
{
    if (!p)
        return;
    struct header *h = (struct header *)p - 1;
    if (h->cls == 0) {
        munmap(h, h->map_len);
        return;
    }
    *(void **)p = free_list[h->cls];
    free_list[h->cls] = p;
}

void *calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = block_alloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    struct header *h = (struct header *)p - 1;
    size_t room = h->cls ? (size_t)1 << h->cls : h->map_len - sizeof(*h);
    if (n <= room)
        return p;
    void *q = block_alloc(n);
    if (q) {
        memcpy(q, p, room);
        free(p);
    }
    return q;
}
