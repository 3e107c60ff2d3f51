/* The CPU plugin's kept view of a node array (cpu_program.c): what
 * cpu_execute_nodes decided for each node (run alone, as a norm chain, as
 * a matmul job with the nodes fused into it) and the jobs it set up,
 * recorded as it ran the array, then run again for later calls of
 * execute_keyed with the same key without looking at the nodes that did
 * not change. */
#ifndef SY_CPU_PROGRAM_H
#define SY_CPU_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_kernels.h"

typedef struct cpu_program cpu_program;

/* cpu_execute.c */
/* Runs nodes [0, n) one by one, grouped and fused where the kernels
 * allow, recording what ran into |rec| (or NULL). */
sy_status cpu_execute_nodes(cpu_state *s, sy_node *const *nodes, uint32_t n, cpu_program *rec);
/* The name of |st| ("SY_E_NO_MEMORY"). */
const char *cpu_status_name(sy_status st);
/* Runs |node| alone: its threaded kernel, else the host's reference one. */
sy_status cpu_run_node(cpu_state *s, sy_node *node);
/* Takes the nodes that follow the matmul group nodes[i, i + grouped),
 * views between them aside, into |e| as far as it takes them
 * (cpu_kernels_fused.c).  Returns how many nodes after the group it
 * covers, up to the last one taken; 0 when it took none. */
uint32_t cpu_scan_epilogue(cpu_state *s, sy_node *const *nodes, uint32_t i, uint32_t grouped,
                           uint32_t n, cpu_epilogue *e);

/* cpu_program.c: recording (|p| NULL records nothing) */
/* Where the next matmul job is built: a slot of |p|, or |s|'s own one. */
cpu_matmul_job *cpu_program_job(cpu_state *s, cpu_program *p);
/* The job last handed out ran for nodes [first, first + count), its first
 * |members| the matmuls. */
void cpu_program_add_job(cpu_program *p, uint32_t first, uint32_t members, uint32_t count);
/* The chain (its kernel |c|, checked) ran for nodes [first, first + count). */
void cpu_program_add_chain(cpu_program *p, uint32_t first, uint32_t count, const sy_node *add,
                           const sy_node *norm, const sy_node *mul, const cpu_norm_chain *c);
/* Element-wise node |first| ran its kernel |e|, checked. */
void cpu_program_add_eltwise(cpu_program *p, uint32_t first, const cpu_eltwise *e);
void cpu_program_add_attention(cpu_program *p, uint32_t first, const cpu_attention_kept *a);
void cpu_program_add_node(cpu_program *p, uint32_t first);

/* The plugin table's execute_keyed (ABI 1.2). */
sy_status cpu_device_execute_keyed(void *state, uint32_t dev, sy_node *const *nodes, uint32_t n,
                                   uint64_t key, sy_node *const *changed, uint32_t n_changed);
/* Frees the kept program (the plugin's state is freed). */
void cpu_program_free(cpu_state *s);

#endif
