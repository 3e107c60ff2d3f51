/* State shared by the files of the CPU plugin.  Nothing here is exported:
 * the module is built with hidden visibility and publishes only
 * sy_plugin_query (cpu_plugin.c). */
#ifndef SY_CPU_INTERNAL_H
#define SY_CPU_INTERNAL_H

#include <hwloc.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_isa.h"
#include "cpu_threadpool.h"
#include "switchyard/plugin.h"

#define CPU_PLUGIN_NAME "cpu"
#define CPU_PLUGIN_VERSION "0.1.0"
#define CPU_PLUGIN_VENDOR "switchyard"
/* Alignment of every buffer and scratch area: one cache line, and enough
 * for any vector load the kernels issue. */
#define CPU_ALIGN 64

/* A device buffer: host memory, owned (buffer_alloc) or borrowed
 * (buffer_import_host).  A borrowed buffer that holds one whole weight
 * may also carry that weight repacked for the kernels (cpu_repack.c),
 * made at its first matmul and freed with the buffer. */
typedef struct cpu_buffer {
    void *ptr;
    uint64_t size;
    bool owned;
    bool pack_failed;      /* no memory for the packed copy: not tried again */
    uint32_t packed_dtype; /* the dtype |packed| was made from */
    void *packed;          /* NULL, or |size| bytes in |packed_chunk| */
    struct cpu_pack_chunk *packed_chunk; /* NULL: |packed| is in the pack cache */
} cpu_buffer;

/* A read-only private mapping [lo, hi) of bytes |off|.. of the file
 * |dev|, |ino| (cpu_repack.c). */
typedef struct cpu_file_map {
    uintptr_t lo, hi;
    uint64_t off, dev, ino;
} cpu_file_map;

/* Per-lane scratch memory, one cache line of bookkeeping per lane so that
 * lanes never share a line. */
typedef struct cpu_lane {
    alignas(CPU_ALIGN) void *scratch;
    size_t scratch_size;
    /* Result of chunk <this lane's index> of the last split argmax; written
     * by whichever lane ran that chunk. */
    float chunk_best_value;
    int64_t chunk_best_index;
} cpu_lane;

/* Rows per GEMM tile by default: the tile's panels are reused this often
 * from L2 (SWITCHYARD_CPU_MATMUL_ROWS overrides). */
#define CPU_MATMUL_GEMM_TILE_ROWS 32

typedef struct cpu_state {
    const sy_host *host;
    hwloc_topology_t topo;
    cpu_pool *pool;
    uint32_t n_threads;
    cpu_isa_features features;
    const cpu_isa_table *isa;
    /* How quantized matmuls treat their activations
     * (SWITCHYARD_CPU_ACTIVATIONS): 0 keeps them in F32, 1 or 2 quantizes
     * them to that many int8 planes (q8, q16; see cpu_isa.h). */
    int act_planes;
    /* Repack weights where the ISA table has packed kernels
     * (SWITCHYARD_CPU_REPACK, on by default). */
    bool repack;
    /* The mappings the packed copies are carved from (cpu_repack.c). */
    struct cpu_pack_chunk *pack_chunks;
    /* The read-only private file mappings with no written pages, read
     * from /proc/self/smaps at the first repack of an execute call and
     * trusted until the call ends (cpu_repack.c). */
    struct {
        struct cpu_file_map *maps; /* n, in address order */
        size_t n, cap;
        bool valid;
    } file_maps;
    /* The pack cache's folder (SWITCHYARD_CPU_PACK_CACHE), or NULL, and
     * its open files, one per model file (cpu_packcache.c). */
    char *pack_dir;
    struct cpu_pack_file *pack_files;
    uint8_t *pack_bounce; /* a slice of rows packed before it is written */
    size_t pack_bounce_size;
    bool pack_pending; /* copies written that the end of the execute call records */
    /* Packed copies dropped so far because their buffer was written: a
     * kept program's jobs point at the copies there were when it was
     * recorded (cpu_program.c). */
    uint64_t packs_rewritten;
    /* Weight rows per prefill GEMM tile (SWITCHYARD_CPU_MATMUL_ROWS, a
     * power of two in 4..128; default CPU_MATMUL_GEMM_TILE_ROWS): how
     * often a tile's packed columns are reused from L2 before the next
     * tile, the choice `switchyard tune` measures. */
    int64_t gemm_tile_rows;
    cpu_lane *lanes;    /* n_threads entries */
    void *shared;       /* scratch read by every lane (converted inputs) */
    size_t shared_size;
    /* ROPE's angles, kept between calls (execution is serial): base^(-2j /
     * n_rot) for j < n_rot / 2 of the last (n_rot, base), and cos, sin of
     * those angles at the last one-token position and freq_scale, so the
     * q and k ropes of every layer of a decode step compute them once. */
    struct {
        double *inv_freq; /* n_rot / 2 doubles, then cos and sin floats */
        float *cos, *sin;
        int64_t n_rot;
        float base, freq_scale;
        int32_t pos;
        bool has_pos;
    } rope;
    /* Rows done per head of the q/k/v matmul groups epilogues run in
     * (cpu_kernels_fused.c): one cache line per head, and the layout of
     * heads they were last counted for. */
    void *qkv_done;
    size_t qkv_done_size;
    int64_t qkv_layout[8]; /* heads and rows per head of each member */
    bool fuse; /* SWITCHYARD_CPU_FUSE, on by default */
    /* execute_keyed keeps the program of the last key (cpu_program.c;
     * SWITCHYARD_CPU_PROGRAM, on by default). */
    bool keep_program;
    struct cpu_program *program;
    struct cpu_matmul_job *job; /* the job of a call that keeps no program */
    bool qkv_logged;
    sy_device_desc desc;
    uint64_t mem_in_use, mem_peak; /* bytes of buffer_alloc's buffers: now, most at once */
} cpu_state;

/* Logs |fmt| through the host at |level|.  Never prints by itself. */
void cpu_log(const cpu_state *s, sy_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Makes the host allocation *|p| (of *|size| bytes, or NULL) at least
 * |bytes| long, CPU_ALIGN-aligned, contents not kept; *|grew| (or NULL)
 * tells whether it was replaced. */
sy_status cpu_reserve(cpu_state *s, void **p, size_t *size, size_t bytes, bool *grew);
/* Makes every lane's scratch at least |bytes| long (contents not kept). */
sy_status cpu_scratch_reserve(cpu_state *s, size_t bytes);
/* Makes the shared scratch at least |bytes| long (contents not kept). */
sy_status cpu_shared_reserve(cpu_state *s, size_t bytes);

/* cpu_device.c: the plugin table's entry points. */
sy_status cpu_device_init(const sy_host *host, void **out_state);
void cpu_device_deinit(void *state);
uint32_t cpu_device_count(void *state);
sy_status cpu_device_describe(void *state, uint32_t dev, sy_device_desc *out_desc);
sy_status cpu_device_self_test(void *state, uint32_t dev, char *out_msg, uint32_t msg_size);

/* cpu_supports.c */
bool cpu_device_supports(void *state, uint32_t dev, const sy_node *node, sy_support *out_why);

/* cpu_execute.c */
sy_status cpu_device_execute(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n);
sy_status cpu_device_synchronize(void *state, uint32_t dev);

/* cpu_repack.c */
/* The packed copy of weight |w| for s->isa's packed kernels, made now if
 * it is the first use; NULL where |w| stays as it is (dtype or ISA
 * without packed kernels, SWITCHYARD_CPU_REPACK=0, F32 activations, not a
 * whole borrowed buffer, no memory).  Counted in memory_usage. */
const uint8_t *cpu_weight_packed(cpu_state *s, const sy_tensor *w);
/* The packed copy of |w| if a matmul has made one, else NULL (never makes
 * one: a table only read by GET_ROWS stays as stored). */
const uint8_t *cpu_weight_packed_made(const cpu_state *s, const sy_tensor *w);
/* Row |packed_row| of |w|'s packed copy put back in the file's layout at
 * |scratch| (w->nb[1] bytes; lane scratch), for the kernels that read the
 * stored layout: the same bytes, so the same results.  Returns |scratch|,
 * or |packed_row| itself where the copy keeps the file's layout
 * (cpu_pack_keeps_layout). */
const uint8_t *cpu_packed_row_as_stored(const sy_tensor *w, const uint8_t *packed_row,
                                        uint8_t *scratch);
/* Frees |b|'s packed copy, if any (the buffer is freed or written). */
void cpu_buffer_drop_packed(cpu_state *s, cpu_buffer *b);
/* Unmaps every chunk of packed copies and frees the list of file mappings
 * and the pack cache (the plugin's state is freed). */
void cpu_repack_free(cpu_state *s);
/* The mapping in s->file_maps (read now if not in this execute call) that
 * holds [lo, hi) whole, or NULL. */
const cpu_file_map *cpu_file_map_of(cpu_state *s, uintptr_t lo, uintptr_t hi);

/* cpu_packcache.c: the pack cache (SWITCHYARD_CPU_PACK_CACHE) */
typedef struct cpu_pack_file cpu_pack_file;
/* The cache's files for the model file of mapping |m| (|at| lies in it),
 * opened at the first call; NULL where they cannot be used (logged once). */
cpu_pack_file *cpu_pack_file_for(cpu_state *s, const cpu_file_map *m, uintptr_t at);
/* The packed copy of the weight at offset |off| of the model file, when
 * the cache holds it and its bytes match their record; else NULL. */
const uint8_t *cpu_pack_file_find(cpu_state *s, cpu_pack_file *f, uint64_t off, uint64_t bytes,
                                  uint64_t row_bytes, uint32_t dtype);
/* True when the weight at |off| shares model-file bytes with another weight
 * the cache holds or is writing (their copies would overwrite each other):
 * such a weight is packed in memory. */
bool cpu_pack_file_clashes(const cpu_pack_file *f, uint64_t off, uint64_t bytes,
                           uint64_t row_bytes, uint32_t dtype);
/* Writes |n| packed bytes at offset |off| of the cache; false when that
 * failed (logged; the cache is not used again). */
bool cpu_pack_file_write(cpu_state *s, cpu_pack_file *f, uint64_t off, const uint8_t *src,
                         size_t n);
/* Adds the record of a weight written whole, |sum| its bytes'
 * (cpu_pack_sum_add), to be synced and recorded by cpu_pack_cache_commit;
 * returns the copy, or NULL. */
const uint8_t *cpu_pack_file_add(cpu_state *s, cpu_pack_file *f, uint64_t off, uint64_t bytes,
                                 uint64_t row_bytes, uint32_t dtype, const uint64_t sum[2]);
/* Adds |n| bytes at |p| to the running sum |sum| ({0, 0} to start); every
 * part but the last must be a multiple of 8 bytes long. */
void cpu_pack_sum_add(uint64_t sum[2], const uint8_t *p, size_t n);
/* Syncs the cache files written since the last call and records their
 * weights (the end of every execute call that wrote one). */
void cpu_pack_cache_commit(cpu_state *s);
/* Records what is pending, unmaps and closes every cache file. */
void cpu_pack_cache_free(cpu_state *s);

/* cpu_buffer.c */
sy_status cpu_buffer_alloc(void *state, uint32_t dev, uint64_t size, void **out_buffer);
sy_status cpu_buffer_import_host(void *state, uint32_t dev, void *ptr, uint64_t size,
                                 void **out_buffer);
void cpu_buffer_free(void *state, uint32_t dev, void *buffer);
void *cpu_buffer_host_ptr(void *state, uint32_t dev, void *buffer);
sy_status cpu_buffer_memory_usage(void *state, uint32_t dev, bool reset_peak,
                                  uint64_t *out_in_use, uint64_t *out_peak);
sy_status cpu_buffer_copy_in(void *state, uint32_t dev, void *buffer, uint64_t offset,
                             const void *src, uint64_t size);
sy_status cpu_buffer_copy_out(void *state, uint32_t dev, void *buffer, uint64_t offset, void *dst,
                              uint64_t size);
sy_status cpu_buffer_copy_device(void *state, uint32_t dst_dev, void *dst, uint64_t dst_offset,
                                 uint32_t src_dev, void *src, uint64_t src_offset, uint64_t size);

#endif
