/* Switchyard status codes.
 *
 * Every fallible function of the library and of the plugin ABI returns an
 * sy_status: SY_OK (0) on success, a negative code otherwise.  The codes are
 * part of the stable ABI: append only, never renumber. */
#ifndef SWITCHYARD_STATUS_H
#define SWITCHYARD_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define SY_STATUS_TABLE(X)                                                        \
    X(SY_OK, 0, "success")                                                       \
    X(SY_E_INVALID_ARG, -1, "invalid argument")                                  \
    X(SY_E_NO_MEMORY, -2, "out of memory")                                       \
    X(SY_E_UNSUPPORTED, -3, "operation not supported")                           \
    X(SY_E_FORMAT, -4, "malformed input file")                                   \
    X(SY_E_DEVICE, -5, "device error")                                           \
    X(SY_E_PLUGIN_ABI, -6, "plugin ABI mismatch")                                \
    X(SY_E_PLUGIN, -7, "plugin failed")                                          \
    X(SY_E_IO, -8, "input/output error")                                         \
    X(SY_E_NOT_FOUND, -9, "not found")                                           \
    X(SY_E_SHAPE, -10, "shape mismatch")                                         \
    X(SY_E_DTYPE, -11, "unsupported data type")                                  \
    X(SY_E_GRAPH, -12, "invalid graph")                                          \
    X(SY_E_STATE, -13, "call not valid in the current state")                    \
    X(SY_E_LIMIT, -14, "limit exceeded")                                         \
    X(SY_E_INTERNAL, -15, "internal error")

typedef enum sy_status {
#define SY_STATUS_ENUM_(name, value, msg) name = value,
    SY_STATUS_TABLE(SY_STATUS_ENUM_)
#undef SY_STATUS_ENUM_
} sy_status;

/* Returns the identifier of |st| ("SY_E_FORMAT"), or "SY_E_UNKNOWN".
 * Ownership: static storage.  Thread-safety: safe. */
const char *sy_status_name(sy_status st);

/* Returns a short English description of |st|.
 * Ownership: static storage.  Thread-safety: safe. */
const char *sy_status_str(sy_status st);

#ifdef __cplusplus
}
#endif
#endif
