/* Cost model: reading profiles (and refusing malformed ones, naming the
 * field), fitted and measured predictions, the roofline default, links. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cost_model.h"
#include "sched_test_util.h"

#define HEAD "\"schema\": \"switchyard-profile\", \"format_version\": 1, \"version\": \"t\", "

static sy__profile *parse_ok(const char *json)
{
    char err[512] = "";
    sy__profile *p = NULL;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "test.json", &p, err, sizeof err), SY_OK,
                 "%s", err);
    return p;
}

static void parse_fails(const char *json, const char *want)
{
    char err[512] = "";
    sy__profile *p = (sy__profile *)1;
    cr_assert_eq(sy__profile_parse(json, strlen(json), "bad.json", &p, err, sizeof err),
                 SY_E_FORMAT, "accepted: %s", json);
    cr_assert_null(p);
    cr_assert(strstr(err, want), "error '%s' lacks '%s'", err, want);
    cr_assert(strstr(err, "profile 'bad.json': "), "%s", err);
}

/* A matmul node of W [K, N] (dtype |wt|) times X [K, M]. */
typedef struct mm_node {
    sy_tensor w, x, out;
    sy_node node;
} mm_node;

static void make_matmul(mm_node *m, sy_dtype wt, int64_t K, int64_t N, int64_t M)
{
    memset(m, 0, sizeof *m);
    m->w = (sy_tensor){.dtype = wt, .ne = {K, N, 1, 1}};
    m->x = (sy_tensor){.dtype = SY_DTYPE_F32, .ne = {K, M, 1, 1}};
    m->out = (sy_tensor){.dtype = SY_DTYPE_F32, .ne = {N, M, 1, 1}};
    sy_tensor_set_contiguous_strides(&m->w);
    sy_tensor_set_contiguous_strides(&m->x);
    sy_tensor_set_contiguous_strides(&m->out);
    m->node =
        (sy_node){.op = SY_OP_MATMUL, .n_inputs = 2, .inputs = {&m->w, &m->x}, .output = &m->out};
}

static sy_device_desc cpu_desc(double flops, double bw, uint32_t unified)
{
    sy_device_desc d;
    memset(&d, 0, sizeof d);
    d.kind = SY_DEVICE_CPU;
    snprintf(d.name, sizeof d.name, "cpu");
    d.peak_flops = flops;
    d.peak_bandwidth = bw;
    d.unified_memory = unified;
    return d;
}

Test(cost_model, reads_fits_points_links_power_and_versions)
{
    sy__profile *p = parse_ok("{" HEAD "\"device\": \"npusim\", \"plugin\": \"npusim\", "
                              "\"plugin_version\": \"0.3\", \"peak_flops\": 2e11, "
                              "\"launch_overhead_s\": 2e-5, \"power\": {\"idle_w\": 0.5, "
                              "\"active_w\": 3}, \"ops\": [{\"op\": \"matmul\", \"dtype\": "
                              "\"q4_0\", \"overhead_s\": 1e-5, \"s_per_flop\": 1e-11, "
                              "\"points\": [{\"shape\": \"big\", \"flops\": 2e9, \"bytes\": 1e6, "
                              "\"seconds\": 0.02}, {\"flops\": 2e6, \"bytes\": 1e4, "
                              "\"seconds\": 5e-5}]}, {\"op\": \"*\", \"s_per_byte\": 1e-10}], "
                              "\"links\": [{\"to\": \"cpu\", \"bandwidth\": 5e9, \"latency_s\": "
                              "2e-5, \"sync_s\": 1e-5, \"zero_copy\": false}]}");
    cr_assert_str_eq(p->device, "npusim");
    cr_assert_str_eq(p->plugin_version, "0.3");
    cr_assert_str_eq(p->version, "t");
    cr_assert_eq(p->n_ops, 2u);
    cr_assert_eq(p->ops[0].op, (uint32_t)SY_OP_MATMUL);
    cr_assert_eq(p->ops[0].dtype, (int32_t)SY_DTYPE_Q4_0);
    cr_assert_eq(p->ops[0].n_points, 2u);
    cr_assert_lt(p->ops[0].points[0].work, p->ops[0].points[1].work, "sorted by work");
    cr_assert_eq(p->ops[1].op, (uint32_t)SY_OP_COUNT, "the '*' op");
    cr_assert_eq(p->ops[1].dtype, -1);
    cr_assert_float_eq(p->active_w, 3.0, 1e-12);
    cr_assert_eq(p->n_links, 1u);
    cr_assert_eq(p->links[0].zero_copy, 0);
    cr_assert(isnan(p->links[0].map_s));
    cr_assert(isnan(p->peak_bandwidth));
    sy__profile *q = parse_ok("{" HEAD "\"device\": \"npusim\", \"peak_flops\": 2e11, "
                              "\"ops\": []}");
    cr_assert_neq(p->hash, q->hash, "the text's hash is part of plan keys");
    sy__profile_destroy(p);
    sy__profile_destroy(q);
    st_check_leaks();
}

Test(cost_model, refuses_malformed_profiles_naming_the_field)
{
    parse_fails("{", "not valid JSON");
    parse_fails("[]", "expected a JSON object");
    parse_fails("{\"schema\": \"other\"}", "schema");
    parse_fails("{\"schema\": \"switchyard-profile\", \"format_version\": 2, \"version\": 1, "
                "\"device\": \"cpu\"}",
                "format_version 2 is not supported");
    parse_fails("{" HEAD "\"ops\": []}", "missing field 'device'");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"conv\", \"overhead_s\": 1}]}",
                "ops[0].op: unknown op 'conv'");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"add\", \"dtype\": \"q9\", "
                "\"overhead_s\": 1}]}",
                "ops[0].dtype: unknown dtype 'q9'");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"add\", \"s_per_byte\": -1}]}",
                "ops[0].s_per_byte: expected a non-negative number");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"add\"}]}",
                "needs fitted coefficients or measured points");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"add\", \"points\": "
                "[{\"flops\": 1, \"seconds\": 0}]}]}",
                "ops[0].points[0].seconds: expected a positive number");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"links\": [{\"bandwidth\": 1}]}",
                "links[0].to: expected a device name");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"links\": [{\"to\": \"x\", \"bandwidth\": 0}]}",
                "links[0].bandwidth: must be above zero");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"power\": 3}", "power: expected an object");
    st_check_leaks();
}

Test(cost_model, fitted_coefficients_give_overhead_plus_flops_plus_bytes)
{
    sy__profile *p = parse_ok("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"matmul\", "
                              "\"overhead_s\": 1e-5, \"s_per_flop\": 1e-11, \"s_per_byte\": "
                              "1e-10}]}");
    sy_device_desc d = cpu_desc(0, 0, 1);
    sy__device_model m;
    sy__device_model_init(&m, 0, &d, p);
    mm_node mm;
    make_matmul(&mm, SY_DTYPE_F32, 256, 128, 4);
    uint64_t flops, bytes;
    sy_op_cost(&mm.node, &flops, &bytes);
    bool unm = true;
    double t = sy__cost_node(&m, &mm.node, &unm);
    cr_assert_not(unm);
    cr_assert_float_eq(t, 1e-5 + 1e-11 * (double)flops + 1e-10 * (double)bytes, 1e-15);
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_model, measured_points_interpolate_between_shape_classes_and_scale_beyond)
{
    /* Two matmul shape classes 16x apart in work; halfway in log space
     * the time is the geometric mean. */
    mm_node small, big, mid, huge, tiny;
    make_matmul(&small, SY_DTYPE_Q8_0, 256, 256, 1);
    make_matmul(&big, SY_DTYPE_Q8_0, 1024, 1024, 1);
    make_matmul(&mid, SY_DTYPE_Q8_0, 512, 512, 1);
    make_matmul(&huge, SY_DTYPE_Q8_0, 2048, 2048, 1);
    make_matmul(&tiny, SY_DTYPE_Q8_0, 64, 64, 1);
    uint64_t f1, b1, f2, b2;
    sy_op_cost(&small.node, &f1, &b1);
    sy_op_cost(&big.node, &f2, &b2);
    char json[1024];
    snprintf(json, sizeof json,
             "{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"matmul\", \"dtype\": \"q8_0\", "
             "\"points\": [{\"flops\": %llu, \"bytes\": %llu, \"seconds\": 1e-4}, {\"flops\": "
             "%llu, \"bytes\": %llu, \"seconds\": 1.6e-3}]}]}",
             (unsigned long long)f1, (unsigned long long)b1, (unsigned long long)f2,
             (unsigned long long)b2);
    sy__profile *p = parse_ok(json);
    sy_device_desc d = cpu_desc(0, 0, 1);
    sy__device_model m;
    sy__device_model_init(&m, 0, &d, p);
    bool unm;
    cr_assert_float_eq(sy__cost_node(&m, &small.node, &unm), 1e-4, 1e-12);
    cr_assert_float_eq(sy__cost_node(&m, &big.node, &unm), 1.6e-3, 1e-12);
    double t_mid = sy__cost_node(&m, &mid.node, &unm);
    double w0 = sy__cost_work((double)f1, (double)b1), w1 = sy__cost_work((double)f2, (double)b2);
    uint64_t fm, bm;
    sy_op_cost(&mid.node, &fm, &bm);
    double f = log(sy__cost_work((double)fm, (double)bm) / w0) / log(w1 / w0);
    cr_assert_float_eq(t_mid, exp(log(1e-4) + f * log(16.0)), 1e-12);
    cr_assert_gt(t_mid, 1e-4);
    cr_assert_lt(t_mid, 1.6e-3);
    uint64_t fh, bh;
    sy_op_cost(&huge.node, &fh, &bh);
    cr_assert_float_eq(sy__cost_node(&m, &huge.node, &unm),
                       1.6e-3 * sy__cost_work((double)fh, (double)bh) / w1, 1e-12);
    cr_assert_float_eq(sy__cost_node(&m, &tiny.node, &unm), 1e-4, 1e-12,
                       "below the range: the smallest measurement, never less");
    cr_assert_not(unm);
    /* Another dtype has no entry: roofline, flagged. */
    mm_node other;
    make_matmul(&other, SY_DTYPE_F32, 256, 256, 1);
    sy__cost_node(&m, &other.node, &unm);
    cr_assert(unm);
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_model, an_exact_dtype_entry_beats_any_dtype_which_beats_any_op)
{
    sy__profile *p = parse_ok("{" HEAD "\"device\": \"cpu\", \"ops\": ["
                              "{\"op\": \"*\", \"overhead_s\": 3},"
                              "{\"op\": \"matmul\", \"dtype\": \"f32\", \"overhead_s\": 1},"
                              "{\"op\": \"matmul\", \"overhead_s\": 2}]}");
    sy_device_desc d = cpu_desc(0, 0, 1);
    sy__device_model m;
    sy__device_model_init(&m, 0, &d, p);
    mm_node f32, q8;
    make_matmul(&f32, SY_DTYPE_F32, 32, 32, 1);
    make_matmul(&q8, SY_DTYPE_Q8_0, 32, 32, 1);
    bool unm;
    cr_assert_float_eq(sy__cost_node(&m, &f32.node, &unm), 1.0, 1e-12);
    cr_assert_float_eq(sy__cost_node(&m, &q8.node, &unm), 2.0, 1e-12);
    sy_tensor a = {.dtype = SY_DTYPE_F32, .ne = {8, 1, 1, 1}};
    sy_tensor_set_contiguous_strides(&a);
    sy_tensor o = a;
    sy_node add = {.op = SY_OP_ADD, .n_inputs = 2, .inputs = {&a, &a}, .output = &o};
    cr_assert_float_eq(sy__cost_node(&m, &add, &unm), 3.0, 1e-12);
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_model, roofline_default_uses_reported_peaks_or_conservative_constants)
{
    mm_node mm;
    make_matmul(&mm, SY_DTYPE_F32, 4096, 4096, 64); /* compute-bound */
    uint64_t flops, bytes;
    sy_op_cost(&mm.node, &flops, &bytes);
    sy_device_desc zero = cpu_desc(0, 0, 1);
    sy__device_model m;
    sy__device_model_init(&m, 0, &zero, NULL);
    bool unm = false;
    double t = sy__cost_node(&m, &mm.node, &unm);
    cr_assert(unm);
    double want =
        fmax((double)flops / SY__DEFAULT_CPU_FLOPS, (double)bytes / SY__DEFAULT_CPU_BANDWIDTH);
    cr_assert_float_eq(t, want + SY__DEFAULT_CPU_LAUNCH_S, 1e-12);
    sy_device_desc fast = cpu_desc(1e12, 1e11, 1);
    sy__device_model_init(&m, 0, &fast, NULL);
    want = fmax((double)flops / 1e12, (double)bytes / 1e11);
    cr_assert_float_eq(sy__cost_node(&m, &mm.node, &unm), want + SY__DEFAULT_CPU_LAUNCH_S, 1e-12);
    sy_tensor v_in = mm.out, v_out = mm.out;
    sy_node view = {.op = SY_OP_RESHAPE, .n_inputs = 1, .inputs = {&v_in}, .output = &v_out};
    cr_assert_float_eq(sy__cost_node(&m, &view, &unm), 0.0, 0.0, "views are free");
    st_check_leaks();
}

Test(cost_model, links_are_zero_copy_between_unified_devices_and_always_pay_the_sync)
{
    sy_device_desc a = cpu_desc(0, 0, 1), b = cpu_desc(0, 0, 1), c = cpu_desc(0, 0, 0);
    snprintf(b.name, sizeof b.name, "igpu");
    snprintf(c.name, sizeof c.name, "dgpu");
    sy__device_model ma, mb, mc;
    sy__device_model_init(&ma, 0, &a, NULL);
    sy__device_model_init(&mb, 1, &b, NULL);
    sy__device_model_init(&mc, 2, &c, NULL);
    sy__link_model l;
    sy__cost_link(&ma, &mb, &l);
    cr_assert(l.zero_copy);
    cr_assert_not(l.measured);
    cr_assert_float_eq(sy__cost_transfer(&l, 1 << 20), SY__DEFAULT_SYNC_S + SY__DEFAULT_MAP_S,
                       1e-15, "mapping, not copying");
    sy__cost_link(&ma, &mc, &l);
    cr_assert_not(l.zero_copy);
    cr_assert_float_eq(sy__cost_transfer(&l, 0), SY__DEFAULT_SYNC_S + SY__DEFAULT_LINK_LATENCY_S,
                       1e-15, "a switch costs even with nothing to move");
    cr_assert_float_eq(
        sy__cost_transfer(&l, 8000000),
        SY__DEFAULT_SYNC_S + SY__DEFAULT_LINK_LATENCY_S + 8e6 / SY__DEFAULT_LINK_BANDWIDTH, 1e-15);
    /* The destination's entry for the reverse direction applies too. */
    sy__profile *p = parse_ok("{" HEAD "\"device\": \"dgpu\", \"links\": [{\"to\": \"cpu\", "
                              "\"bandwidth\": 1e9, \"latency_s\": 1e-3, \"sync_s\": 1e-4}]}");
    sy__device_model_init(&mc, 2, &c, p);
    sy__cost_link(&ma, &mc, &l);
    cr_assert(l.measured);
    cr_assert_float_eq(sy__cost_transfer(&l, 1000000), 1e-4 + 1e-3 + 1e-3, 1e-15);
    sy__profile_destroy(p);
    st_check_leaks();
}

Test(cost_model, load_profile_reports_missing_files_and_unknown_devices)
{
    sy_runtime *rt = st_runtime();
    sy_planner *pl;
    cr_assert_eq(sy_planner_create(rt, &pl), SY_OK);
    cr_assert_eq(sy_planner_load_profile(pl, "/nonexistent/profile.json"), SY_E_IO);
    cr_assert(strstr(sy_planner_last_error(pl), "cannot open profile '/nonexistent/profile.json'"));
    char tmp[] = "/tmp/sy_profile_XXXXXX";
    int fd = mkstemp(tmp);
    cr_assert_geq(fd, 0);
    const char *json = "{" HEAD "\"device\": \"npu7\"}";
    cr_assert_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    cr_assert_eq(sy_planner_load_profile(pl, tmp), SY_E_NOT_FOUND);
    cr_assert(strstr(sy_planner_last_error(pl), "describes device 'npu7', which this runtime "
                                                "lacks"));
    unlink(tmp);
    cr_assert_eq(sy_planner_load_profile(pl, NULL), SY_E_INVALID_ARG);
    cr_assert_eq(sy_planner_load_profile(NULL, tmp), SY_E_INVALID_ARG);
    sy_planner_destroy(pl);
    sy_runtime_destroy(rt);
    st_check_leaks();
}

Test(cost_model, power_figures_per_device_op_family_and_link_with_defaults_elsewhere)
{
    sy__profile *p = parse_ok(
        "{" HEAD "\"device\": \"cpu\", \"power\": {\"idle_w\": 0.5, \"active_w\": 4},"
        "\"ops\": [{\"op\": \"matmul\", \"dtype\": \"q4_0\", \"overhead_s\": 1e-6, \"active_w\": 9},"
        "{\"op\": \"matmul\", \"active_w\": 7},"
        "{\"op\": \"*\", \"overhead_s\": 2e-6}],"
        "\"links\": [{\"to\": \"npu\", \"j_per_byte\": 3e-10}]}");
    sy_device_desc d = cpu_desc(0, 0, 1);
    sy__device_model m;
    sy__device_model_init(&m, 0, &d, p);
    cr_assert(m.power_measured);
    cr_assert_float_eq(m.idle_w, 0.5, 1e-12);
    mm_node q4, f32;
    make_matmul(&q4, SY_DTYPE_Q4_0, 64, 64, 1);
    make_matmul(&f32, SY_DTYPE_F32, 64, 64, 1);
    cr_assert_float_eq(sy__power_node(&m, &q4.node), 9.0, 1e-12);
    /* A power-only entry sets the watts, not the time. */
    cr_assert_float_eq(sy__power_node(&m, &f32.node), 7.0, 1e-12);
    bool unm;
    cr_assert_float_eq(sy__cost_node(&m, &f32.node, &unm), 2e-6, 1e-15);
    cr_assert_not(unm);
    sy_tensor x = {.dtype = SY_DTYPE_F32, .ne = {8, 1, 1, 1}}, y = x;
    sy_node add = {.op = SY_OP_ADD, .n_inputs = 2, .inputs = {&x, &x}, .output = &y};
    cr_assert_float_eq(sy__power_node(&m, &add), 4.0, 1e-12);
    /* A device without power figures gets its kind's defaults, flagged. */
    sy_device_desc nd = cpu_desc(0, 0, 0);
    nd.kind = SY_DEVICE_NPU;
    snprintf(nd.name, sizeof nd.name, "npu");
    sy__device_model n;
    sy__device_model_init(&n, 1, &nd, NULL);
    cr_assert_not(n.power_measured);
    cr_assert_float_eq(sy__power_node(&n, &add), SY__DEFAULT_NPU_ACTIVE_W, 1e-12);
    cr_assert_float_eq(n.idle_w, SY__DEFAULT_NPU_IDLE_W, 1e-12);
    sy__link_model l;
    sy__cost_link(&m, &n, &l);
    cr_assert_float_eq(sy__cost_transfer_j(&l, 1000), 3e-7, 1e-18);
    sy__cost_link(&n, &m, &l); /* found in the cpu's profile, reverse direction */
    cr_assert_float_eq(l.j_per_byte, 3e-10, 1e-20);
    sy_device_desc ud = cpu_desc(0, 0, 1);
    snprintf(ud.name, sizeof ud.name, "other");
    sy__device_model u;
    sy__device_model_init(&u, 2, &ud, NULL);
    sy__cost_link(&m, &u, &l);
    cr_assert(l.zero_copy);
    cr_assert_float_eq(sy__cost_transfer_j(&l, 1000), 0.0, 1e-20, "zero-copy moves no byte");
    l.zero_copy = false;
    cr_assert_float_eq(sy__cost_transfer_j(&l, 1000), 1000 * SY__DEFAULT_LINK_J_PER_BYTE, 1e-18);
    parse_fails("{" HEAD "\"device\": \"cpu\", \"ops\": [{\"op\": \"add\", \"active_w\": -1}]}",
                "ops[0].active_w: expected a non-negative number");
    parse_fails("{" HEAD "\"device\": \"cpu\", \"links\": [{\"to\": \"x\", \"j_per_byte\": \"a\"}]}",
                "links[0].j_per_byte: expected a non-negative number");
    sy__profile_destroy(p);
    st_check_leaks();
}
